"""A dashboard drawn as one picture: each panel framed and titled, in its own form, on Grafana's grid.

Forms are a table (panel type -> drawing function); a panel type without one is framed and named, so a new
panel type never breaks a preview. Writes PNGs; the side-by-side of two pictures for `--compare`.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from matplotlib.image import imsave

from gpudash.check.prometheus_api import TimeRange
from gpudash.preview.canvas import Canvas
from gpudash.preview.colors import BACKGROUND, BORDER, MUTED, NAMED, PANEL, TEXT
from gpudash.preview.displayed import no_value_text
from gpudash.preview.fidelity import approximation
from gpudash.preview.forms_plot import draw_heatmap, draw_state_timeline, draw_timeseries
from gpudash.preview.forms_values import draw_bargauge, draw_gauge, draw_stat, draw_table, draw_text, needs_series
from gpudash.preview.pixels import HEADER_PX, Box, canvas_size, place
from gpudash.preview.series import PanelData

Form = Callable[[Canvas, Box, dict[str, Any], PanelData, TimeRange], None]
FORMS: dict[str, Form] = {
    "timeseries": draw_timeseries, "graph": draw_timeseries, "stat": draw_stat, "singlestat": draw_stat,
    "gauge": draw_gauge, "bargauge": draw_bargauge, "heatmap": draw_heatmap, "table": draw_table,
    "state-timeline": draw_state_timeline, "status-history": draw_state_timeline, "text": draw_text,
}
TITLE_PX = 26


def _frame(canvas: Canvas, box: Box, title: str) -> None:
    canvas.rect(box, PANEL, edgecolor=BORDER, linewidth=1)
    shown = title if len(title) * 7.5 < box.w - 12 else title[: max(4, int((box.w - 12) / 7.5)) - 1] + "…"
    canvas.text(box.x + 8, box.y + TITLE_PX / 2 + 1, shown, 13, TEXT, va="center", fontweight="bold")


def _row(canvas: Canvas, box: Box, panel: dict[str, Any]) -> None:
    hidden = len(panel.get("panels") or [])
    title = str(panel.get("title") or "")
    if panel.get("collapsed") and hidden:
        title += f"  ({hidden} panels, collapsed)"
    canvas.text(box.x + 2, box.y + box.h / 2, title, 15, TEXT, va="center", fontweight="bold")


def _message(canvas: Canvas, box: Box, text: str, color: str = MUTED, size: float = 16) -> None:
    wrapped = text if len(text) * size * 0.55 < box.w else text[: int(box.w / (size * 0.55)) - 1] + "…"
    canvas.text(box.x + box.w / 2, box.y + box.h / 2, wrapped, size, color, ha="center", va="center")


def draw_panel(canvas: Canvas, box: Box, panel: dict[str, Any], data: PanelData, span: TimeRange) -> None:
    kind = str(panel.get("type") or "")
    if kind == "row":
        _row(canvas, box, panel)
        return
    _frame(canvas, box, str(panel.get("title") or ""))
    note = approximation(panel)
    if note:  # the title bar says where the picture is only near what Grafana draws
        canvas.text(box.x + box.w - 8, box.y + TITLE_PX / 2 + 1, "≈", 15, NAMED["orange"], ha="right", va="center",
                    fontweight="bold")
        canvas.text(box.x + 8, box.y + box.h - 10, note, 9, NAMED["orange"], va="center")
    inner = Box(box.x + 6, box.y + TITLE_PX, box.w - 12, box.h - TITLE_PX - 6)
    form = FORMS.get(kind)
    if form is None:
        _message(canvas, inner, f"panel type {kind!r}: not drawn in previews", size=13)
    elif needs_series(kind) and not data.series:
        if data.errors:
            _message(canvas, inner, data.errors[0], NAMED["red"], 12)
        elif kind == "stat":
            _message(canvas, inner, no_value_text(panel), size=min(28.0, inner.h * 0.4))
        else:  # Grafana's "no data" view says the panel's noValue too, where it has one
            _message(canvas, inner, no_value_text(panel))
    else:
        form(canvas, inner, panel, data, span)


def draw_dashboard(dashboard: dict[str, Any], data: Mapping[int, PanelData], span: TimeRange,
                   note: str = "") -> np.ndarray:
    """The dashboard's picture as an RGBA array; `data` is each placed panel's, by its index in the layout."""
    width, height = canvas_size(dashboard)
    canvas = Canvas(width, height)
    title = str(dashboard.get("title") or dashboard.get("uid") or "dashboard")
    canvas.text(12, HEADER_PX / 2 - 6, title, 22, TEXT, va="center", fontweight="bold")
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(span.end))
    canvas.text(12, HEADER_PX - 14, f"last {_span_text(span.range_s)} to {when}, step {span.step_s} s"
                                    f"{'  ·  ' + note if note else ''}", 12, MUTED, va="center")
    for index, placed in enumerate(place(dashboard)):
        draw_panel(canvas, placed.box, placed.panel, data.get(index, PanelData()), span)
    return canvas.pixels()


def _span_text(seconds: int) -> str:
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def side_by_side(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Two pictures next to each other (before | after), the shorter padded with the background below."""
    height = max(left.shape[0], right.shape[0])
    fill = np.array([int(BACKGROUND[i:i + 2], 16) for i in (1, 3, 5)] + [255], dtype=np.uint8)

    def padded(image: np.ndarray) -> np.ndarray:
        if image.shape[0] == height:
            return image
        extra = np.tile(fill, (height - image.shape[0], image.shape[1], 1))
        return np.concatenate([image, extra], axis=0)

    return np.concatenate([padded(left), padded(right)], axis=1)


def blank(width: int, height: int, text: str) -> np.ndarray:
    """A picture saying why there is nothing to draw (a dashboard missing on one side of a comparison)."""
    canvas = Canvas(width, height)
    canvas.text(width / 2, min(height / 2, 200), text, 20, MUTED, ha="center", va="center")
    return canvas.pixels()


def png_bytes(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    imsave(buffer, pixels, format="png")
    return buffer.getvalue()
