"""Drift is a person's edit, not Grafana's normalisation (schema 40-42, pluginVersion, defaults, nulls)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from grafana_standin.migrate import backend_migrate, ui_save_model
from support.paths import ROOT

from gpudash.compare.content import (
    MARKER_KEY,
    canonical,
    hash_of_canonical,
    legacy_canonical,
    marked,
    marker_annotations,
    marker_of_annotations,
    provenance,
)
from gpudash.compare.normalise import PLUGIN_DEFAULTS, grafana_normalised
from gpudash.repository import DASHBOARDS_JSON_DIR


def as_gpudash_writes(schema: int = 39) -> dict[str, Any]:
    return {
        "uid": "gpu-node", "title": "GPU node", "schemaVersion": schema, "refresh": "30s", "tags": ["gpudash"],
        "timepicker": {"refresh_intervals": ["5s", "10s", "30s", "1m", "5m", "15m", "30m", "1h", "2h", "1d"],
                       "time_options": ["5m", "1h"]},
        "panels": [
            {"id": 1, "type": "row", "title": "Overview", "panels": [], "collapsed": False},
            {"id": 2, "type": "stat", "title": "Busy", "fieldConfig": {"defaults": {"unit": "percent", "thresholds": {
                "mode": "absolute", "steps": [{"color": "green", "value": None}, {"color": "red", "value": 90}]}},
                "overrides": []}, "options": {"colorMode": "background"}},
            {"id": 3, "type": "timeseries", "title": "Memory", "description": None,
             "fieldConfig": {"defaults": {"unit": "bytes"}, "overrides": [
                 {"matcher": {"id": "byName", "options": "limit"},
                  "properties": [{"id": "custom.hideFrom", "value": {"legend": False, "viz": True}}]}]}},
            {"id": 4, "type": "table", "title": "Fullest", "options": {"footer": {
                "show": True, "reducer": ["sum"], "fields": "", "countRows": False, "enablePagination": False}}},
        ],
    }


def as_grafana_13_saves(dashboard: dict[str, Any]) -> dict[str, Any]:
    """What Grafana 13 stores after a person opens and saves it unchanged, written out by hand (reference §3)."""
    saved = copy.deepcopy(dashboard)
    saved.update(schemaVersion=42, version=3, id=17)
    del saved["timepicker"]
    stat, series, table = saved["panels"][1:]
    stat.update(pluginVersion="13.2.0", options={
        "colorMode": "background", "graphMode": "area", "justifyMode": "auto", "orientation": "auto",
        "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}, "showPercentChange": False,
        "textMode": "auto", "wideLayout": True})
    stat["fieldConfig"]["defaults"].update(min=0, max=100, mappings=[])
    stat["fieldConfig"]["defaults"]["thresholds"]["steps"][0] = {"color": "green"}
    del series["description"]
    series.update(pluginVersion="13.2.0", options={
        "legend": {"calcs": [], "displayMode": "list", "placement": "bottom", "showLegend": True},
        "tooltip": {"mode": "single", "sort": "none"}})
    series["fieldConfig"]["defaults"].update(color={"mode": "palette-classic"}, mappings=[])
    series["fieldConfig"]["overrides"][0]["properties"][0]["value"]["tooltip"] = True
    table.update(pluginVersion="13.2.0", options={"cellHeight": "sm", "showHeader": True}, fieldConfig={
        "defaults": {"custom": {"align": "auto", "cellOptions": {"type": "auto"}, "inspect": False,
                                "footer": {"reducers": ["sum"]}}, "mappings": []}})
    return saved


def test_an_unchanged_save_in_grafana_13_compares_equal() -> None:
    local = as_gpudash_writes()
    assert canonical(as_grafana_13_saves(local)) == canonical(local)


def test_equal_whichever_schema_version_gpudash_writes() -> None:
    at_42 = as_gpudash_writes(schema=42)
    for panel in at_42["panels"][1:]:
        panel["pluginVersion"] = "12.2.0"
    assert canonical(at_42) == canonical(as_gpudash_writes(39)) == canonical(as_grafana_13_saves(at_42))


def test_a_moved_threshold_is_still_a_difference() -> None:
    saved = as_grafana_13_saves(as_gpudash_writes())
    saved["panels"][1]["fieldConfig"]["defaults"]["thresholds"]["steps"][1]["value"] = 95
    assert canonical(saved) != canonical(as_gpudash_writes())


def test_a_value_other_than_the_default_is_a_difference() -> None:
    saved = as_grafana_13_saves(as_gpudash_writes())
    saved["panels"][2]["options"]["legend"]["placement"] = "right"  # the default is bottom
    assert canonical(saved) != canonical(as_gpudash_writes())
    explicit_bounds = as_grafana_13_saves(as_gpudash_writes())
    explicit_bounds["panels"][1]["fieldConfig"]["defaults"]["max"] = 120
    assert canonical(explicit_bounds) != canonical(as_gpudash_writes())


def test_normalising_is_idempotent_and_leaves_its_argument_and_the_table_alone() -> None:
    local = as_gpudash_writes()
    before, table = copy.deepcopy(local), copy.deepcopy(PLUGIN_DEFAULTS)
    once = grafana_normalised(local)
    assert grafana_normalised(once) == once
    assert local == before and table == PLUGIN_DEFAULTS
    assert "schemaVersion" not in once and all("pluginVersion" not in p for p in once["panels"])


def test_a_marker_written_by_an_older_gpudash_still_reads_as_pushed() -> None:
    local = as_gpudash_writes()
    old = dict(local, **{MARKER_KEY: {"contentHash": hash_of_canonical(legacy_canonical(local)), "commit": "abc",
                                      "site": "s", "uid": "gpu-node"}})
    assert provenance(old) == "pushed"
    old["panels"][1]["title"] = "changed since"
    assert provenance(old) == "edited"


def test_a_ui_save_of_a_marked_dashboard_is_still_pushed() -> None:
    pushed = marked(as_gpudash_writes(), "abc", "site-a")
    saved = as_grafana_13_saves(pushed)
    assert provenance(saved) == "pushed"
    saved["panels"][1]["fieldConfig"]["defaults"]["thresholds"]["steps"][1]["value"] = 95
    assert provenance(saved) == "edited"


def test_the_marker_round_trips_through_annotations() -> None:
    marker = marked(as_gpudash_writes(), "abc", "site-a")[MARKER_KEY]
    annotations = marker_annotations(marker)
    assert annotations["grafana.app/managerId"] == "gpudash"
    assert annotations["grafana.app/managerAllowsEdits"] == "true"  # a manager without it locks the UI
    assert marker_of_annotations(annotations) == marker
    assert marker_of_annotations({**annotations, "grafana.app/managerId": "grafanactl"}) is None


@pytest.mark.parametrize("path", sorted((ROOT / DASHBOARDS_JSON_DIR).glob("*.json")), ids=lambda p: p.stem)
def test_each_committed_dashboard_saved_unchanged_in_grafana_13_is_not_drift(path: Path) -> None:
    committed = json.loads(path.read_text())
    saved = ui_save_model(backend_migrate(committed), "13.2.0")  # a v1 push, then an unchanged save in the editor
    assert saved != committed  # Grafana did rewrite it
    assert canonical(saved) == canonical(committed)
