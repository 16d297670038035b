"""The fleet dashboard's first row (what needs action now, reporting / expected) and utilization colours,
where low is bad: read from the generated dashboard JSON."""

from __future__ import annotations

import re
from typing import Any

import pytest
from support.paths import ROOT

from gpudash.config.loading import load_settings
from gpudash.health.xid import ACTIONS
from gpudash.panels.build import build_all
from gpudash.panels.visualizations import IDLE
from gpudash.repository import HEALTH_UID

Panel = dict[str, Any]


@pytest.fixture(scope="module")
def built() -> dict[str, dict[str, Any]]:
    return build_all(load_settings(ROOT / "thresholds.yaml"), ROOT / "dashboards")


def first_row(dashboard: dict[str, Any]) -> tuple[str, list[Panel]]:
    """The first row's title and its panels, up to the next row."""
    rows = [i for i, p in enumerate(dashboard["panels"]) if p["type"] == "row"]
    assert rows and rows[0] == 0, "the dashboard opens on a row"
    end = rows[1] if len(rows) > 1 else len(dashboard["panels"])
    return dashboard["panels"][0]["title"], dashboard["panels"][1:end]


def steps(panel: Panel) -> list[tuple[str, float | None]]:
    return [(s["color"], s["value"]) for s in panel["fieldConfig"]["defaults"]["thresholds"]["steps"]]


def data_links(panel: Panel) -> list[dict[str, Any]]:
    return [link for o in panel["fieldConfig"]["overrides"] for prop in o["properties"] if prop["id"] == "links"
            for link in prop["value"]]


def test_the_fleet_opens_on_what_needs_action_then_reporting_against_expected(built: dict[str, Any]) -> None:
    title, panels = first_row(built["gpudash-fleet.json"])
    assert title == "Needs action now"
    stats = [p for p in panels if p["type"] == "stat"]
    # Every action someone must take, costliest first, then any action, then reporting / expected: on top.
    taken = [a for a in reversed(ACTIONS) if a != "none"]
    assert [p["targets"][0]["legendFormat"] for p in stats[:len(taken)]] == taken
    assert [p["title"] for p in stats[len(taken):]] == ["Needing any action", "Reporting / expected",
                                                         "GPUs missing"]
    assert all(p["gridPos"]["y"] == stats[0]["gridPos"]["y"] for p in stats), "one row of stats"


def test_each_action_count_reads_firing_alerts_by_action_label_not_by_alert_name(built: dict[str, Any]) -> None:
    _, panels = first_row(built["gpudash-fleet.json"])
    counts = [p for p in panels if p["type"] == "stat" and "ALERTS{" in p["targets"][0]["expr"]]
    assert len(counts) == len(ACTIONS)  # one per action but none, and the count of any
    for panel in counts:
        query = panel["targets"][0]["expr"]
        assert 'alertstate="firing"' in query and 'cluster=~"$cluster"' in query, query
        assert "alertname" not in query, f"{panel['title']}: a fixed list of alerts misses a new one"
        action = re.findall(r'action(=|!=)"([^"]*)"', query)
        assert action in ([("=", panel["targets"][0]["legendFormat"])], [("!=", ""), ("!=", "none")]), query
        assert panel["fieldConfig"]["defaults"]["noValue"] == "0"  # no firing alert is none to act on


def test_each_count_links_to_the_health_dashboards_list_with_the_dashboards_variables(built: dict[str, Any]) -> None:
    _, panels = first_row(built["gpudash-fleet.json"])
    counts = [p for p in panels if p["type"] == "stat" and "ALERTS{" in p["targets"][0]["expr"]]
    health = built["gpudash-health.json"]
    assert first_row(health)[0] == "GPUs needing action now"  # what the link opens on
    for panel in counts:
        (link,) = data_links(panel)
        assert link["url"].startswith(f"/d/{HEALTH_UID}?")
        assert "${__all_variables}" in link["url"] and "${__url_time_range}" in link["url"]
    # Every variable the fleet passes on, the health dashboard has.
    names = {v["name"] for v in health["templating"]["list"]}
    assert {v["name"] for v in built["gpudash-fleet.json"]["templating"]["list"]} <= names


