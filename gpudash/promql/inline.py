"""Recorded series replaced by the expressions that record them, for whatever evaluates rules over a history that
holds only the raw samples: the backtest's alerts, and every backfill of the recording rules themselves (a
recording that reads another one would come out empty there, as nothing recorded the one it reads).

Each replacement reads exactly what the recorded series would have held at evaluation timestamps aligned to the
interval I of the group that records it:

- `rec`               -> `(expr)`                                  its value now
- `rec[W]`            -> `(expr)[W:I]`                             a subquery at the rule interval I
- `rec offset X`      -> `last_over_time((expr)[I:I] offset X)`    its value at the last evaluation by then
- `rec[W] offset X`   -> `(expr)[W:I] offset X`

Subquery steps are aligned to multiples of I. Where the evaluations are too (the backtest's), each reads exactly
the samples a recorded series would; where they are not (Prometheus and promtool's backfill shift a group's
evaluations by a fixed part of its interval), a series read over a range or at an offset is read at the aligned
steps just before those evaluations. A recorded series holds nothing where its expression returned nothing, and
neither does its replacement.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import yaml

from gpudash.config.durations import parse_duration
from gpudash.errors import ConfigError

_NAME_CHARS = "a-zA-Z0-9_:"
_DURATION = r"[0-9][0-9smhdwy]*"
_DEPTH = 8  # a recording may read another; the registry is shallow


def _reference(name: str) -> re.Pattern[str]:
    # The name as a whole identifier, then an optional range and an optional offset.
    return re.compile(rf"(?<![{_NAME_CHARS}])({re.escape(name)})(?![{_NAME_CHARS}{{(])"
                      rf"(\[(?P<range>{_DURATION})\])?(\s+offset\s+(?P<offset>-?{_DURATION}))?")


def inline(expr: str, recordings: Mapping[str, str], interval_s: int,
           intervals: Mapping[str, int] | None = None) -> str:
    """`expr` with every recorded series it reads replaced by the expression that records it; a series read over
    a range becomes a subquery at the interval of the group recording it (`intervals`, else `interval_s`)."""
    for _ in range(_DEPTH):
        before = expr
        for name, body in recordings.items():
            if re.search(rf"(?<![{_NAME_CHARS}]){re.escape(name)}\{{", expr):
                raise ConfigError(f"cannot inline recorded series {name}: a selector with matchers reads it")
            step = f"{(intervals or {}).get(name, interval_s)}s"

            def replace(match: re.Match[str], body: str = body, step: str = step) -> str:
                window, offset = match.group("range"), match.group("offset")
                if window and offset:
                    return f"({body})[{window}:{step}] offset {offset}"
                if window:
                    return f"({body})[{window}:{step}]"
                if offset:
                    return f"last_over_time(({body})[{step}:{step}] offset {offset})"
                return f"({body})"

            expr = _reference(name).sub(replace, expr)
        if expr == before:
            return expr
    raise ConfigError("recording rules read each other in a cycle; cannot inline them")


def reads_recorded(expr: str, recordings: Mapping[str, str]) -> list[str]:
    """The recorded series an expression reads."""
    return [name for name in recordings if _reference(name).search(expr)]


def _group_interval(group: Mapping[str, Any], default_s: int) -> int:
    if group.get("interval") is None:
        return default_s
    try:
        return parse_duration(str(group["interval"])).seconds
    except ValueError as exc:
        raise ConfigError(f"recording rule group {group.get('name')}: interval: {exc}") from None


def inlined_rule_file(text: str, default_interval_s: int) -> str:
    """A recording rule file (YAML) whose every rule reads only raw series: each recorded series a rule reads
    replaced by the expression recording it, at the interval of the group recording it (`default_interval_s` for a
    group that names none). What a backfill evaluates, rule by rule, against a Prometheus holding only the raw
    samples, to write what the same rules write live, where each reads the recordings evaluated before it."""
    document: dict[str, Any] = yaml.safe_load(text)
    recordings: dict[str, str] = {}
    intervals: dict[str, int] = {}
    for group in document["groups"]:
        for rule in group["rules"]:
            if "record" in rule:
                recordings[str(rule["record"])] = str(rule["expr"])
                intervals[str(rule["record"])] = _group_interval(group, default_interval_s)
    for group in document["groups"]:
        for rule in group["rules"]:
            rule["expr"] = inline(str(rule["expr"]), recordings, default_interval_s, intervals)
    return yaml.safe_dump(document, sort_keys=False, width=1 << 20)
