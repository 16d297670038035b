"""The texts a table, gauge or bar gauge panel shows, row by row, as Grafana writes them (pure).

A table: its columns by their titles and each cell as Grafana's display processor writes it (value mappings
first, then the column's unit, `dateTimeFromNow` as "12 minutes ago", an empty cell as the noValue; a column
hidden by `custom.hideFrom.viz` left out); a gauge or bar gauge: each value's title and its value in the panel's
unit. The preview draws these texts, and the tests hold them against Grafana's own display code (@grafana/data).
"""

from __future__ import annotations

import math
from typing import Any

from gpudash.preview.mappings import mapped_text
from gpudash.preview.panel import as_dict, column_setting, defaults, type_setting
from gpudash.preview.series import PanelData, table_rows
from gpudash.preview.units import as_number, format_value, from_now
from gpudash.preview.value_rows import value_rows

NO_DATA = "No data"
Rows = tuple[list[str], list[list[str]]]


def no_value_text(panel: dict[str, Any]) -> str:
    """What a panel without data says: its noValue, else Grafana's "No data"."""
    value = defaults(panel).get("noValue")
    return str(value) if value not in (None, "") else NO_DATA


def value_text(panel: dict[str, Any], value: float | None) -> str:
    field = defaults(panel)
    return mapped_text(field.get("mappings"), value) or format_value(value, field.get("unit"), field.get("decimals"))


def cell_text(value: Any, unit: str | None, now_s: float, no_value: str | None = None, mappings: Any = None
              ) -> str:
    """A cell as Grafana's display writes it: a mapped value's text; a number in its column's unit, also a
    label that reads as one ("7" under `mbytes` is "7 MiB"); an empty cell as the column's noValue."""
    mapped = mapped_text(mappings, value)
    if mapped is not None:
        return mapped
    if isinstance(value, str) and unit and unit != "string" and as_number(value) is not None:
        value = as_number(value)
    if value == "" or (isinstance(value, float) and math.isnan(value)):
        return str(no_value or "")
    if isinstance(value, float) and unit == "dateTimeFromNow":
        return from_now(value, now_s)
    if isinstance(value, float):
        return format_value(value, unit)
    return str(value)


def table_texts(panel: dict[str, Any], data: PanelData, now_s: float) -> Rows:
    """Columns by title and cells as shown; no columns when there are no rows (Grafana shows noValue)."""
    header, rows = table_rows(panel, data.frames)
    if not rows:
        return [], []
    shown = [not as_dict(hide).get("viz") for hide in column_setting(panel, header, "custom.hideFrom", None)]
    if not all(shown):  # a column hidden from the table (kept for its data links), as Grafana 12.2+ hides it
        header = [h for h, keep in zip(header, shown, strict=True) if keep]
        rows = [[v for v, keep in zip(row, shown, strict=True) if keep] for row in rows]
    units, named = column_setting(panel, header, "unit"), column_setting(panel, header, "unit", None)
    label_units = [n if n is not None else type_setting(panel, "string", "unit") for n in named]
    settings = list(zip(units, label_units, column_setting(panel, header, "noValue"),
                        column_setting(panel, header, "mappings"), strict=True))
    return header, [[cell_text(v, label_unit if isinstance(v, str) else unit, now_s, empty, maps)
                     for v, (unit, label_unit, empty, maps) in zip(row, settings, strict=True)] for row in rows]


def gauge_texts(panel: dict[str, Any], data: PanelData) -> Rows:
    """[title, value] per value; without values one untitled row saying the noValue, as Grafana lists it."""
    rows = [[one.name, value_text(panel, one.last)] for one in value_rows(panel, data.series)]
    return ["title", "value"], rows or [["", no_value_text(panel)]]


def displayed(panel: dict[str, Any], data: PanelData, now_s: float) -> Rows:
    """A table's header and rows, or a gauge's [title, value] rows, in the order and words Grafana shows."""
    if panel.get("type") == "table":
        return table_texts(panel, data, now_s)
    return gauge_texts(panel, data)
