"""A gauge's or bar gauge's values as Grafana lists them after the panel's `reduce` and `sortBy` steps (pure).

Grafana's Prometheus data source gives each series its own frame: a `Value` field carrying the labels, titled
by the query's legend. `reduce` (mode seriesToRows) turns the frames into one table: a `Field` column (the
value field's name, `Value`, when labels become fields; else its title), a column per label, and a column
per reducer (`Last *`). `sortBy` orders those rows by one column; the panel titles each row by its
`displayName` (with `${__data.fields.<name>}` read from the row), else by the row's text cells joined by
spaces. This module mirrors that code of @grafana/data (transformers/reduce, sortBy, fieldDisplay) for the
transformations the dashboards use.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from gpudash.preview.panel import as_dict, type_setting
from gpudash.preview.series import Series
from gpudash.preview.units import as_number, format_value

REDUCER_NAMES = {"lastNotNull": "Last *", "last": "Last", "max": "Max", "min": "Min", "mean": "Mean"}
_DATA_FIELD = re.compile(r"\$\{__data\.fields\.(\w+)\}")
Row = dict[str, Any]


def _steps(panel: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [as_dict(t.get("options")) for t in panel.get("transformations") or []
            if isinstance(t, dict) and t.get("id") == kind]


def _display_name(panel: dict[str, Any]) -> str:
    """The display name an override gives the number fields (or the field defaults give every field)."""
    field_config = as_dict(panel.get("fieldConfig"))
    for override in field_config.get("overrides") or []:
        if as_dict(override.get("matcher")).get("id") == "byType":
            for prop in override.get("properties") or []:
                if prop.get("id") == "displayName":
                    return str(prop.get("value") or "")
    return str(as_dict(field_config.get("defaults")).get("displayName") or "")


def _reduce(series: Sequence[Series], options: dict[str, Any]) -> tuple[list[str], list[Row], str]:
    """The columns, the rows and the value column of reduce's seriesToRows table."""
    reducer = (options.get("reducers") or ["lastNotNull"])[0]
    value = REDUCER_NAMES.get(reducer, reducer)
    labels_to_fields = bool(options.get("labelsToFields"))
    keys: list[str] = []
    if labels_to_fields:
        for one in series:
            keys += [k for k in one.labels if k not in keys]
    rows: list[Row] = []
    for one in series:
        row: Row = {"Field": "Value" if labels_to_fields else one.name}
        row.update({k: one.labels.get(k, "") for k in keys})
        row[value] = math.nan if one.last is None else one.last
        rows.append(row)
    return ["Field", *keys, value], rows, value


def _sorted(rows: list[Row], columns: list[str], value: str, options: dict[str, Any]) -> list[Row]:
    sort = (options.get("sort") or [{}])[0]
    column, desc = sort.get("field"), bool(sort.get("desc"))
    if column not in columns:
        return rows
    if column == value:  # numbers: a NaN compares as equal, kept last here
        present = sorted((r for r in rows if not math.isnan(r[value])), key=lambda r: r[value], reverse=desc)
        return present + [r for r in rows if math.isnan(r[value])]
    # Grafana compares text with Intl.Collator("en", sensitivity "base"): case-insensitive; empty text last.
    filled = sorted((r for r in rows if r[column]), key=lambda r: str(r[column]).casefold(), reverse=desc)
    return filled + [r for r in rows if not r[column]]


def _label_text(text: str, unit: Any) -> str:
    """A label field's cell as displayed: in the field's unit where it reads as a number ("5" as "5 °C")."""
    number = as_number(text)
    return text if number is None or unit in (None, "", "string") else format_value(number, str(unit))


def _title(row: Row, columns: list[str], value: str, display_name: str, label_unit: Any) -> str:
    if display_name:
        return _DATA_FIELD.sub(lambda m: _label_text(str(row.get(m.group(1), "")), label_unit), display_name)
    parts = [str(row[c]) for c in columns if c != value and str(row[c])]
    return " ".join(parts) or value


def value_rows(panel: dict[str, Any], series: Sequence[Series]) -> list[Series]:
    """The values a gauge or bar gauge shows, in its order and titled as Grafana titles them; a panel without
    a reduce step shows each series by its legend, in the order the answer gave them."""
    reduces = _steps(panel, "reduce")
    if not reduces or reduces[0].get("mode", "seriesToRows") != "seriesToRows":
        return list(series)
    columns, rows, value = _reduce(series, reduces[0])
    for options in _steps(panel, "sortBy"):
        rows = _sorted(rows, columns, value, options)
    display_name, label_unit = _display_name(panel), type_setting(panel, "string", "unit")
    return [Series(_title(row, columns, value, display_name, label_unit),
                   {c: str(row[c]) for c in columns if c != value}, (0.0,), (row[value],)) for row in rows]
