"""Panels of values: stat, gauge, bar gauge, table, text, drawn on the board in pixels (matplotlib)."""

from __future__ import annotations

import math
import re
import textwrap
from typing import Any

from gpudash.check.prometheus_api import TimeRange
from gpudash.preview.canvas import Canvas
from gpudash.preview.colors import BORDER, MUTED, TEXT, threshold_color, threshold_marks
from gpudash.preview.displayed import table_texts, value_text
from gpudash.preview.panel import defaults, number, options
from gpudash.preview.pixels import Box
from gpudash.preview.series import PanelData, Series
from gpudash.preview.table_columns import PADDING_PX, fitted, layout
from gpudash.preview.value_rows import value_rows

TABLE_ROW_PX = 22
ARC_START, ARC_SWEEP = 210.0, 240.0  # Grafana's gauge: an arc open at the bottom


def cells(box: Box, count: int) -> list[Box]:
    """`count` equal cells filling `box`, in the grid whose cells come closest to twice as wide as tall."""
    best, best_score = (1, max(1, count)), -1.0
    for columns in range(1, max(1, count) + 1):
        rows = math.ceil(count / columns)
        score = min(box.w / columns, 2 * box.h / rows)
        if score > best_score:
            best, best_score = (columns, rows), score
    columns, rows = best
    w, h = box.w // columns, box.h // rows
    return [Box(box.x + (i % columns) * w, box.y + (i // columns) * h, w, h) for i in range(count)]


def _range(panel: dict[str, Any], default: tuple[float, float]) -> tuple[float, float]:
    field = defaults(panel)
    low, high = number(field.get("min")), number(field.get("max"))
    low = default[0] if low is None else low
    high = default[1] if high is None else high
    return (low, high) if high > low else (low, low + 1)


def _unit_range(panel: dict[str, Any]) -> tuple[float, float]:
    return _range(panel, (0.0, 1.0) if defaults(panel).get("unit") == "percentunit" else (0.0, 100.0))


def stat_color(panel: dict[str, Any], value: float | None) -> str:
    """The colour a stat shows its value in (by thresholds; percentage steps against min/max, else 0-100)."""
    low, high = _range(panel, (0.0, 100.0))
    return threshold_color(panel, value, low, high)


def _sparkline(canvas: Canvas, box: Box, one: Series, span: TimeRange, color: str) -> None:
    points = [(t, v) for t, v in zip(one.times, one.values, strict=True) if not math.isnan(v)]
    if len(points) < 2:
        return
    low, high = min(v for _, v in points), max(v for _, v in points)
    high = high if high > low else low + 1

    def x(t: float) -> float:
        return box.x + box.w * (t - span.start) / max(1, span.range_s)

    def y(v: float) -> float:
        return box.y + box.h - box.h * (v - low) / (high - low)

    canvas.area([x(t) for t, _ in points], [y(v) for _, v in points], box.y + box.h, color, 0.2)


def draw_stat(canvas: Canvas, box: Box, panel: dict[str, Any], data: PanelData, span: TimeRange) -> None:
    shown = options(panel)
    mode = shown.get("colorMode", "value")
    series = list(data.series)
    for cell, one in zip(cells(box, len(series)), series, strict=True):
        value = one.last
        color = stat_color(panel, value)
        if mode == "background":
            canvas.rect(cell, color)
        text_color = TEXT if mode in ("none", "background") else color
        if shown.get("graphMode") == "area" and cell.h > 60:
            _sparkline(canvas, Box(cell.x, cell.y + cell.h * 3 // 5, cell.w, cell.h * 2 // 5), one, span, color)
        named = len(series) > 1 and one.name
        text = value_text(panel, value)
        size = min(cell.h * (0.42 if named else 0.55), cell.w / max(3, len(text)) * 1.3, 56)
        if named:
            canvas.text(cell.x + cell.w / 2, cell.y + cell.h * 0.2, one.name, min(13, cell.h * 0.2), TEXT,
                        ha="center", va="center")
        canvas.text(cell.x + cell.w / 2, cell.y + cell.h * (0.55 if named else 0.45), text, size, text_color,
                    ha="center", va="center", fontweight="bold")


def draw_gauge(canvas: Canvas, box: Box, panel: dict[str, Any], data: PanelData, span: TimeRange) -> None:
    low, high = _unit_range(panel)
    series = value_rows(panel, data.series)

    def angle(v: float) -> float:
        return ARC_START - ARC_SWEEP * (min(max(v, low), high) - low) / (high - low)

    for cell, one in zip(cells(box, len(series)), series, strict=True):
        radius = max(8.0, min(cell.w, cell.h - 18) / 2 - 2)
        cx, cy = cell.x + cell.w / 2, cell.y + radius + 2
        if options(panel).get("showThresholdMarkers", True):
            for a, b, band in threshold_marks(panel, low, high):
                canvas.arc(cx, cy, radius, radius * 0.08, angle(b), angle(a), band)
        canvas.arc(cx, cy, radius * 0.88, radius * 0.22, ARC_START - ARC_SWEEP, ARC_START, BORDER)
        value = one.last
        color = threshold_color(panel, value, low, high)
        if value is not None and not math.isnan(value):
            canvas.arc(cx, cy, radius * 0.88, radius * 0.22, angle(value), ARC_START, color)
        canvas.text(cx, cy, value_text(panel, value), min(radius * 0.32, 30), color, ha="center", va="center",
                    fontweight="bold")
        canvas.text(cx, cell.y + cell.h - 8, one.name, min(12, cell.h * 0.12), TEXT, ha="center", va="center")


def draw_bargauge(canvas: Canvas, box: Box, panel: dict[str, Any], data: PanelData, span: TimeRange) -> None:
    low, high = _unit_range(panel)
    series = value_rows(panel, data.series)
    row_h = max(14, min(40, box.h // max(1, len(series))))
    rows = min(len(series), max(1, box.h // row_h))
    name_w = min(240, box.w // 3)
    for index, one in enumerate(series[:rows]):
        y = box.y + index * row_h
        value = one.last
        color = threshold_color(panel, value, low, high)
        fits = max(4, name_w // 7 - 1)  # characters of a 12 px name in its column
        name = one.name if len(one.name) <= fits else one.name[: fits - 1] + "…"
        canvas.text(box.x + 4, y + row_h / 2, name, min(12, row_h * 0.55), TEXT, va="center")
        bar = Box(box.x + name_w, y + 2, box.w - name_w - 80, row_h - 4)
        canvas.rect(bar, BORDER)
        if value is not None and not math.isnan(value):
            filled = round(bar.w * (min(max(value, low), high) - low) / (high - low))
            canvas.rect(Box(bar.x, bar.y, filled, bar.h), color)
        canvas.text(box.x + box.w - 4, y + row_h / 2, value_text(panel, value), min(14, row_h * 0.6), color,
                    ha="right", va="center", fontweight="bold")
    if len(series) > rows:
        canvas.text(box.x + box.w - 4, box.y + box.h - 6, f"+{len(series) - rows} more", 10, MUTED, ha="right")


def draw_table(canvas: Canvas, box: Box, panel: dict[str, Any], data: PanelData, span: TimeRange) -> None:
    header, rows = table_texts(panel, data, span.end)
    shown = rows[:max(0, box.h // TABLE_ROW_PX - 1)]
    columns = layout(panel, header, box.w - 8, lambda text: canvas.text_width(text, 12, bold=True))
    for i, column in enumerate(columns):
        x = box.x + 4 + column.x + PADDING_PX
        canvas.text(x, box.y + TABLE_ROW_PX / 2, column.header, 12, MUTED, va="center", fontweight="bold")
        if shown:  # one text per column, a line per row: a few texts to lay out instead of one per cell
            cells = (fitted(row[i], column.text_w, lambda text: canvas.text_width(text, 12)) for row in shown)
            canvas.text(x, box.y + TABLE_ROW_PX + 4, "\n".join(cells), 12, TEXT, va="top",
                        linespacing=TABLE_ROW_PX / 12)
    canvas.rect(Box(box.x, box.y + TABLE_ROW_PX - 1, box.w, 1), BORDER)
    if len(columns) < len(header):  # past the panel's edge, where Grafana's table scrolls
        more = len(header) - len(columns)
        canvas.text(box.x + 4, box.y + box.h - 6, f"{more} more column{'s' if more > 1 else ''}", 10, MUTED)
    if len(rows) > len(shown):
        canvas.text(box.x + box.w - 4, box.y + box.h - 6, f"{len(rows) - len(shown)} more rows", 10, MUTED,
                    ha="right")


def draw_text(canvas: Canvas, box: Box, panel: dict[str, Any], data: PanelData, span: TimeRange) -> None:
    content = str(options(panel).get("content") or "")
    plain = re.sub(r"<[^>]+>|[*_`#>]", "", content)
    width = max(10, box.w // 8)
    lines = [line for para in plain.splitlines() for line in (textwrap.wrap(para, width) or [""])]
    for index, line in enumerate(lines[: max(1, box.h // 18)]):
        canvas.text(box.x + 6, box.y + 12 + index * 18, line, 12, TEXT, va="center")


def needs_series(panel_type: str) -> bool:
    return panel_type not in ("text", "row")
