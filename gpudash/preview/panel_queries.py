"""What a panel asks Prometheus, as Grafana would send it: variables chosen, built-ins filled (pure).

Variables are chosen as Grafana does on a first load without a saved selection: a multi-value variable
with All takes All (its `allValue`, else `.*`); any other query variable takes the first of its values,
looked up in dashboard order so a chained variable (`$instance` within `$cluster`) sees the one before it.
The lookup itself is passed in (the edge asks Prometheus; tests hand a table). `$__interval`,
`$__rate_interval` and `$__range` are the check's (gpudash.check.queries), so preview and check agree.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gpudash.check.prometheus_api import TimeRange
from gpudash.check.queries import Interpolation, interpolate

_LABEL_VALUES = re.compile(r"^\s*label_values\(\s*(?:(?P<match>.*\S)\s*,\s*)?(?P<label>\w+)\s*\)\s*$", re.S)
ALL = "$__all"

LabelValues = Callable[[str, "str | None"], list[str]]  # (label, series selector or None) -> values


@dataclass(frozen=True)
class PanelQuery:
    ref: str
    expr: str
    legend: str | None
    instant: bool


def window(end: float, range_s: int, scrape_interval_s: int) -> TimeRange:
    """The time grid of a range query: `range_s` back from `end`, the end aligned down to the step."""
    step = Interpolation(range_s, scrape_interval_s).interval_s
    return TimeRange(math.floor(end / step) * step, range_s, step)


def builtins(range_s: int, scrape_interval_s: int) -> dict[str, str]:
    return Interpolation(range_s, scrape_interval_s).builtins()


def lookup_of(query: Any) -> tuple[str, str | None] | None:
    """(label, selector) of a `label_values(selector, label)` variable query; None for anything else."""
    text = query.get("query") if isinstance(query, dict) else query
    found = _LABEL_VALUES.match(str(text or ""))
    return (found.group("label"), found.group("match")) if found else None


def _current(variable: dict[str, Any]) -> str | None:
    current = variable.get("current") if isinstance(variable.get("current"), dict) else {}
    value = current.get("value") if isinstance(current, dict) else None
    if isinstance(value, list):
        value = value[0] if len(value) == 1 else ("|".join(map(str, value)) if value else None)
    return None if value in (None, "", ALL) else str(value)


def _first_option(variable: dict[str, Any]) -> str:
    options = [o for o in variable.get("options") or [] if isinstance(o, dict)]
    if options:
        return str(options[0].get("value", ""))
    query = str(variable.get("query") or "")
    return query.split(",")[0].strip()


def choose_variables(dashboard: dict[str, Any], label_values: LabelValues,
                     fixed: Mapping[str, str] | None = None, extra: Mapping[str, str] | None = None
                     ) -> dict[str, str]:
    """Name -> the text each variable stands for in a query; `fixed` wins over any choice."""
    fixed = dict(fixed or {})
    values: dict[str, str] = {}
    templating = dashboard.get("templating") if isinstance(dashboard.get("templating"), dict) else {}
    for variable in (templating or {}).get("list") or []:
        if not isinstance(variable, dict) or not variable.get("name"):
            continue
        name, kind = str(variable["name"]), variable.get("type")
        if kind == "datasource":
            continue
        if name in fixed:
            values[name] = fixed[name]
        elif _current(variable) is not None:
            values[name] = str(_current(variable))
        elif variable.get("includeAll") and kind == "query":
            values[name] = str(variable.get("allValue") or ".*")
        elif kind == "query":
            lookup = lookup_of(variable.get("query") or variable.get("definition"))
            found: list[str] = []
            if lookup is not None:
                label, selector = lookup
                selector = interpolate(selector, {**values, **(extra or {})}) if selector else None
                found = sorted(label_values(label, selector), key=_natural)
            values[name] = found[0] if found else ""
        else:
            values[name] = _first_option(variable)
    return {**values, **fixed}


def _natural(text: str) -> tuple[Any, ...]:
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


def panel_queries(panel: dict[str, Any], values: Mapping[str, str]) -> list[PanelQuery]:
    """The panel's visible queries with every variable filled in."""
    out = []
    for index, target in enumerate(panel.get("targets") or []):
        if not isinstance(target, dict) or target.get("hide") or not target.get("expr"):
            continue
        instant = bool(target.get("instant")) and not target.get("range")
        if panel.get("type") == "table" and target.get("format") == "table":
            instant = instant or not target.get("range")
        out.append(PanelQuery(str(target.get("refId") or chr(ord("A") + index)),
                              interpolate(str(target["expr"]), values), target.get("legendFormat"), instant))
    return out
