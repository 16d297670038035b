"""Prometheus answers as the series and rows a panel draws, named by the query's legend (pure)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpudash.preview.panel import as_dict

_LEGEND = re.compile(r"\{\{\s*(\w+)\s*\}\}")


@dataclass(frozen=True)
class Series:
    name: str
    labels: Mapping[str, str]
    times: tuple[float, ...]
    values: tuple[float, ...]
    ref: str = "A"

    @property
    def last(self) -> float | None:
        """The last value that is a number (Grafana's lastNotNull)."""
        return next((v for v in reversed(self.values) if not math.isnan(v)), None)


@dataclass(frozen=True)
class PanelData:
    """What one panel's queries returned; `errors` are per-query texts (the panel still draws the rest)."""

    series: tuple[Series, ...] = ()
    errors: tuple[str, ...] = ()
    frames: tuple[tuple[str, tuple[Series, ...]], ...] = field(default=())  # (refId, its series), for tables


def legend(fmt: str | None, labels: Mapping[str, str]) -> str:
    """A legend format filled from the labels (`GPU {{gpu}}`); without one, the series' label set."""
    if fmt and fmt not in ("__auto", "__table__"):
        return _LEGEND.sub(lambda m: labels.get(m.group(1), ""), fmt)
    name = labels.get("__name__", "")
    inner = ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()) if k != "__name__")
    return f"{name}{{{inner}}}" if inner else name or "value"


def _number(text: Any) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


def to_series(result: Sequence[Any], fmt: str | None, ref: str) -> tuple[Series, ...]:
    """Series of a query_range (`values`) or query (`value`) answer; a scalar answer is one unnamed series."""
    if len(result) == 2 and not isinstance(result[0], dict):
        return (Series(fmt or "value", {}, (float(result[0]),), (_number(result[1]),), ref),)
    out = []
    for item in result:
        if not isinstance(item, dict):
            continue
        labels = {str(k): str(v) for k, v in (item.get("metric") or {}).items()}
        points = item.get("values") or ([item["value"]] if "value" in item else [])
        times = tuple(float(p[0]) for p in points)
        values = tuple(_number(p[1]) for p in points)
        out.append(Series(legend(fmt, labels), labels, times, values, ref))
    return tuple(out)


def _steps(panel: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [as_dict(t.get("options")) for t in panel.get("transformations") or []
            if isinstance(t, dict) and t.get("id") == kind]


def table_rows(panel: dict[str, Any], frames: Sequence[tuple[str, Sequence[Series]]]
               ) -> tuple[list[str], list[list[str | float]]]:
    """Columns and rows as Grafana's table shows instant queries after its `merge` (or `joinByField`),
    `filterByValue` and `organize` steps.

    A merge keys rows by their labels (less those an organize step drops before it: a merge joins only rows
    whose every label column agrees); a join keys them by its field alone, and a query that answered nothing
    adds no column to it. Each query's value is a column (`Value`, or `Value #A` with several), renamed and
    excluded by the panel's last organize options.
    """
    organize: dict[str, Any] = {}
    dropped: set[str] = set()  # columns an organize step removes from each frame before the merge
    merged = False
    for step in panel.get("transformations") or []:
        if not isinstance(step, dict):
            continue
        merged = merged or step.get("id") in ("merge", "joinByField")
        if step.get("id") == "organize":
            organize = step.get("options") or {}
            if not merged:
                dropped |= {k for k, v in (organize.get("excludeByName") or {}).items() if v}
    excluded = {k for k, v in (organize.get("excludeByName") or {}).items() if v}
    renamed: dict[str, str] = organize.get("renameByName") or {}
    joins = _steps(panel, "joinByField")
    join_on = str(joins[0].get("byField") or "") if joins else ""
    several = len(frames) > 1
    label_columns: list[str] = []
    rows: dict[Any, dict[str, str | float]] = {}
    for ref, series in frames:
        value_column = f"Value #{ref}" if several else "Value"
        for one in series:
            labels = {k: v for k, v in one.labels.items() if k not in dropped}
            if join_on and join_on not in labels:
                continue
            label_columns += [name for name in labels if name not in label_columns]
            key = labels[join_on] if join_on else tuple(sorted(labels.items()))
            row = rows.setdefault(key, {})
            row.update(labels)
            row[value_column] = one.last if one.last is not None else math.nan
    value_columns = [f"Value #{ref}" if several else "Value" for ref, series in frames if series or not join_on]
    columns = [c for c in [*sorted(label_columns), *value_columns] if c not in excluded and c != "Time"]
    kept = [row for row in rows.values() if all(_kept(row, step) for step in _steps(panel, "filterByValue"))]
    header = [renamed.get(c, c) for c in columns]
    body = [[row.get(c, "") for c in columns] for row in kept]
    return header, _sorted_rows(panel, columns, header, body)


def _blank(value: Any) -> bool:
    return value is None or value == "" or (isinstance(value, float) and math.isnan(value))


def _kept(row: dict[str, str | float], options: dict[str, Any]) -> bool:
    """Whether a filterByValue step keeps the row (the isNull / isNotNull conditions the dashboards use)."""
    tests = {"isNull": _blank, "isNotNull": lambda v: not _blank(v)}
    found = [tests[as_dict(f.get("config")).get("id", "")](row.get(str(f.get("fieldName")), ""))
             for f in options.get("filters") or [] if as_dict(f.get("config")).get("id") in tests]
    matched = (all(found) if options.get("match", "any") == "all" else any(found)) if found else True
    return matched if options.get("type", "include") == "include" else not matched


def _sorted_rows(panel: dict[str, Any], columns: list[str], header: list[str],
                 body: list[list[str | float]]) -> list[list[str | float]]:
    """The rows in the order of the panel's sortBy step (on a column by its title or its name before renaming);
    numbers compared as numbers, a blank or NaN last, as Grafana's sortBy leaves them."""
    steps = _steps(panel, "sortBy")
    sort = as_dict((steps[-1].get("sort") or [{}])[0]) if steps else {}
    field_ = sort.get("field")
    index = header.index(field_) if field_ in header else columns.index(field_) if field_ in columns else None
    if index is None:
        return body

    def blank(row: list[str | float]) -> bool:
        v = row[index]
        return v == "" or (isinstance(v, float) and math.isnan(v))

    filled = sorted((r for r in body if not blank(r)), key=lambda r: (isinstance(r[index], str), r[index]),
                    reverse=bool(sort.get("desc")))
    return filled + [r for r in body if blank(r)]
