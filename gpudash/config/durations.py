"""Durations as people write them, parsed and written in one place.

Three spellings, each for the caller that meets it:

- Prometheus durations (`parse_duration`, `duration_text`): ``30s``, ``5m``, ``1h30m``, ``1d``, whole seconds,
  positive and at most 10 years; thresholds.yaml, gpudash.yaml, rule windows, ``check --range``.
- Grafana intervals (`grafana_ms`): one number and one unit of ms, s, m, h, d, w, M (30 days) or y (365 days);
  a dashboard's refresh and time range. A caller may allow fewer units.
- Fractional seconds (`parse_seconds`): ``90``, ``2.5s``, ``5m``, ``1h30m``, optionally ``500ms``; the exporter's
  intervals and the simulated faults' times.

Standard library only: the exporter, deployed on every GPU node, imports it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# At most 10 years: Prometheus holds a duration as int64 milliseconds (about 292 years), and a window plus
# an offset must stay far inside that; no monitoring window comes near 10 years.
MAX_DURATION_SECONDS = 3650 * 86400
MAX_DURATION_TEXT = "3650d (10 years)"
DURATION_EXPECTED = "expected a positive duration such as 5m or 1h"

# Prometheus' units, largest first, as parse_duration reads them and duration_text writes them.
_PROMETHEUS_UNITS = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))
# ASCII digits only, as Prometheus reads them: Python's \d (and int()) also take a fullwidth or Arabic-Indic 2,
# which would be written into a rule file that Prometheus refuses.
_PROMETHEUS = re.compile("".join(rf"(?:([0-9]+){unit})?" for unit, _ in _PROMETHEUS_UNITS))

# Grafana's interval units in milliseconds (its gtime package: a month is 30 days, a year 365).
GRAFANA_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000,
                   "M": 2_592_000_000, "y": 31_536_000_000}
_GRAFANA = re.compile(r"([0-9]+)(ms|s|m|h|d|w|M|y)")

_NUMBER = r"([0-9]+(?:\.[0-9]+)?)"
_SECONDS = re.compile(rf"(?:{_NUMBER}h)?(?:{_NUMBER}m)?(?:{_NUMBER}s?)?")
_MILLISECONDS = re.compile(rf"{_NUMBER}ms")


@dataclass(frozen=True, order=True)
class Duration:
    """A positive Prometheus duration; `str()` gives the text PromQL and rule files take."""

    seconds: int
    text: str = field(compare=False)

    def __str__(self) -> str:
        return self.text


def parse_duration(text: str) -> Duration:
    """Parse `30s`, `5m`, `1h30m`, `1d` up to 10 years; raise ValueError saying what is wrong otherwise.

    The text is kept as written (``90s`` stays ``90s``), so generated files show what the config says.
    """
    stripped = text.strip()
    match = _PROMETHEUS.fullmatch(stripped)
    if not stripped or not match:
        raise ValueError(f"{DURATION_EXPECTED}, got {text!r}")
    digits = [(g or "0").lstrip("0") or "0" for g in match.groups()]
    # More than 12 digits is over the bound in any unit (and int() refuses a few thousand of them).
    if any(len(d) > 12 for d in digits):
        raise ValueError(f"expected a duration of at most {MAX_DURATION_TEXT}, got {text!r}")
    seconds = sum(int(d) * unit for d, (_, unit) in zip(digits, _PROMETHEUS_UNITS, strict=True))
    if seconds <= 0:
        raise ValueError(f"{DURATION_EXPECTED}, got {text!r}")
    if seconds > MAX_DURATION_SECONDS:
        raise ValueError(f"expected a duration of at most {MAX_DURATION_TEXT}, got {text!r}")
    return Duration(seconds, stripped)


def duration_text(seconds: int) -> str:
    """Prometheus duration text for a whole number of seconds: 450 -> 7m30s, 3600 -> 1h, 0 -> 0s."""
    parts = []
    for name, unit in _PROMETHEUS_UNITS:
        if seconds >= unit:
            parts.append(f"{seconds // unit}{name}")
            seconds %= unit
    return "".join(parts) or "0s"


def grafana_ms(text: str, units: tuple[str, ...] = tuple(GRAFANA_UNIT_MS)) -> int | None:
    """A Grafana interval (``500ms``, ``6h``, ``1M``) in milliseconds, or None when `text` is not one.

    `units` narrows what is accepted (``("s", "m", "h", "d", "w")`` for a time range); `text` is taken as
    given, so a caller strips it or not.
    """
    match = _GRAFANA.fullmatch(text)
    if not match or match.group(2) not in units:
        return None
    return int(match.group(1)) * GRAFANA_UNIT_MS[match.group(2)]


def parse_seconds(text: str, *, milliseconds: bool = False) -> float:
    """``90``, ``90s``, ``2.5s``, ``5m``, ``1h30m`` (and ``500ms`` when asked) -> seconds; ValueError(text) otherwise.

    A bare number is seconds. Surrounding whitespace is ignored.
    """
    stripped = text.strip()
    if milliseconds:
        ms = _MILLISECONDS.fullmatch(stripped)
        if ms:
            return float(ms.group(1)) / 1000.0
    match = _SECONDS.fullmatch(stripped)
    if not stripped or not match or not any(match.groups()):
        raise ValueError(text)
    hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return hours * 3600 + minutes * 60 + seconds
