"""The texts the preview writes in tables and gauges, as Grafana's display writes them: joins, filters, value
mappings, labels kept out of the panel's unit, empty panels. tests/e2e/test_grafana_display.py holds the same
texts against @grafana/data itself on real Prometheus answers."""

from __future__ import annotations

from typing import Any

import pytest
from support.paths import ROOT

from gpudash.config.loading import load_settings
from gpudash.panels.build import build_all
from gpudash.preview.displayed import displayed
from gpudash.preview.fidelity import approximation
from gpudash.preview.mappings import mapped_text
from gpudash.preview.series import PanelData, to_series

AT = 1000.0


@pytest.fixture(scope="module")
def built() -> dict[str, dict[str, Any]]:
    return build_all(load_settings(ROOT / "thresholds.yaml"), ROOT / "dashboards")


def _panel(dashboard: dict[str, Any], prefix: str) -> dict[str, Any]:
    return next(p for p in dashboard["panels"] if str(p.get("title", "")).startswith(prefix)
                and p.get("type") != "row")


def _data(p: dict[str, Any], answers: dict[str, list[tuple[dict[str, str], str]]]) -> PanelData:
    frames = []
    for target in p["targets"]:
        result = [{"metric": labels, "value": [AT, value]} for labels, value in answers.get(target["refId"], [])]
        frames.append((target["refId"], to_series(result, target.get("legendFormat"), target["refId"])))
    return PanelData(tuple(s for _, series in frames for s in series), (), tuple(frames))


def test_the_ledger_joins_on_the_uuid_drops_empty_queries_and_maps_the_worst_action(built: dict[str, Any]) -> None:
    p = _panel(built["gpudash-health.json"], "GPU ledger by UUID")
    gpu = {"cluster": "c", "instance": "h:9400", "gpu": "3"}
    header, rows = displayed(p, _data(p, {
        "A": [({**gpu, "UUID": "GPU-a"}, "1"), ({**gpu, "gpu": "4", "UUID": "GPU-b"}, "10000")],
        "L": [({"UUID": "GPU-a"}, "2"), ({"UUID": "GPU-gone"}, "5")],  # GPU-gone has no worst action: no row
    }), AT)
    assert header == ["UUID", "cluster", "gpu", "instance", "worst action", "XIDs for restart_job"]
    assert sorted(rows) == [["GPU-a", "c", "3", "h:9400", "none", "2"], ["GPU-b", "c", "4", "h:9400", "reset_gpu", ""]]
    assert rows[0][0] == "GPU-b"  # sorted by the worst action, costliest first


def test_labels_are_not_written_in_the_panel_unit(built: dict[str, Any]) -> None:
    hottest = _panel(built["gpudash-fleet.json"], "Hottest GPUs")
    _, rows = displayed(hottest, _data(hottest, {"A": [({"cluster": "c", "instance": "h", "gpu": "5"}, "86")]}), AT)
    assert rows == [["h GPU 5", "86 °C"]]
    processes = _panel(built["gpudash-node.json"], "Memory per process")
    labels = {"cluster": "c", "instance": "h", "gpu": "7", "pid": "4140", "process_name": "python"}
    header, rows = displayed(processes, _data(processes, {"A": [(labels, "4140")]}), AT)
    shown = dict(zip(header, rows[0], strict=True))
    assert (shown["gpu"], shown["pid"], shown["memory used"]) == ("7", "4140", "4.04 GiB")


def test_an_empty_gauge_says_its_no_value_and_an_empty_table_shows_no_columns(built: dict[str, Any]) -> None:
    gauge = _panel(built["gpudash-node.json"], "GPU temperature")
    assert displayed(gauge, _data(gauge, {}), AT) == (["title", "value"], [["", "No data"]])
    table = _panel(built["gpudash-fleet.json"], "Memory pressure")
    assert displayed(table, _data(table, {}), AT) == ([], [])


@pytest.mark.parametrize(("value", "text"), [(5.0, "low"), (50.0, None), (150.0, "high"), ("x", "ex"),
                                             (float("nan"), "none")])
def test_value_mappings_first_match_wins(value: Any, text: str | None) -> None:
    mappings = [{"type": "range", "options": {"from": 0, "to": 10, "result": {"text": "low"}}},
                {"type": "range", "options": {"from": 20, "to": 60, "result": {"color": "red"}}},
                {"type": "range", "options": {"from": 0, "to": 100, "result": {"text": "never"}}},
                {"type": "value", "options": {"x": {"text": "ex"}}},
                {"type": "special", "options": {"match": "nan", "result": {"text": "none"}}},
                {"type": "range", "options": {"from": 100, "result": {"text": "high"}}}]
    assert mapped_text(mappings, value) == text


@pytest.mark.parametrize(("panel", "note"), [
    ({"type": "heatmap"}, "approximate: heatmap drawn by gpudash"),
    ({"type": "table", "transformations": [{"id": "groupBy", "options": {}}]},
     "approximate: transformation groupBy not followed"),
    ({"type": "table", "transformations": [{"id": "filterByValue", "options": {"filters": [
        {"fieldName": "x", "config": {"id": "greater", "options": {"value": 1}}}]}}]},
     "approximate: filterByValue condition not followed"),
    ({"type": "stat", "fieldConfig": {"defaults": {"unit": "furlongs"}}}, "approximate: unit furlongs not followed"),
    ({"type": "stat", "fieldConfig": {"defaults": {"unit": "suffix:pp"}}}, None),
])
def test_a_panel_the_preview_cannot_follow_is_marked_approximate(panel: dict[str, Any], note: str | None) -> None:
    assert approximation(panel) == note


def test_every_table_and_gauge_of_the_dashboards_is_drawn_as_grafana_would(built: dict[str, Any]) -> None:
    notes = {p["title"]: approximation(p) for d in built.values() for p in d["panels"] if approximation(p)}
    assert set(notes) == {"GPUs per utilization band", "Utilization per GPU", "Throttle reasons"}, notes


def test_the_picture_notes_an_approximate_panel() -> None:
    from gpudash.check.prometheus_api import TimeRange
    from gpudash.preview.canvas import Canvas
    from gpudash.preview.draw import draw_panel
    from gpudash.preview.pixels import Box

    canvas = Canvas(400, 200)
    draw_panel(canvas, Box(0, 0, 400, 200), {"type": "heatmap", "title": "H"}, PanelData(), TimeRange(AT, 600, 15))
    texts = [t.get_text() for t in canvas.board.texts]
    assert "approximate: heatmap drawn by gpudash" in texts and "≈" in texts
