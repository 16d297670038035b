"""Grafana units as text: `87.3%`, `312 W`, `1.98 GHz`, `55.1 GiB` (pure; the units the dashboards use).

A unit is a row of data: a scale applied first, then a ladder of (factor, suffix) steps chosen by size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal


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
    "s": Unit(((1.0, " s"), (60.0, " min"), (3600.0, " hour"), (86400.0, " day"))),
    "ms": Unit(((1.0, " ms"), (1e3, " s"), (60e3, " min"))),
}


def _decimals(value: float, decimals: int | None) -> int:
    if decimals is not None:
        return decimals
    size = abs(value)
    return 0 if size >= 100 or size == int(size) else 1 if size >= 10 else 2


def _fixed(value: float, decimals: int) -> str:
    """Rounded half away from zero, as JavaScript's toFixed (Grafana) does: 87.25 -> 87.3, not 87.2."""
    return f"{Decimal(repr(float(value))).quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP):f}"


def format_value(value: float | None, unit: str | None, decimals: int | None = None) -> str:
    """`value` in `unit` as Grafana writes it; an unknown unit is written after the number."""
    if value is None or math.isnan(value):
        return "NaN" if value is not None else "-"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    known = UNITS.get(unit or "none")
    if known is None:
        return f"{_fixed(value, _decimals(value, decimals))} {unit}"
    scaled = value * known.scale
    factor, suffix = known.ladder[0]
    for step_factor, step_suffix in known.ladder:
        if abs(scaled) >= step_factor:
            factor, suffix = step_factor, step_suffix
    shown = scaled / factor
    return f"{_fixed(shown, _decimals(shown, decimals))}{suffix}"


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
