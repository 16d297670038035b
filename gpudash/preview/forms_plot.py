"""Panels over time: time series, heatmap, state timeline (matplotlib)."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.colors import LinearSegmentedColormap, to_rgba
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, MaxNLocator

from gpudash.check.prometheus_api import TimeRange
from gpudash.preview.canvas import Canvas, pt
from gpudash.preview.colors import MUTED, PANEL, TEXT, hex_color, series_color, threshold_color
from gpudash.preview.panel import as_dict, defaults, number, options
from gpudash.preview.pixels import Box
from gpudash.preview.series import PanelData, Series
from gpudash.preview.units import format_value

LEGEND_ROW_PX = 16
AXIS_PX = 18
MAX_LEGEND_ROWS = 3
_SCHEMES = {"viridis": "viridis", "turbo": "turbo", "magma": "magma", "inferno": "inferno", "plasma": "plasma"}


def _time_axis(ax: Any, span: TimeRange, width_px: int) -> None:
    ax.set_xlim(span.start, span.end)
    fmt = "%m-%d %H:%M" if span.range_s > 2 * 86400 else "%H:%M"
    ax.xaxis.set_major_locator(MaxNLocator(nbins=max(2, min(6, width_px // (110 if len(fmt) > 5 else 70)))))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda t, _: time.strftime(fmt, time.gmtime(t))))


def _legend(canvas: Canvas, box: Box, names: Sequence[str], colors: Sequence[str]) -> None:
    per_row = max(1, box.w // 150)
    room = per_row * MAX_LEGEND_ROWS
    shown = len(names) if len(names) <= room else room - 1  # the last place says how many more
    handles = [Line2D([0], [0], color=c, linewidth=3) for c in colors[:shown]]
    labels = [n if len(n) <= 24 else n[:23] + "…" for n in names[:shown]]
    if len(names) > shown:
        handles.append(Line2D([0], [0], color="none"))
        labels.append(f"+{len(names) - shown} more")
    # On the board, anchored at the box's top left in pixels: several legends, no axes of their own.
    legend = Legend(canvas.board, handles, labels, loc="upper left", bbox_to_anchor=(box.x, box.y),
                    bbox_transform=canvas.board.transData, ncol=per_row, frameon=False, fontsize=pt(11),
                    labelcolor=TEXT, handlelength=1.0, columnspacing=1.0, borderaxespad=0, borderpad=0.1,
                    handletextpad=0.4)
    canvas.board.add_artist(legend)


def _split(box: Box, count: int) -> tuple[Box, Box | None]:
    """The plot's box and, below it, the legend's (None when there is no room or no series)."""
    if count == 0:
        return box, None
    rows = min(MAX_LEGEND_ROWS, math.ceil(count / max(1, box.w // 150)))
    height = rows * LEGEND_ROW_PX + 4
    if box.h - height < 60:
        return box, None
    return Box(box.x, box.y, box.w, box.h - height), Box(box.x, box.y + box.h - height + 4, box.w, height - 4)


def draw_timeseries(canvas: Canvas, box: Box, panel: dict[str, Any], data: PanelData, span: TimeRange) -> None:
    field = defaults(panel)
    custom = as_dict(field.get("custom"))
    unit = field.get("unit")
    series = [s for s in data.series if s.times]
    plot_box, legend_box = _split(box, len(series))
    ax = canvas.axes(Box(plot_box.x + 56, plot_box.y + 2, plot_box.w - 62, plot_box.h - AXIS_PX - 2))
    _time_axis(ax, span, box.w)
    # Grafana's axis keeps to whole steps where the field shows no decimals (a count is never 0.5)
    ax.yaxis.set_major_locator(MaxNLocator(nbins=max(2, plot_box.h // 45), integer=field.get("decimals") == 0))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: format_value(v, unit, field.get("decimals"))))
    style = custom.get("drawStyle", "line")
    fill = float(custom.get("fillOpacity") or 0) / 100
    colors = [_fixed_color(field) or series_color(i) for i in range(len(series))]
    for one, color in zip(series, colors, strict=True):
        if style == "points":
            ax.scatter(one.times, one.values, s=10, color=color)
        elif style == "bars":
            ax.bar(one.times, one.values, width=span.step_s * 0.8, color=color, align="center")
        else:
            ax.plot(one.times, one.values, color=color, linewidth=1.2,
                    drawstyle="steps-post" if custom.get("lineInterpolation") == "stepAfter" else "default")
            if fill:
                ax.fill_between(one.times, one.values, color=color, alpha=fill, linewidth=0)
    low, high = number(field.get("min")), number(field.get("max"))
    if low is not None or high is not None:
        ax.set_ylim(bottom=low, top=high)
    if legend_box is not None:
        _legend(canvas, legend_box, [s.name for s in series], colors)


def _fixed_color(field: dict[str, Any]) -> str | None:
    color = as_dict(field.get("color"))
    return hex_color(color.get("fixedColor")) if color.get("mode") == "fixed" and color.get("fixedColor") else None


def _grid(series: Sequence[Series], span: TimeRange) -> tuple[np.ndarray, np.ndarray]:
    """(times, values[series, time]) on the query's step grid; NaN where a series has no sample."""
    times = np.arange(span.start, span.end + span.step_s / 2, span.step_s)
    values = np.full((len(series), len(times)), np.nan)
    for row, one in enumerate(series):
        for t, v in zip(one.times, one.values, strict=True):
            col = round((t - span.start) / span.step_s)
            if 0 <= col < len(times):
                values[row, col] = v
    return times, values


