"""Drawing without Prometheus: the picture's size comes from the grid, a stat shows its threshold colour,
a panel without data says so, and --compare's picture is two side by side. matplotlib is a dev dependency."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import pytest
from support.pictures import dominant_color

from gpudash.check.prometheus_api import TimeRange
from gpudash.preview.colors import NAMED
from gpudash.preview.pixels import HEADER_PX, box_of, canvas_size
from gpudash.preview.previewer import MissingExtra, drawing
from gpudash.preview.series import PanelData, Series

SPAN = TimeRange(end=1_000_000.0, range_s=600, step_s=15)
STEPS = [{"color": "green", "value": None}, {"color": "orange", "value": 80}, {"color": "red", "value": 85}]


def _stat(x: int, title: str) -> dict[str, Any]:
    return {"type": "stat", "title": title, "gridPos": {"x": x, "y": 0, "w": 6, "h": 4},
            "fieldConfig": {"defaults": {"unit": "celsius", "thresholds": {"mode": "absolute", "steps": STEPS}}},
            "options": {"colorMode": "value", "graphMode": "none"}}


DASHBOARD = {"title": "T", "uid": "t", "panels": [
    _stat(0, "Hot"), _stat(6, "Warm"), _stat(12, "Empty"),
    {"type": "timeseries", "title": "Lines", "gridPos": {"x": 0, "y": 4, "w": 24, "h": 8},
     "fieldConfig": {"defaults": {"unit": "percent"}}}]}


def _value(v: float) -> PanelData:
    return PanelData((Series("x", {}, (SPAN.end,), (v,)),))


def test_the_picture_has_the_grids_size_and_each_stat_its_threshold_colour() -> None:
    draw = drawing()
    times = tuple(SPAN.start + i * SPAN.step_s for i in range(41))
    lines = PanelData((Series("GPU 0", {"gpu": "0"}, times, tuple(float(i) for i in range(41))),))
    pixels = draw.draw_dashboard(DASHBOARD, {0: _value(91.0), 1: _value(82.0), 2: PanelData(), 3: lines}, SPAN)
    width, height = canvas_size(DASHBOARD)
    assert pixels.shape == (height, width, 4) == (HEADER_PX + 12 * 32, 24 * 64, 4)
    assert dominant_color(pixels, box_of(DASHBOARD["panels"][0])) == NAMED["red"]
    assert dominant_color(pixels, box_of(DASHBOARD["panels"][1])) == NAMED["orange"]


def test_compare_puts_two_pictures_side_by_side_padding_the_shorter() -> None:
    draw = drawing()
    left = draw.draw_dashboard(DASHBOARD, {}, SPAN)
    short = {**DASHBOARD, "panels": DASHBOARD["panels"][:1]}
    right = draw.draw_dashboard(short, {}, SPAN)
    both = draw.side_by_side(left, right)
    assert both.shape == (left.shape[0], 2 * left.shape[1], 4)
    assert (both[:, : left.shape[1]] == left).all()


def test_without_matplotlib_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m.startswith(("gpudash.preview.draw", "gpudash.preview.canvas",
                                                          "gpudash.preview.forms"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(MissingExtra, match=r"previews need matplotlib, which is not installed: "
                                           r"pip install 'gpudash\[preview\]'"):
        drawing()
    monkeypatch.undo()
    assert importlib.import_module("gpudash.preview.draw")


def test_a_count_graph_ticks_whole_numbers_as_grafana_does() -> None:
    from gpudash.preview.canvas import Canvas
    from gpudash.preview.forms_plot import draw_timeseries
    from gpudash.preview.pixels import Box

    events = Series("XID 48", {}, tuple(SPAN.end - 60 * i for i in range(10, 0, -1)), (0.0,) * 9 + (1.0,))
    canvas = Canvas(800, 300)
    panel = {"fieldConfig": {"defaults": {"unit": "none", "decimals": 0, "custom": {"drawStyle": "bars"}}}}
    draw_timeseries(canvas, Box(0, 0, 800, 300), panel, PanelData((events,)), SPAN)
    canvas.figure.canvas.draw()
    ax = canvas.figure.axes[-1]
    low, high = ax.get_ylim()
    shown = [t.get_text() for t, v in zip(ax.get_yticklabels(), ax.get_yticks(), strict=True) if low <= v <= high]
    assert shown and len(shown) == len(set(shown)), shown  # not "0, 0, 0, 1, 1, 1"


def test_an_empty_table_says_its_no_value_as_grafana_does() -> None:
    from gpudash.preview.canvas import Canvas
    from gpudash.preview.draw import draw_panel
    from gpudash.preview.pixels import Box

    canvas = Canvas(600, 200)
    panel = {"type": "table", "title": "Stopped", "fieldConfig": {"defaults": {"noValue": "None: all report"}}}
    draw_panel(canvas, Box(0, 0, 600, 200), panel, PanelData(), SPAN)
    shown = [t.get_text() for t in canvas.board.texts]
    assert "None: all report" in shown and "No data" not in shown, shown
