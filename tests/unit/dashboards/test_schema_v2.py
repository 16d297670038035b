"""The classic dashboards as dashboard.grafana.app/v2 resources: every panel, row, variable and control carried over."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from support.paths import ROOT

from gpudash.catalog import DCGM, NVIDIA_SMI
from gpudash.errors import ConfigError
from gpudash.schema_v2 import controls
from gpudash.schema_v2.layout import TABS
from gpudash.schema_v2.resource import API_VERSION, to_v2

NAMES = ("gpudash-fleet.json", "gpudash-health.json", "gpudash-job.json", "gpudash-node.json")


def classic(name: str) -> dict[str, Any]:
    return json.loads((ROOT / "dashboards" / "json" / name).read_text())


def classic_panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    for panel in dashboard["panels"]:
        found += [panel, *panel.get("panels", [])]
    return [p for p in found if p["type"] != "row"]


def layout_items(layout: dict[str, Any]) -> list[dict[str, Any]]:
    """Every grid or auto-grid item of a layout, sections included, in order."""
    kind, spec = layout["kind"], layout["spec"]
    if kind in ("GridLayout", "AutoGridLayout"):
        return list(spec["items"])
    parts = spec["rows"] if kind == "RowsLayout" else spec["tabs"]
    return [item for part in parts for item in layout_items(part["spec"]["layout"])]


@pytest.mark.parametrize("name", NAMES)
def test_the_envelope_is_the_resource_grafana_13_serves(name: str) -> None:
    dashboard = classic(name)
    resource = to_v2(dashboard)
    assert resource["apiVersion"] == API_VERSION == "dashboard.grafana.app/v2"
    assert resource["kind"] == "Dashboard"
    assert resource["metadata"] == {"name": dashboard["uid"]}
    spec = resource["spec"]
    assert (spec["title"], spec["tags"], spec["description"]) == (dashboard["title"], dashboard["tags"],
                                                                    dashboard["description"])
    assert "uid" not in spec and "schemaVersion" not in spec and "id" not in spec


@pytest.mark.parametrize("name", NAMES)
def test_every_panel_becomes_an_element_with_its_plugin_options_and_queries(name: str) -> None:
    dashboard = classic(name)
    elements = to_v2(dashboard)["spec"]["elements"]
    panels = classic_panels(dashboard)
    assert sorted(elements) == sorted(f"panel-{p['id']}" for p in panels)
    for panel in panels:
        element = elements[f"panel-{panel['id']}"]
        assert element["kind"] == "Panel"
        spec = element["spec"]
        assert (spec["id"], spec["title"], spec["description"]) == (panel["id"], panel["title"], panel["description"])
        viz = spec["vizConfig"]
        assert (viz["kind"], viz["group"], viz["version"]) == ("VizConfig", panel["type"], panel["pluginVersion"])
        assert viz["spec"]["options"] == panel["options"]
        assert viz["spec"]["fieldConfig"]["defaults"] == panel["fieldConfig"]["defaults"]
        assert viz["spec"]["fieldConfig"]["overrides"] == panel["fieldConfig"].get("overrides", [])
        data = spec["data"]["spec"]
        assert [q["spec"]["refId"] for q in data["queries"]] == [t["refId"] for t in panel["targets"]]
        for query, target in zip(data["queries"], panel["targets"], strict=True):
            model = query["spec"]["query"]
            assert (model["kind"], model["group"], model["version"]) == ("DataQuery", "prometheus", "v0")
            assert model["datasource"] == {"name": target["datasource"]["uid"]}
            assert model["spec"]["expr"] == target["expr"]
            assert "refId" not in model["spec"] and "datasource" not in model["spec"]
            assert query["spec"]["hidden"] is False
        assert [t["group"] for t in data["transformations"]] == [t["id"] for t in panel.get("transformations", [])]
        assert [t["spec"]["options"] for t in data["transformations"]] == [
            t["options"] for t in panel.get("transformations", [])]
        assert data["queryOptions"] == ({"maxDataPoints": panel["maxDataPoints"]} if "maxDataPoints" in panel else {})


def test_each_panel_type_gpudash_uses_is_converted() -> None:
    used = {p["type"] for name in NAMES for p in classic_panels(classic(name))}
    converted = {e["spec"]["vizConfig"]["group"] for name in NAMES
                 for e in to_v2(classic(name))["spec"]["elements"].values()}
    assert used == converted
    assert {"stat", "timeseries", "table", "gauge", "bargauge", "heatmap", "state-timeline"} <= converted


@pytest.mark.parametrize("name", NAMES)
def test_rows_become_rows_holding_a_grid_with_the_panels_positions(name: str) -> None:
    dashboard = classic(name)
    layout = to_v2(dashboard)["spec"]["layout"]
    assert layout["kind"] == "RowsLayout"
    rows = layout["spec"]["rows"]
    classic_rows = [p for p in dashboard["panels"] if p["type"] == "row"]
    assert [r["spec"]["title"] for r in rows] == [r["title"] for r in classic_rows]
    by_id = {p["id"]: p for p in classic_panels(dashboard)}
    for row, classic_row in zip(rows, classic_rows, strict=True):
        assert row["kind"] == "RowsLayoutRow" and row["spec"].get("collapse", False) == classic_row["collapsed"]
        inner = row["spec"]["layout"]
        if inner["kind"] != "GridLayout":
            continue
        for item in inner["spec"]["items"]:
            pos = by_id[int(item["spec"]["element"]["name"].removeprefix("panel-"))]["gridPos"]
            spec = item["spec"]
            assert (spec["x"], spec["width"], spec["height"]) == (pos["x"], pos["w"], pos["h"])
            assert spec["y"] == pos["y"] - classic_row["gridPos"]["y"] - 1
    names = [i["spec"]["element"]["name"] for i in layout_items(layout)]
    assert sorted(names) == sorted(to_v2(dashboard)["spec"]["elements"])  # each element placed once


def test_tabs_hold_the_same_sections_and_panels_as_rows() -> None:
    dashboard = classic("gpudash-node.json")
    rows, tabs = to_v2(dashboard)["spec"]["layout"], to_v2(dashboard, sections=TABS)["spec"]["layout"]
    assert tabs["kind"] == "TabsLayout"
    assert [t["kind"] for t in tabs["spec"]["tabs"]] == ["TabsLayoutTab"] * len(rows["spec"]["rows"])
    assert [t["spec"]["title"] for t in tabs["spec"]["tabs"]] == [r["spec"]["title"] for r in rows["spec"]["rows"]]
    assert layout_items(tabs) == layout_items(rows)


def test_a_collapsed_row_keeps_its_own_panels_and_panels_before_any_row_get_a_headerless_row() -> None:
    dashboard = copy.deepcopy(classic("gpudash-fleet.json"))
    top = [p for p in dashboard["panels"] if p["type"] != "row"]
    first_row = dashboard["panels"][0]
    loose, rest = dashboard["panels"][1], dashboard["panels"][2:]
    folded = {**first_row, "collapsed": True, "panels": [p for p in rest if p["type"] != "row"][:3]}
    dashboard["panels"] = [loose, folded]
    rows = to_v2(dashboard)["spec"]["layout"]["spec"]["rows"]
    assert rows[0]["spec"]["hideHeader"] is True and rows[0]["spec"]["title"] == dashboard["title"]
    assert [i["spec"]["element"]["name"] for i in layout_items(rows[0]["spec"]["layout"])] == [f"panel-{loose['id']}"]
    assert rows[1]["spec"]["collapse"] is True and rows[1]["spec"]["title"] == first_row["title"]
    assert [i["spec"]["element"]["name"] for i in layout_items(rows[1]["spec"]["layout"])] == [
        f"panel-{p['id']}" for p in folded["panels"]]
    assert top  # the fleet dashboard has panels outside its rows' own lists


def test_a_dashboard_without_rows_is_one_grid() -> None:
    dashboard = classic("gpudash-job.json")
    dashboard["panels"] = classic_panels(dashboard)[:4]
    layout = to_v2(dashboard)["spec"]["layout"]
    assert layout["kind"] == "GridLayout"
    assert [i["spec"]["y"] for i in layout["spec"]["items"]] == [p["gridPos"]["y"] for p in dashboard["panels"]]


def test_panels_without_ids_or_with_a_repeated_id_are_kept_under_stable_keys() -> None:
    dashboard = copy.deepcopy(classic("gpudash-health.json"))
    panels = classic_panels(dashboard)
    del panels[0]["id"]
    panels[2]["id"] = None
    panels[4]["id"] = panels[3]["id"]
    resource = to_v2(dashboard)
    elements = resource["spec"]["elements"]
    assert len(elements) == len(panels)
    assert sorted(e["spec"]["title"] for e in elements.values()) == sorted(p["title"] for p in panels)
    assert len({e["spec"]["id"] for e in elements.values()}) == len(panels)
    placed = [i["spec"]["element"]["name"] for i in layout_items(resource["spec"]["layout"])]
    assert sorted(placed) == sorted(elements)
    assert to_v2(copy.deepcopy(dashboard)) == resource  # the same dashboard, the same keys


def test_conversion_leaves_the_classic_dashboard_as_it_was() -> None:
    dashboard = classic("gpudash-node.json")
    before = copy.deepcopy(dashboard)
    to_v2(dashboard, profile=DCGM)
    assert dashboard == before


def optional_titles(resource: dict[str, Any]) -> set[str]:
    """Titles of the elements hidden while they have no data: each auto-grid item, or every panel of a row."""
    elements = resource["spec"]["elements"]
    hidden = set()
    for row in resource["spec"]["layout"]["spec"]["rows"]:
        items = layout_items(row["spec"]["layout"])
        for item in items:
            if "conditionalRendering" in item["spec"] or "conditionalRendering" in row["spec"]:
                hidden.add(elements[item["spec"]["element"]["name"]]["spec"]["title"])
    return hidden


def test_panels_on_signals_an_exporter_publishes_only_when_asked_hide_while_empty() -> None:
    node = to_v2(classic("gpudash-node.json"), profile=DCGM)
    assert optional_titles(node) == {"Memory per process", "Throttle reasons"}
    memory = next(r for r in node["spec"]["layout"]["spec"]["rows"] if r["spec"]["title"] == "Memory")
    assert memory["spec"]["layout"]["kind"] == "AutoGridLayout"  # grid items take no conditional rendering
    hidden = [i for i in memory["spec"]["layout"]["spec"]["items"] if "conditionalRendering" in i["spec"]]
    assert [i["spec"]["conditionalRendering"] for i in hidden] == [{
        "kind": "ConditionalRenderingGroup", "spec": {"visibility": "show", "condition": "and", "items": [
            {"kind": "ConditionalRenderingData", "spec": {"value": True}}]}}]
    job = to_v2(classic("gpudash-job.json"), profile=DCGM)
    assert all(t.startswith(("SM activity", "Activity")) for t in optional_titles(job)) and optional_titles(job)
    assert not optional_titles(to_v2(classic("gpudash-fleet.json"), profile=DCGM))
    assert not optional_titles(to_v2(classic("gpudash-node.json")))  # without a profile, nothing is judged


def test_a_row_of_only_such_panels_hides_as_a_whole_and_keeps_its_grid() -> None:
    dashboard = copy.deepcopy(classic("gpudash-node.json"))
    panels = dashboard["panels"]
    start = next(i for i, p in enumerate(panels) if p.get("title") == "Memory per process")
    dashboard["panels"] = [{**panels[0], "title": "Per process"}, panels[start]]
    row = to_v2(dashboard, profile=DCGM)["spec"]["layout"]["spec"]["rows"][0]
    assert row["spec"]["layout"]["kind"] == "GridLayout"
    assert row["spec"]["conditionalRendering"]["spec"]["items"] == [
        {"kind": "ConditionalRenderingData", "spec": {"value": True}}]


def test_a_profile_with_names_of_its_own_hides_nothing() -> None:
    # nvidia_smi publishes what it has under its own names; what it lacks, the definitions leave out.
    dashboard = classic("gpudash-node.json")
    assert not optional_titles(to_v2(dashboard, profile=NVIDIA_SMI))


def test_variables_keep_their_kind_and_their_choices_by_name() -> None:
    dashboard = classic("gpudash-health.json")
    variables = to_v2(dashboard)["spec"]["variables"]
    classic_vars = dashboard["templating"]["list"]
    kinds = {"datasource": "DatasourceVariable", "query": "QueryVariable", "custom": "CustomVariable"}
    assert [v["kind"] for v in variables] == [kinds[v["type"]] for v in classic_vars]
    assert [v["spec"]["name"] for v in variables] == [v["name"] for v in classic_vars]
    for var, old in zip(variables, classic_vars, strict=True):
        spec = var["spec"]
        assert spec["hide"] == controls.HIDE[old["hide"]] and spec["label"] == old["label"]
        assert (spec["multi"], spec["includeAll"]) == (old["multi"], old["includeAll"])
        if old["type"] == "query":
            assert spec["refresh"] == controls.REFRESH[old["refresh"]]
            assert spec["sort"] == controls.SORT[old["sort"]]
            assert spec["query"]["spec"] == old["query"] and spec["definition"] == old["definition"]
            assert spec["query"]["datasource"] == {"name": "${datasource}"}
            assert spec.get("allValue") == old.get("allValue")
        if old["type"] == "custom":
            assert spec["query"] == old["query"] and spec["options"] == old["options"]
            assert spec["current"] == old["current"]
        if old["type"] == "datasource":
            assert spec["pluginId"] == "prometheus"


def test_a_variable_type_without_a_v2_form_is_one_line_naming_it() -> None:
    dashboard = copy.deepcopy(classic("gpudash-fleet.json"))
    dashboard["templating"]["list"].append({"name": "step", "type": "interval", "query": "1m,5m"})
    with pytest.raises(ConfigError, match=r"^dashboard gpudash-fleet: variable 'step' of type 'interval' has no "):
        to_v2(dashboard)


def test_annotations_links_time_and_cursor_carry_over() -> None:
    dashboard = classic("gpudash-fleet.json")
    spec = to_v2(dashboard)["spec"]
    builtin, alerts = spec["annotations"][0]["spec"], spec["annotations"][1]["spec"]
    assert builtin["builtIn"] is True and builtin["query"]["group"] == "grafana"
    old = dashboard["annotations"]["list"][1]
    assert alerts["query"]["spec"] == old["target"] and alerts["name"] == old["name"]
    assert alerts["legacyOptions"] == {k: old[k] for k in ("tagKeys", "textFormat", "titleFormat", "useValueForTime")}
    assert [link["url"] for link in spec["links"]] == [link["url"] for link in dashboard["links"]]
    assert all(set(link) >= {"title", "type", "icon", "tooltip", "tags", "asDropdown", "targetBlank",
                             "includeVars", "keepTime"} for link in spec["links"])
    time = spec["timeSettings"]
    assert (time["from"], time["to"], time["autoRefresh"], time["timezone"]) == (
        dashboard["time"]["from"], dashboard["time"]["to"], dashboard["refresh"], dashboard["timezone"])
    assert spec["cursorSync"] == controls.CURSOR_SYNC[dashboard["graphTooltip"]] == "Crosshair"
