"""The preview's decisions, without Prometheus or matplotlib: grid, variables, queries, colours, units, rows."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from support.paths import ROOT

from gpudash.preview.colors import NAMED, hex_color, threshold_color, threshold_marks
from gpudash.preview.panel_queries import choose_variables, lookup_of, panel_queries, window
from gpudash.preview.pixels import COLUMN_PX, GAP_PX, HEADER_PX, ROW_PX, Box, box_of, canvas_size, place
from gpudash.preview.series import Series, legend, table_rows, to_series
from gpudash.preview.units import format_value


def _dashboard(uid: str) -> dict[str, Any]:
    data = json.loads((ROOT / "dashboards" / "json" / f"{uid}.json").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


# ------------------------------------------------------------------ layout


def test_a_panel_box_follows_its_grid_position() -> None:
    box = box_of({"gridPos": {"x": 12, "y": 6, "w": 12, "h": 9}})
    assert box == Box(12 * COLUMN_PX + GAP_PX, HEADER_PX + 6 * ROW_PX + GAP_PX, 12 * COLUMN_PX - 2 * GAP_PX,
                      9 * ROW_PX - 2 * GAP_PX)


def test_a_panel_past_the_right_edge_is_clipped_to_the_grid() -> None:
    box = box_of({"gridPos": {"x": 20, "y": 0, "w": 12, "h": 2}})
    assert box.x + box.w + GAP_PX == 24 * COLUMN_PX


def test_the_picture_is_24_columns_wide_and_as_tall_as_the_lowest_panel() -> None:
    fleet = _dashboard("gpudash-fleet")
    bottom = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in fleet["panels"])
    assert canvas_size(fleet) == (24 * COLUMN_PX, HEADER_PX + bottom * ROW_PX)
    assert len(place(fleet)) == len(fleet["panels"])


def test_a_collapsed_row_keeps_its_panels_hidden() -> None:
    dashboard = {"panels": [{"type": "row", "collapsed": True, "gridPos": {"x": 0, "y": 0, "w": 24, "h": 1},
                             "panels": [{"type": "stat", "gridPos": {"x": 0, "y": 1, "w": 4, "h": 20}}]}]}
    assert len(place(dashboard)) == 1
    assert canvas_size(dashboard)[1] == HEADER_PX + ROW_PX


# ------------------------------------------------------------------ variables and queries


def test_variables_take_all_or_the_first_value_each_lookup_seeing_the_ones_before() -> None:
    asked: list[tuple[str, str | None]] = []

    def lookup(label: str, selector: str | None) -> list[str]:
        asked.append((label, selector))
        return {"instance": ["node-10:9400", "node-2:9400"]}.get(label, [])

    values = choose_variables(_dashboard("gpudash-node"), lookup)
    assert values == {"cluster": ".*", "instance": "node-2:9400", "gpu": ".*"}  # natural order: 2 before 10
    assert asked == [("instance", 'DCGM_FI_DEV_GPU_UTIL{cluster=~".*"}')]


def test_a_fixed_value_wins_and_a_variable_without_values_is_empty() -> None:
    values = choose_variables(_dashboard("gpudash-job"), lambda label, selector: [], {"cluster": "a"})
    assert values == {"cluster": "a", "job": ""}


def test_lookup_of_reads_label_values_with_and_without_a_selector() -> None:
    assert lookup_of({"query": "label_values(up{job=\"x\"}, instance)"}) == ("instance", 'up{job="x"}')
    assert lookup_of("label_values(cluster)") == ("cluster", None)
    assert lookup_of("query_result(up)") is None


def test_panel_queries_fill_variables_and_builtins_and_skip_hidden_targets() -> None:
    panel = {"type": "timeseries", "targets": [
        {"refId": "A", "expr": 'rate(x{cluster=~"$cluster"}[$__rate_interval]) offset $shift',
         "legendFormat": "{{gpu}}"},
        {"refId": "B", "expr": "y", "hide": True},
        {"refId": "C", "expr": "increase(z[$__range])", "instant": True, "range": False}]}
    queries = panel_queries(panel, {"cluster": "a|b", "shift": "1d", "__rate_interval": "60s", "__range": "3600s"})
    assert [(q.ref, q.expr, q.instant) for q in queries] == [
        ("A", 'rate(x{cluster=~"a|b"}[60s]) offset 1d', False), ("C", "increase(z[3600s])", True)]


def test_the_time_grid_ends_on_a_step_and_uses_the_checks_interval() -> None:
    span = window(1_000_007.0, 3600, 15)
    assert (span.end, span.range_s, span.step_s) == (1_000_005, 3600, 15)
    assert window(1_000_007.0, 7 * 86400, 15).step_s == 900  # 7 days / 1000 points, rounded up to a nice step


# ------------------------------------------------------------------ colours and units

PANEL = {"fieldConfig": {"defaults": {"thresholds": {"mode": "absolute", "steps": [
    {"color": "yellow", "value": None}, {"color": "green", "value": 20}, {"color": "red", "value": 90}]}}}}


@pytest.mark.parametrize(("value", "color"), [(5.0, "yellow"), (20.0, "green"), (89.9, "green"), (97.0, "red"),
                                              (None, "yellow")])
def test_threshold_colour_is_the_last_step_at_or_below_the_value(value: float | None, color: str) -> None:
    assert threshold_color(PANEL, value) == NAMED[color]


def test_percentage_thresholds_are_relative_to_min_and_max() -> None:
    panel = {"fieldConfig": {"defaults": {"thresholds": {"mode": "percentage", "steps": [
        {"color": "green", "value": None}, {"color": "red", "value": 50}]}}}}
    assert threshold_color(panel, 0.4, 0.0, 1.0) == NAMED["green"]
    assert threshold_color(panel, 0.6, 0.0, 1.0) == NAMED["red"]


def test_threshold_marks_cover_the_gauge_range_in_bands() -> None:
    assert threshold_marks(PANEL, 0, 100) == [(0, 20, NAMED["yellow"]), (20, 90, NAMED["green"]),
                                              (90, 100, NAMED["red"])]


def test_colours_by_name_and_by_value() -> None:
    assert hex_color("dark-orange") == "#FA6400"
    assert hex_color("#abc") == "#AABBCC"
    assert hex_color("rgba(255, 0, 10, 0.5)") == "#FF000A"


@pytest.mark.parametrize(("value", "unit", "text"), [
    (87.25, "percent", "87.3%"), (0.971, "percentunit", "97.1%"), (312.5, "watt", "313 W"),
    (4230.0, "watt", "4.23 kW"), (1980.0, "rotmhz", "1.98 GHz"), (56400.0, "mbytes", "55.1 GiB"),
    (1.5e9, "Bps", "1.50 GB/s"), (8.0, "none", "8"), (44.0, "celsius", "44 °C"), (3.0, "furlongs", "3 furlongs"),
    (None, "percent", "-"), (math.nan, "percent", "NaN"),
    # as @grafana/data 13.2's getValueFormat writes them: its decimals (0.7 -> 3), no plural in a unit's own rung
    (0.7, "none", "0.700"), (-2.5, "none", "-2.50"), (0.000123, "none", "0.000123"), (65.00000000000001, "percent",
    "65.0%"), (4140.0, "mbytes", "4.04 GiB"), (0.93, "h", "0.930 hour"), (2.5, "h", "2.50 hour"),
    (30.0, "h", "1.25 days"), (1140.0, "s", "19 mins"), (90.0, "s", "1.50 mins"), (0.5, "s", "500 ms"),
    (0.0, "s", "0 s"), (1234567.0, "short", "1.23 Mil"), (2.5, "suffix:pp", "2.50 pp"),
    (-0.3, "suffix:pp", "-0.300 pp"), (3.0, "prefix:$", "$3")])
def test_units_as_grafana_writes_them(value: float | None, unit: str, text: str) -> None:
    assert format_value(value, unit) == text


# ------------------------------------------------------------------ series and table rows


def test_series_are_named_by_the_legend_and_keep_the_last_number() -> None:
    result = [{"metric": {"gpu": "3", "instance": "n1"}, "values": [[10, "1"], [20, "NaN"]]}]
    (one,) = to_series(result, "GPU {{gpu}} on {{ instance }}", "A")
    assert (one.name, one.times, one.last) == ("GPU 3 on n1", (10.0, 20.0), 1.0)
    assert legend(None, {"__name__": "up", "job": "x"}) == 'up{job="x"}'


def test_table_rows_merge_queries_by_labels_and_apply_organize() -> None:
    panel = {"transformations": [{"id": "merge"}, {"id": "organize", "options": {
        "excludeByName": {"Time": True, "__name__": True}, "renameByName": {"Value #A": "held", "Value #B": "idle"}}}]}
    a = (Series("", {"hpc_job": "1", "__name__": "x"}, (0.0,), (5.0,), "A"),)
    b = (Series("", {"hpc_job": "1", "__name__": "x"}, (0.0,), (2.0,), "B"),)
    header, rows = table_rows(panel, [("A", a), ("B", b)])
    assert header == ["hpc_job", "held", "idle"]
    assert rows == [["1", 5.0, 2.0]]


def test_date_time_from_now_reads_as_grafana_writes_it() -> None:
    from gpudash.preview.units import from_now

    now = 1_796_175_000.0
    cases = {now - 10: "a few seconds ago", now - 60: "a minute ago", now - 12 * 60: "12 minutes ago",
             now - 3600: "an hour ago", now - 5 * 3600: "5 hours ago", now - 86400: "a day ago",
             now - 3 * 86400: "3 days ago", now + 2 * 3600: "in 2 hours"}
    assert {at: from_now(at * 1000, now) for at in cases} == cases
