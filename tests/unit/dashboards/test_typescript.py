"""The TypeScript written for tsc: each panel's options and custom field config typed by its own plugin."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from support.paths import ROOT

from gpudash.errors import ConfigError
from gpudash.panels.grafanalib_fixups import GAUGE_12_4
from gpudash.panels.typescript import (
    PANEL_MODULES,
    dashboard_typescript,
    panel_comment,
    release_of,
    tsconfig_json,
)

NEWEST = (13, 2)


def committed(name: str) -> dict[str, Any]:
    return json.loads((ROOT / "dashboards" / "json" / name).read_text())


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    for panel in dashboard["panels"]:
        found += [panel, *panel.get("panels", [])]
    return [p for p in found if p["type"] != "row"]


@pytest.mark.parametrize("name", ["gpudash-fleet.json", "gpudash-node.json", "gpudash-job.json"])
def test_every_panel_options_and_custom_config_is_checked_against_its_plugin(name: str) -> None:
    dashboard = committed(name)
    text = dashboard_typescript(dashboard, name, NEWEST)
    for kind in {p["type"] for p in panels(dashboard)}:
        namespace = kind.replace("-", "_")
        assert f'import type * as {namespace} from "@grafana/schema/dist/esm/raw/composable/{PANEL_MODULES[kind]}";' \
            in text
    with_options = [p for p in panels(dashboard) if "options" in p]
    assert len(re.findall(r"satisfies Json<\w+\.Options>", text)) == len(with_options)
    with_custom = [p for p in panels(dashboard) if "custom" in p["fieldConfig"]["defaults"]]
    assert len(re.findall(r"satisfies (Json<\w+\.FieldConfig>|Record<string, never>)", text)) == len(with_custom)
    assert "export const dashboard: GrafanaDashboard = {" in text
    for panel in dashboard["panels"]:
        assert panel_comment(panel) in text


def test_a_panel_type_without_known_types_is_refused_by_name() -> None:
    dashboard = {"panels": [{"id": 4, "title": "Map", "type": "geomap"}], "schemaVersion": 42}
    with pytest.raises(ConfigError, match=r"^x\.json: panel 'Map': type 'geomap' has no @grafana/schema types"):
        dashboard_typescript(dashboard, "x.json", NEWEST)


def test_a_custom_field_config_on_a_plugin_without_one_can_hold_nothing() -> None:
    dashboard = {"panels": [{"id": 1, "title": "s", "type": "stat", "options": {},
                             "fieldConfig": {"defaults": {"custom": {"lineWidth": 1}}, "overrides": []}}]}
    assert '{"lineWidth": 1} satisfies Record<string, never>' in dashboard_typescript(dashboard, "x.json", NEWEST)


def test_gauge_options_of_12_4_are_left_out_only_for_older_releases() -> None:
    dashboard = committed("gpudash-node.json")
    gauge = next(p for p in panels(dashboard) if p["type"] == "gauge")
    assert set(GAUGE_12_4) <= set(gauge["options"])
    for release, present in (((11, 6), False), ((12, 4), True), (NEWEST, True)):
        text = dashboard_typescript(dashboard, "gpudash-node.json", release)
        line = next(line for line in text.splitlines() if "satisfies Json<gauge.Options>" in line)
        assert ('"barShape"' in line) is present and ('"showThresholdMarkers"' in line), release


def test_the_release_and_the_tsconfig() -> None:
    assert release_of("11.6.16") == (11, 6)
    config = json.loads(tsconfig_json(["a.ts"], "/deps/grafana-schema-12"))
    assert config["files"] == ["a.ts"]
    assert config["compilerOptions"]["strict"] is True and config["compilerOptions"]["noEmit"] is True
    assert config["compilerOptions"]["paths"] == {"@grafana/schema": ["/deps/grafana-schema-12"],
                                                  "@grafana/schema/*": ["/deps/grafana-schema-12/*"]}


def test_a_nested_option_of_13_2_is_left_out_of_the_heatmap_legend_before_it() -> None:
    dashboard = committed("gpudash-node.json")
    assert next(p for p in panels(dashboard) if p["type"] == "heatmap")["options"]["legend"]["placement"] == "bottom"
    for release, legend in (((12, 4), '"legend": {"show": true}'),
                            (NEWEST, '"legend": {"placement": "bottom", "show": true}')):
        text = dashboard_typescript(dashboard, "gpudash-node.json", release)
        line = next(line for line in text.splitlines() if "satisfies Json<heatmap.Options>" in line)
        assert legend in line and '"selectionMode": "x"' in line, release


def test_each_panel_is_declared_on_its_own_and_a_row_after_the_panels_it_holds() -> None:
    inner = {"id": 3, "title": "Inside", "type": "text", "options": {"content": "x", "mode": "markdown"}}
    dashboard = {"panels": [{"id": 1, "title": "Open", "type": "timeseries"},
                            {"id": 2, "title": "Folded", "type": "row", "collapsed": True, "panels": [inner]}],
                 "schemaVersion": 42}
    text = dashboard_typescript(dashboard, "x.json", NEWEST)
    order = [text.index(s) for s in ("// panel 1: Open\nconst panel1: GrafanaPanel = {",
                                     "// panel 3: Inside\nconst panel2: GrafanaPanel = {",
                                     "// panel 2: Folded\nconst panel3: GrafanaRow = {",
                                     "export const dashboard: GrafanaDashboard = {")]
    assert order == sorted(order)
    assert '"panels": [panel2]' in text and '"panels": [panel1, panel3]' in text