def test_reporting_against_expected_names_its_source_and_colours_only_the_missing(built: dict[str, Any]) -> None:
    _, panels = first_row(built["gpudash-fleet.json"])
    panel = next(p for p in panels if p["title"] == "Reporting / expected")
    assert {t["refId"]: t["legendFormat"] for t in panel["targets"]} == {"A": "reporting", "B": "expected"}
    expected = panel["targets"][1]["expr"]
    assert "gpudash_node_gpus_expected" in expected and "max_over_time(cluster:gpu_count:count" in expected
    lookback = str(load_settings(ROOT / "thresholds.yaml").thresholds.dashboards.expected_lookback)
    assert f"[{lookback}]" in expected and f"last {lookback}" in panel["description"]
    assert "red" not in {c for c, _ in steps(panel)}  # a count of GPUs reporting is not an alarm
    missing = next(p for p in panels if p["title"] == "GPUs missing")
    assert expected.removeprefix("sum(").removesuffix(")") in missing["targets"][0]["expr"]
    assert steps(missing) == [("green", None), ("red", 1)]
    # The list of what stopped reporting is in the same row.
    assert "Exporters and GPUs that stopped reporting" in [p["title"] for p in panels]


def test_the_expected_lookback_comes_from_thresholds(thresholds_copy: Any) -> None:
    path = thresholds_copy((("dashboards", "expected_lookback"), "3d"))
    fleet = build_all(load_settings(path), ROOT / "dashboards")["gpudash-fleet.json"]
    panel = next(p for p in first_row(fleet)[1] if p["title"] == "Reporting / expected")
    assert "[3d]" in panel["targets"][1]["expr"] and "[1d]" not in panel["targets"][1]["expr"]


def utilization_panels(built: dict[str, Any]) -> list[tuple[str, Panel]]:
    """Panels that colour a utilization level (%), on every dashboard."""
    found = []
    for name, dashboard in built.items():
        for p in dashboard["panels"]:
            exprs = " ".join(t.get("expr", "") for t in p.get("targets", []))
            if p["type"] != "row" and re.search(r"GPU_UTIL|gpu_utilization:", exprs) \
                    and (p["fieldConfig"]["defaults"].get("unit") == "percent" or p["type"] == "heatmap") \
                    and "band" not in exprs and len(steps(p)) > 1:
                found.append((name, p))
    return found


def test_utilization_colours_treat_low_as_bad_and_a_busy_gpu_is_never_red(built: dict[str, Any]) -> None:
    u = load_settings(ROOT / "thresholds.yaml").thresholds.utilization
    found = utilization_panels(built)
    assert {name for name, _ in found} >= {"gpudash-fleet.json", "gpudash-node.json", "gpudash-job.json"}
    assert len(found) >= 10
    for name, panel in found:
        colours = steps(panel)
        assert colours[0] == (IDLE, None), (name, panel["title"])  # under the idle level: the idle colour
        assert (colours[1][1], colours[-1][1]) == (u.idle_below_percent, u.saturated_above_percent)
        assert all(c.endswith("green") for c, _ in colours[1:]), (name, panel["title"], colours)


def test_idle_counts_wear_the_idle_colour_and_memory_and_heat_stay_high_is_bad(built: dict[str, Any]) -> None:
    for name, title in (("gpudash-fleet.json", "Idle GPUs"), ("gpudash-node.json", "Idle GPUs"),
                        ("gpudash-job.json", "GPUs held idle")):
        panel = next(p for p in built[name]["panels"] if p["title"] == title)
        assert steps(panel) == [("green", None), (IDLE, 1)], (name, title)
    for name, title in (("gpudash-fleet.json", "Memory used"), ("gpudash-fleet.json", "Hottest GPU"),
                        ("gpudash-node.json", "GPU temperature"), ("gpudash-node.json", "Memory used per GPU")):
        panel = next(p for p in built[name]["panels"] if p["title"] == title)
        assert [c for c, _ in steps(panel)] == ["green", "orange", "red"], (name, title)


def test_a_thresholds_file_without_the_expected_lookback_reads_one_day(tmp_path: Any) -> None:
    text = (ROOT / "thresholds.yaml").read_text(encoding="utf-8")
    kept = [line for line in text.splitlines(keepends=True) if not line.lstrip().startswith("expected_lookback:")]
    assert len(kept) == len(text.splitlines()) - 1
    (tmp_path / "thresholds.yaml").write_text("".join(kept), encoding="utf-8")
    assert str(load_settings(tmp_path / "thresholds.yaml").thresholds.dashboards.expected_lookback) == "1d"