def _row_order(series: Sequence[Series]) -> list[Series]:
    def key(one: Series) -> tuple[Any, ...]:
        le = one.labels.get("le")
        try:
            return (0, float(le), one.name) if le is not None else (1, _natural(one.name))
        except ValueError:
            return (1, _natural(one.name))

    return sorted(series, key=key)


def _natural(text: str) -> tuple[Any, ...]:
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", text))


def _row_labels(ax: Any, names: Sequence[str], rows: int) -> None:
    step = max(1, math.ceil(rows / 12))
    ax.set_yticks(range(0, rows, step))
    ax.set_yticklabels([names[i][:18] for i in range(0, rows, step)])


def draw_heatmap(canvas: Canvas, box: Box, panel: dict[str, Any], data: PanelData, span: TimeRange) -> None:
    series = _row_order([s for s in data.series if s.times])
    color = as_dict(options(panel).get("color"))
    ax = canvas.axes(Box(box.x + 90, box.y + 2, box.w - 96, box.h - AXIS_PX - 2))
    ax.grid(False)
    _, values = _grid(series, span)
    if color.get("mode") == "opacity":
        cmap: Any = LinearSegmentedColormap.from_list("opacity", [PANEL, hex_color(color.get("fill") or "green")])
    else:
        scheme = str(color.get("scheme") or "Oranges")
        cmap = _SCHEMES.get(scheme.lower(), scheme)
    seen = values[~np.isnan(values)]
    low = number(color.get("min"))
    high = number(color.get("max"))
    low = float(seen.min()) if low is None and seen.size else low if low is not None else 0.0
    high = float(seen.max()) if high is None and seen.size else high if high is not None else 1.0
    extent = (span.start - span.step_s / 2, span.end + span.step_s / 2, -0.5, len(series) - 0.5)
    try:
        ax.imshow(values, aspect="auto", interpolation="nearest", origin="lower", cmap=cmap, vmin=low,
                  vmax=high if high > low else low + 1, extent=extent)
    except ValueError:  # a scheme matplotlib does not know by that name
        ax.imshow(values, aspect="auto", interpolation="nearest", origin="lower", cmap="Oranges", extent=extent)
    _time_axis(ax, span, box.w)
    _row_labels(ax, [s.name for s in series], len(series))


def draw_state_timeline(canvas: Canvas, box: Box, panel: dict[str, Any], data: PanelData, span: TimeRange) -> None:
    series = _row_order([s for s in data.series if s.times])
    ax = canvas.axes(Box(box.x + 90, box.y + 2, box.w - 96, box.h - AXIS_PX - 2))
    ax.grid(False)
    _, values = _grid(series, span)
    rgba = np.zeros((*values.shape, 4))
    cache: dict[float, tuple[float, float, float, float]] = {}
    for index, value in np.ndenumerate(values):
        if math.isnan(value):
            continue
        if value not in cache:
            cache[value] = to_rgba(_mapped_color(panel, float(value)))
        rgba[index] = cache[value]
    ax.imshow(rgba, aspect="auto", interpolation="nearest", origin="upper",
              extent=(span.start - span.step_s / 2, span.end + span.step_s / 2, len(series) - 0.5, -0.5))
    _time_axis(ax, span, box.w)
    _row_labels(ax, [s.name for s in series], len(series))
    ax.tick_params(axis="y", colors=MUTED)


def _mapped_color(panel: dict[str, Any], value: float) -> str:
    """A value mapping's colour for this value where one says so, else the threshold colour."""
    for mapping in defaults(panel).get("mappings") or []:
        if not isinstance(mapping, dict):
            continue
        choices = as_dict(mapping.get("options"))
        if mapping.get("type") == "value":
            for key, result in choices.items():
                try:
                    if float(key) == value and isinstance(result, dict) and result.get("color"):
                        return hex_color(result["color"])
                except ValueError:
                    continue
        if mapping.get("type") == "range":
            start, end = number(choices.get("from")), number(choices.get("to"))
            result = as_dict(choices.get("result"))
            if (start is None or value >= start) and (end is None or value <= end) and result.get("color"):
                return hex_color(result["color"])
    return threshold_color(panel, value)
