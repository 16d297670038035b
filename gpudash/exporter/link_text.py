"""The text of the exposition that is formatted once and kept: sample values to dcgm-exporter's precision, and
each GPU's NVLink link lines between two slow reads."""

from __future__ import annotations

import math
from collections.abc import Callable

from gpudash.catalog import NVLINK_ERROR_KINDS
from gpudash.exporter.source import LinkHealth


def number(value: float) -> str:
    """A sample value in the fewest characters, to dcgm-exporter's precision: six decimals (its %f), so a GPM
    ratio or a power draw is never longer than the line dcgm-exporter writes for it."""
    if type(value) is int:
        return str(value)
    if value != value:
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    rounded = round(float(value), 6)
    if rounded.is_integer() and abs(rounded) < 1e15:
        return str(int(rounded))
    return repr(rounded)


def link_error_tails(links: tuple[LinkHealth, ...]) -> tuple[str, ...]:
    return tuple(f',link="{link.link}",error="{kind}"}} {number(link.errors[kind])}\n'
                 for link in links for kind, _key in NVLINK_ERROR_KINDS if kind in link.errors)


def link_up_tails(links: tuple[LinkHealth, ...]) -> tuple[str, ...]:
    return tuple(f',link="{link.link}"}} {1 if link.up else 0}\n' for link in links)


# A GPU's links are read on the slow loop and kept as the same tuple until the next read, so their ~90 lines are
# formatted once per read rather than every sweep: one entry per GPU and family, replaced when its links are
# (checked by identity, which costs nothing where hashing 18 links per GPU did). It keeps the line ends, and the
# whole text for the labels it was last drawn with: a GPU with several copies (one per job) rebuilds each from
# the ends, and no copy's labels outlive the GPU's next render.
_LINK_TEXT: dict[tuple[str, str], tuple[tuple[LinkHealth, ...], tuple[str, ...], str, str]] = {}
_LINK_TEXT_MAX = 8192  # GPUs x 2 families in one process; more only when tests make many fleets


def link_text(tails_of: Callable[[tuple[LinkHealth, ...]], tuple[str, ...]], name: str, uuid: str,
              links: tuple[LinkHealth, ...], labels: str) -> str:
    """One family's lines of a GPU's links (`links`, as the last slow read left them) under `labels`."""
    key = (name, uuid)
    hit = _LINK_TEXT.get(key)
    if hit is not None and hit[0] is links and hit[2] == labels:
        return hit[3]
    tails = hit[1] if hit is not None and hit[0] is links else tails_of(links)
    head = f"{name}{{{labels}"
    text = "".join([head + tail for tail in tails])
    if len(_LINK_TEXT) >= _LINK_TEXT_MAX:
        _LINK_TEXT.clear()
    _LINK_TEXT[key] = (links, tails, labels, text)
    return text
