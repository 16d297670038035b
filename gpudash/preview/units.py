"""Grafana units as text: `87.3%`, `312 W`, `1.98 GHz`, `55.1 GiB` (pure; the units the dashboards use).

A unit is a row of data: a scale applied first, then a ladder of (factor, suffix) steps chosen by size.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Unit:
    ladder: tuple[tuple[float, str], ...]  # (factor, suffix), smallest first
    scale: float = 1.0  # applied before the ladder (percentunit: 100)


_SI = ((1.0, ""), (1e3, " K"), (1e6, " Mil"), (1e9, " Bil"), (1e12, " Tri"))
_IEC_FROM_MIB = ((1.0, " MiB"), (1024.0, " GiB"), (1024.0 ** 2, " TiB"), (1024.0 ** 3, " PiB"))
_IEC = ((1.0, " B"), (1024.0, " KiB"), (1024.0 ** 2, " MiB"), (1024.0 ** 3, " GiB"), (1024.0 ** 4, " TiB"))

UNITS: dict[str, Unit] = {
    "none": Unit(((1.0, ""),)),
    "short": Unit(_SI),
    "percent": Unit(((1.0, "%"),)),
    "percentunit": Unit(((1.0, "%"),), scale=100.0),
    "celsius": Unit(((1.0, " °C"),)),
    "watt": Unit(((1.0, " W"), (1e3, " kW"), (1e6, " MW"))),
    "kwatt": Unit(((1.0, " kW"), (1e3, " MW"))),
    "kwatth": Unit(((1.0, " kWh"), (1e3, " MWh"), (1e6, " GWh"))),
    "watth": Unit(((1.0, " Wh"), (1e3, " kWh"), (1e6, " MWh"))),
    "rotmhz": Unit(((1.0, " MHz"), (1e3, " GHz"))),
    "hertz": Unit(((1.0, " Hz"), (1e3, " kHz"), (1e6, " MHz"), (1e9, " GHz"))),
    "mbytes": Unit(_IEC_FROM_MIB),
    "bytes": Unit(_IEC),
    "decbytes": Unit(((1.0, " B"), (1e3, " kB"), (1e6, " MB"), (1e9, " GB"), (1e12, " TB"))),
    "Bps": Unit(((1.0, " B/s"), (1e3, " kB/s"), (1e6, " MB/s"), (1e9, " GB/s"), (1e12, " TB/s"))),
    "binBps": Unit(((1.0, " B/s"), (1024.0, " KiB/s"), (1024.0 ** 2, " MiB/s"), (1024.0 ** 3, " GiB/s"))),
    "s": Unit(((1e-3, " ms"), (1.0, " s"), (60.0, " min"), (3600.0, " hour"), (86400.0, " day"), (604800.0, " week"),
               (31536000.0, " year"))),
    "h": Unit(((1.0, " hour"), (24.0, " day"), (168.0, " week"), (8760.0, " year"))),
    "ms": Unit(((1.0, " ms"), (1e3, " s"), (60e3, " min"))),
}


# Grafana writes a time above 1 in a larger rung in the plural ("19 mins", "1.25 days"), never in the unit's own
# first rung ("2.50 hour" in unit h)
_PLURAL = (" min", " hour", " day", " week", " year")


def _decimals(value: float) -> int:
    """Grafana's decimals for a value without a set count (getDecimalsForValue): 0.7 -> 3, 4.04 -> 2, 65 -> 0."""
    if value % 1 == 0:
        return 0
    magnitude = math.floor(math.log(abs(value)) / math.log(10))
    decimals = -magnitude + 1
    if abs(value) / 10.0 ** -decimals > 2.25:
        decimals += 1
    return max(0, decimals)


def _js_string(value: float) -> str:
    """A number as JavaScript's String() writes it (no ".0" on whole numbers)."""
    return str(int(value)) if value == int(value) and abs(value) < 1e21 else repr(value)


def _fixed(value: float, decimals: int | None) -> str:
    """Grafana's toFixed: Math.round to the decimals (half up), then padded with zeros to them."""
    decimals = _decimals(value) if decimals is None else decimals
    if value == 0:
        return f"{0:.{decimals}f}"
    factor = 10 ** max(0, decimals) if decimals else 1
    text = _js_string(math.floor(value * factor + 0.5) / factor)
    if "e" in text:
        return text
    precision = len(text) - text.index(".") - 1 if "." in text else 0
    if precision < decimals:
        text = (text if precision else text + ".") + "0" * (decimals - precision)
    return text


def format_value(value: float | None, unit: str | None, decimals: int | None = None) -> str:
    """`value` in `unit` as Grafana writes it; an unknown unit is written after the number."""
    if value is None or math.isnan(value):
        return "NaN" if value is not None else "-"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    kind, _, custom = (unit or "").partition(":")
    if custom and kind in ("suffix", "prefix"):  # Grafana's custom units: "suffix:pp" is "2.50 pp"
        return f"{_fixed(value, decimals)} {custom}" if kind == "suffix" else f"{custom}{_fixed(value, decimals)}"
    known = UNITS.get(unit or "none")
    if known is None:
        return f"{_fixed(value, decimals)} {unit}"
    scaled = value * known.scale
    factor, suffix = known.ladder[0] if scaled else next((r for r in known.ladder if r[0] == 1.0), known.ladder[0])
    for step_factor, step_suffix in known.ladder:
        if scaled and abs(scaled) >= step_factor:
            factor, suffix = step_factor, step_suffix
    shown = scaled / factor
    plural = "s" if suffix in _PLURAL and suffix != known.ladder[0][1] and abs(shown) > 1 else ""
    return f"{_fixed(shown, decimals)}{suffix}{plural}"


_NUMBER = re.compile(r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*")


def as_number(text: str) -> float | None:
    """A text cell's number, where Grafana's display reads one (lodash toNumber): "7" -> 7.0, "GPU-1" -> None."""
    return float(text) if _NUMBER.fullmatch(text) else None


# moment's fromNow() (Grafana's dateTimeFromNow): (below this many seconds, its text; n = the count in `per`)
_FROM_NOW = ((45, "a few seconds", 1), (90, "a minute", 60), (45 * 60, "{n} minutes", 60), (90 * 60, "an hour", 3600),
             (22 * 3600, "{n} hours", 3600), (36 * 3600, "a day", 86400), (26 * 86400, "{n} days", 86400),
             (45 * 86400, "a month", 30 * 86400), (320 * 86400, "{n} months", 30 * 86400),
             (548 * 86400, "a year", 365 * 86400))


def from_now(epoch_ms: float, now_s: float) -> str:
    """An epoch in milliseconds as Grafana's dateTimeFromNow unit writes it: "12 minutes ago", "in 2 hours"."""
    seconds = now_s - epoch_ms / 1000
    size = abs(seconds)
    text = f"{round(size / (365 * 86400))} years"
    for below, words, per in _FROM_NOW:
        if size < below:
            text = words.format(n=round(size / per))
            break
    return f"{text} ago" if seconds >= 0 else f"in {text}"
