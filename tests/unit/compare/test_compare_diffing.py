"""The diff a reviewer reads: summary lines first, then a unified diff of canonical JSON."""

from __future__ import annotations

import copy

from grafana_standin.testkit import make_dashboard

from gpudash.compare.content import MARKER_KEY, marked
from gpudash.compare.diffing import headline, report, summarize, unified


def test_equal_dashboards_have_no_diff_whatever_the_server_added() -> None:
    local = make_dashboard("a", "A")
    remote = marked(local, "abc", "lab")
    remote.update(id=12, version=40)
    assert unified(remote, local, "a") == ""
    assert report(remote, local, "a") == ""


def test_summary_names_panels_thresholds_and_queries() -> None:
    remote = make_dashboard("a", "A")
    local = copy.deepcopy(remote)
    local["panels"][1]["fieldConfig"]["defaults"]["thresholds"]["steps"][1]["value"] = 85
    local["panels"][2]["targets"][0]["expr"] = "max(gpu_util)"
    local["panels"][3]["title"] = "Renamed"
    local["panels"].append({"id": 20, "type": "stat", "title": "Added"})
    del local["panels"][0]
    local["refresh"] = "1m"
    local["templating"]["list"].append({"name": "cluster", "type": "query"})
    lines = summarize(remote, local)
    assert "  ~ refresh: 30s -> 1m" in lines
    assert "  + variable $cluster" in lines
    assert "  - panel 1 'Overview'" in lines
    assert "  + panel 20 'Added'" in lines
    assert "  ~ panel 2 'Panel 2': thresholds green, 80 red -> green, 85 red" in lines
    assert "  ~ panel 3 'Panel 3': query A: avg(gpu_util) * 3 -> max(gpu_util)" in lines
    assert "  ~ panel 4 'Renamed': title 'Panel 4' -> 'Renamed'" in lines
    assert headline(remote, local) == "1 panels added, 1 removed, 3 changed"


def test_renumbered_panels_pair_by_title() -> None:
    remote = make_dashboard("a", "A")
    local = copy.deepcopy(remote)
    for panel in local["panels"]:
        panel["id"] += 100
    lines = summarize(remote, local)
    assert not any(line.startswith(("  +", "  -")) for line in lines)
    assert "  ~ panel 102 'Panel 2': also id" in lines


def test_panels_inside_collapsed_rows_are_compared() -> None:
    remote = make_dashboard("a", "A")
    remote["panels"][0]["panels"] = [{"id": 50, "title": "Hidden", "targets": [{"refId": "A", "expr": "a"}]}]
    local = copy.deepcopy(remote)
    local["panels"][0]["panels"][0]["targets"][0]["expr"] = "b"
    assert "  ~ panel 50 'Hidden': query A: a -> b" in summarize(remote, local)


def test_unified_diff_goes_from_grafana_to_local_and_never_shows_the_marker() -> None:
    local = make_dashboard("a", "A", threshold=85)
    remote = marked(make_dashboard("a", "A", threshold=80), "abc", "lab")
    text = unified(remote, local, "a")
    assert text.startswith("--- grafana/a\n+++ local/a.json\n")
    assert '-                "value": 80\n' in text and '+                "value": 85\n' in text
    assert MARKER_KEY not in text
    assert report(remote, local, "a").startswith("a: 0 panels added, 0 removed, 3 changed\n")


def test_moved_panels_and_changed_units_are_said_in_words() -> None:
    remote = make_dashboard("a", "A")
    local = copy.deepcopy(remote)
    panel = local["panels"][1]
    panel["gridPos"] = {"x": 12, "y": 0, "w": 12, "h": 8}
    panel["fieldConfig"]["defaults"]["unit"] = "watt"
    assert summarize(remote, local) == ["  ~ panel 2 'Panel 2': moved x0 y16 12x8 -> x12 y0 12x8; unit percent -> watt"]
