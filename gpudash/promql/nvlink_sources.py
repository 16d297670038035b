"""NVLink error counters as GPUNVLinkErrors reads them: per link where the bundled exporter publishes its
per-link counters (labels `link`, `error`), else per GPU from dcgm-exporter's totals, never both for one GPU.

The critical conditions (a recovery, a CRC storm) are recorded once per evaluation (`alert_states`); the
warning's rise over its window is built here too and read by the alert itself (rules/nvlink_alert.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpudash.catalog import NVLINK_ERROR_KINDS
from gpudash.config.durations import Duration
from gpudash.escape import re2_any
from gpudash.promql.query import PromQL

LINKS = "nvlink_link_errors"
# what each rule reads, by the bundled exporter's `error` label; the catalog names each one's per-GPU total
LINK_KINDS = {"crc": ("crc_flit", "crc_data"), "replay": ("replay",), "recovery": ("recovery",)}
GPU_KINDS = {k: tuple(dict(NVLINK_ERROR_KINDS)[e] for e in errors) for k, errors in LINK_KINDS.items()}
NL = "\n"


@dataclass(frozen=True)
class Source:
    """One source's selectors per kind (a kind it lacks: none) and the labels its rules keep."""

    by: str  # the labels of one link (or one GPU), card labels included when the rule carries them
    each: str  # `by` and the label that tells kinds apart within one metric ("error"), if any
    kinds: dict[str, tuple[str, ...]]
    yields_to: str | None  # per-link series of the same GPU, which win over these totals


def card_labels(q: PromQL) -> tuple[str, ...]:
    """The labels that name the card: its UUID, and its node's host name where the exporter sets one."""
    return q.profile.card_labels


def gpu_labels(q: PromQL) -> str:
    return f"cluster, instance, {q.gpu}"


def link_labels(q: PromQL) -> str:
    """The labels of one link where any GPU has per-link series, else of one GPU."""
    return f"{gpu_labels(q)}{', link' if q.has(LINKS) else ''}"


def sources(q: PromQL, card: tuple[str, ...]) -> list[Source]:
    gpu = gpu_labels(q)
    keep = "".join(f", {label}" for label in card)
    out = []
    if q.has(LINKS):
        by = f"{gpu}, link{keep}"
        kinds: dict[str, tuple[str, ...]] = {
            k: (q.metric(LINKS, (("error", "=~", re2_any(errors)),)),) for k, errors in LINK_KINDS.items()}
        out.append(Source(by, f"{by}, error", kinds, None))
    totals = {k: tuple(q.metric(key) for key in keys if q.has(key)) for k, keys in GPU_KINDS.items()}
    if any(totals.values()):
        links = q.per_gpu(q.metric(LINKS)) if q.has(LINKS) else None
        out.append(Source(f"{gpu}{keep}", f"{gpu}{keep}", totals, links))
    return out


def join(parts: list[str]) -> str:
    return f"{NL}or{NL}".join(parts)


def combine(q: PromQL, card: tuple[str, ...], build: Callable[[Source], list[str]]) -> str | None:
    """`build`'s parts for each source, the per-GPU totals giving way to a GPU's per-link series."""
    parts = []
    for s in sources(q, card):
        body = join(build(s))
        if body:
            parts.append(f"(\n{body}\n)\nunless on ({gpu_labels(q)})\n{s.yields_to}" if s.yields_to else body)
    if len(parts) > 1:  # each source in parentheses: `unless` binds tighter than `or`
        parts = [f"(\n{p}\n)" for p in parts]
    return join(parts) or None


def recoveries(s: Source) -> list[str]:
    return [f"max by ({s.by}) ({sel}) > 0" for sel in s.kinds["recovery"]]


def storms(window: Duration, per_second: float, s: Source) -> list[str]:
    return [f"max by ({s.by}) (rate({sel}[{window}]) >= {per_second:g})" for sel in s.kinds["crc"]]


def rises(window: Duration, levels: dict[str, float], s: Source) -> list[str]:
    def rise(sel: str, level: float) -> str:
        now, before = f"max by ({s.each}) ({sel})", f"max by ({s.each}) ({sel} offset {window})"
        return f"max by ({s.by}) ({now} - {before} >= {level:g})"

    return [rise(sel, level) for kind, level in levels.items() for sel in s.kinds[kind]]
