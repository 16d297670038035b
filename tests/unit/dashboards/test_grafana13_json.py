"""The dashboards as Grafana 13 stores them: schema 42, every panel's pluginVersion, nothing a load would
migrate or a UI save would drop (shared/reference/grafana-13-apis.md §3)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.paths import ROOT

from gpudash.config.loading import load_settings
from gpudash.panels.build import build_all
from gpudash.panels.grafanalib_fixups import GRAFANA_VERSION, SCHEMA_VERSION, modernize


@pytest.fixture(scope="module")
def built() -> dict[str, dict[str, Any]]:
    return build_all(load_settings(ROOT / "thresholds.yaml"), ROOT / "dashboards")


def every_panel(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Panels and rows, the panels inside collapsed rows included."""
    for panel in panels:
        yield panel
        yield from every_panel(panel.get("panels", []))


def nulls(value: Any, path: str = "") -> Iterator[str]:
    if value is None:
        yield path
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from nulls(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from nulls(item, f"{path}[{index}]")


def test_schema_42_and_every_panel_stamped_with_the_pinned_grafana(built: dict[str, dict[str, Any]]) -> None:
    assert SCHEMA_VERSION == 42
    for name, dashboard in built.items():
        assert dashboard["schemaVersion"] == SCHEMA_VERSION, name
        panels = list(every_panel(dashboard["panels"]))
        assert panels, name
        for panel in panels:
            if panel["type"] == "row":
                assert "pluginVersion" not in panel  # Grafana stamps plugins; a row is none
            else:
                assert panel["pluginVersion"] == GRAFANA_VERSION, f"{name}: {panel['title']}"


def test_the_pinned_grafana_is_the_release_the_types_check(root: Path) -> None:
    dependencies = json.loads((root / "tests" / "schema" / "package.json").read_text())["dependencies"]
    assert dependencies["grafana-schema-13"] == f"npm:@grafana/schema@{GRAFANA_VERSION}"
    lock = json.loads((root / "tests" / "schema" / "package-lock.json").read_text())["packages"]
    for alias, spec in dependencies.items():
        assert lock[f"node_modules/{alias}"]["version"] == spec.rsplit("@", 1)[-1], alias


def test_no_null_but_the_threshold_base(built: dict[str, dict[str, Any]]) -> None:
    # A UI save drops every null; the base step's value is -Infinity in Grafana, which JSON writes as null, in
    # the defaults' thresholds and in a thresholds override's value alike.
    base = re.compile(r"(\.thresholds|\.properties\[\d+\]\.value)\.steps\[0\]\.value$")
    for name, dashboard in built.items():
        for path in nulls(dashboard):
            assert base.search(path), f"{name}: null at {path}"


def test_nothing_migrations_40_to_42_would_change(built: dict[str, dict[str, Any]]) -> None:
    for name, dashboard in built.items():
        assert isinstance(dashboard["refresh"], str), name  # 40
        assert "time_options" not in dashboard.get("timepicker", {}), name  # 41
        for panel in every_panel(dashboard["panels"]):  # 42
            for override in panel.get("fieldConfig", {}).get("overrides", []):
                for prop in override["properties"]:
                    if prop["id"] == "custom.hideFrom" and prop["value"].get("viz"):
                        assert prop["value"].get("tooltip") is True, f"{name}: {panel['title']}"


def test_a_series_hidden_from_the_plot_is_hidden_from_the_tooltip() -> None:
    hidden = {"id": "custom.hideFrom", "value": {"legend": False, "tooltip": False, "viz": True}}
    shown = {"id": "custom.hideFrom", "value": {"legend": True, "tooltip": False, "viz": False}}
    raw = {"templating": {"list": []}, "panels": [{
        "type": "timeseries", "title": "t", "targets": [],
        "fieldConfig": {"defaults": {}, "overrides": [{"matcher": {"id": "byName", "options": "x"},
                                                       "properties": [hidden, shown]}]},
    }]}
    props = modernize(raw)["panels"][0]["fieldConfig"]["overrides"][0]["properties"]
    assert props[0]["value"] == {"legend": False, "tooltip": True, "viz": True}
    assert props[1]["value"] == {"legend": True, "tooltip": False, "viz": False}


def test_tables_have_no_footer_options_and_the_required_ones(built: dict[str, dict[str, Any]]) -> None:
    tables = [p for d in built.values() for p in every_panel(d["panels"]) if p["type"] == "table"]
    assert tables
    for table in tables:
        assert "footer" not in table["options"], table["title"]
        assert table["options"]["frameIndex"] == 0 and table["options"]["showHeader"] is True


def test_percent_single_stats_have_the_range_the_legacy_migration_would_write(
        built: dict[str, dict[str, Any]]) -> None:
    ranges = {"percent": (0, 100), "percentunit": (0, 1)}
    checked = 0
    for dashboard in built.values():
        for panel in every_panel(dashboard["panels"]):
            defaults = panel.get("fieldConfig", {}).get("defaults", {})
            if panel["type"] in ("stat", "gauge", "bargauge") and defaults.get("unit") in ranges:
                assert defaults["min"] < defaults["max"], panel["title"]
                checked += 1
    assert checked


@pytest.mark.parametrize(("kind", "unit", "given", "expected"), [
    ("stat", "percent", {}, (0, 100)),
    ("gauge", "percentunit", {}, (0, 1)),
    ("bargauge", "percent", {"min": 10}, (10, 100)),
    ("stat", "celsius", {}, (None, None)),
])
def test_the_percent_range_fills_only_what_is_missing(kind: str, unit: str, given: dict[str, Any],
                                                      expected: tuple[Any, Any]) -> None:
    raw = {"templating": {"list": []}, "panels": [{
        "type": kind, "title": "t", "targets": [], "fieldConfig": {"defaults": {"unit": unit, **given}},
    }]}
    defaults = modernize(raw)["panels"][0]["fieldConfig"]["defaults"]
    assert (defaults.get("min"), defaults.get("max")) == expected


def test_variables_open_on_all_as_grafana_writes_the_selection(built: dict[str, dict[str, Any]]) -> None:
    for dashboard in built.values():
        for variable in dashboard["templating"]["list"]:
            if variable["type"] == "datasource":
                assert "current" not in variable  # the site's default data source, whatever it is
            elif variable.get("includeAll"):
                expected = ["All"], ["$__all"]
                assert variable["current"] == {"text": expected[0], "value": expected[1]}, variable["name"]
