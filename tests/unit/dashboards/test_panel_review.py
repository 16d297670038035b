"""The panel review: one test per defect, asserting on the generated dashboard JSON."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from support.paths import ROOT

from gpudash.catalog import DCGM, Publisher
from gpudash.config.loading import load_settings
from gpudash.panels.build import build_all
from gpudash.panels.visualizations import UTILIZATION_SCHEME
from gpudash.promql.for_settings import recording_rules
from gpudash.promql.query import BANDS
from gpudash.promql.recordings import signals_in

Panel = dict[str, Any]


@pytest.fixture(scope="module")
def built() -> dict[str, dict[str, Any]]:
    return build_all(load_settings(ROOT / "thresholds.yaml"), ROOT / "dashboards")


@pytest.fixture(scope="module")
def fleet(built: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return built["gpudash-fleet.json"]


@pytest.fixture(scope="module")
def inlined() -> dict[str, Any]:
    """The fleet dashboard without recording rules: each recorded list's test written out in its panel."""
    return build_all(load_settings(ROOT / "thresholds.yaml"), ROOT / "dashboards", recorded=False)["gpudash-fleet.json"]


def recorded(record: str) -> str:
    """A recording rule's expression as the rule file has it."""
    rules = {rec.record: e for rec, e in recording_rules(load_settings(ROOT / "thresholds.yaml"))}
    return rules[record]


def reads_list(query: str, record: str, k: str = "") -> None:
    """The query reads the recorded list `record` of the selected clusters (under a topk/bottomk when `k`)."""
    assert f'{k}{record}{{cluster=~"$cluster"}}' in query, query


@pytest.fixture(scope="module")
def node(built: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return built["gpudash-node.json"]


def panels(dashboard: dict[str, Any]) -> list[Panel]:
    return [p for p in dashboard["panels"] if p["type"] != "row"]


def every_panel(built: dict[str, dict[str, Any]]) -> Iterator[Panel]:
    for dashboard in built.values():
        yield from panels(dashboard)


def by_title(dashboard: dict[str, Any], title: str) -> Panel:
    matches = [p for p in panels(dashboard) if p["title"] == title]
    assert matches, f"{dashboard['uid']}: no panel titled {title!r}"
    return matches[0]


def expr(panel: Panel, index: int = 0) -> str:
    return str(panel["targets"][index]["expr"])


def transformation(panel: Panel, kind: str) -> dict[str, Any]:
    found = [t["options"] for t in panel.get("transformations", []) if t["id"] == kind]
    assert found, f"{panel['title']}: no {kind} transformation"
    return found[0]


# 1 ------------------------------------------------------------------------------------------------------


def test_1_utilization_bands_are_one_row_per_band_over_all_clusters_and_never_vanish(fleet: dict[str, Any]) -> None:
    panel = by_title(fleet, "GPUs per utilization band")
    query = expr(panel)
    assert query.startswith("sum by (band) (cluster:gpu_utilization_band:count{")  # clusters merged, not repeated
    assert "cluster" not in panel["targets"][0]["legendFormat"]
    for band in BANDS:  # an empty band is a 0, so the axis keeps all ten rows
        assert f'label_replace(vector(0), "band", "{band}", "", "")' in query
    assert panel["options"]["filterValues"]["le"] < 0  # and that 0 is drawn


# 2 ------------------------------------------------------------------------------------------------------


def test_2_node_heatmap_draws_idle_cells_in_the_colours_its_description_names(node: dict[str, Any]) -> None:
    panel = by_title(node, "Utilization per GPU")
    assert panel["options"]["filterValues"]["le"] < 0, "0 % cells hidden: an idle GPU looks missing"
    scheme = panel["options"]["color"]["scheme"]
    assert scheme == UTILIZATION_SCHEME[0]
    # Low is bad: the scale starts at the alarm colour (idle) and ends green (busy), never the other way.
    assert scheme.startswith("Rd") and scheme.endswith("Gn") and not panel["options"]["color"]["reverse"]
    low, high = UTILIZATION_SCHEME[1]
    assert low in panel["description"] and high in panel["description"]
    assert panel["description"].index(low) < panel["description"].index(high)


# 3 ------------------------------------------------------------------------------------------------------


def test_3_node_per_gpu_queries_merge_each_gpu_and_order_by_gpu_index(node: dict[str, Any]) -> None:
    per_gpu_targets = [(p["title"], t) for p in panels(node) for t in p["targets"]
                       if "{{gpu}}" in t.get("legendFormat", "")]
    assert len(per_gpu_targets) >= 12
    for title, target in per_gpu_targets:
        query = target["expr"]
        assert "max by (cluster, instance, gpu" in query, title
        assert query.startswith("label_replace(") and query.endswith('"gpu", "0$1", "gpu", "([0-9])")'), title
    # The padding orders indexes as numbers where Prometheus orders label text: 02 before 10.
    padded = sorted(re.sub(r"^([0-9])$", r"0\1", str(index)) for index in (10, 2, 0, 15, 7))
    assert padded == ["00", "02", "07", "10", "15"]


# 4 ------------------------------------------------------------------------------------------------------


def test_4_xid_table_counts_events_and_shows_the_code(built: dict[str, dict[str, Any]],
                                                     inlined: dict[str, Any]) -> None:
    for dashboard, title in ((inlined, "GPUs with an XID error in range"),
                             (built["gpudash-job.json"], "The job's GPUs with an XID error in range")):
        panel = by_title(dashboard, title)
        query = expr(panel)
        # The bundled exporter's counter: events are its rise over the range, or its value where it appeared.
        assert "gpudash_xid_errors_total{" in query and "offset $__range" in query
        # dcgm-exporter's gauge: half its changes rounded up (the return to 0 is no event), or a new constant
        # err_code series; the code becomes the `xid` column.
        assert "ceil(changes(DCGM_FI_DEV_XID_ERRORS{" in query and "/ 2)" in query
        assert 'label_replace(' in query and '"xid", "$1", "err_code", "(.+)"' in query
        assert "max by (cluster, instance, gpu, xid)" in query
        assert transformation(panel, "organize")["renameByName"] == {"Value": "XID events"}
    # With recording rules, the fleet counts the gauge's events the recording noted (the GPUs that had one):
    # a code it did not show one rule interval before, the return to 0 none, the code from the gauge's value
    # where there is no err_code.
    query = expr(by_title(built["gpudash-fleet.json"], "GPUs with an XID error in range"))
    assert "gpudash_xid_errors_total{" in query and "DCGM_FI_DEV_XID_ERRORS" not in query
    assert 'sum_over_time(cluster_instance_gpu_xid:gpu_xid_errors:new{cluster=~"$cluster"}[$__range]) > 0' in query
    rule = recorded("cluster_instance_gpu_xid:gpu_xid_errors:new")
    assert 'count_values by (cluster, instance, gpu, err_code) ("xid", (' in rule and "> 0) unless (" in rule
    assert "last_over_time(DCGM_FI_DEV_XID_ERRORS[15m] offset 15s)" in rule


# 5 ------------------------------------------------------------------------------------------------------


def test_5_throttled_gpus_are_busy_and_under_their_max_clock_with_a_dcgm_exporter_fallback(
        fleet: dict[str, Any], inlined: dict[str, Any]) -> None:
    titles = {p["title"] for p in panels(fleet)}
    assert not any(t.startswith("Slowest GPUs against their max clock") for t in titles)
    inline = by_title(inlined, "Throttled GPUs now (top 10)")
    panel = by_title(fleet, "Throttled GPUs now (top 10)")
    reads_list(expr(panel, 0), "cluster_instance_gpu:gpu_sm_clock_to_max:throttled", "bottomk(10, ")
    reads_list(expr(panel, 1), "cluster_instance_gpu:gpu_throttle_reasons:count", "topk(10, ")
    for clock, reasons in ((expr(inline, 0), expr(inline, 1)),
                           (recorded("cluster_instance_gpu:gpu_sm_clock_to_max:throttled"),
                            recorded("cluster_instance_gpu:gpu_throttle_reasons:count"))):
        assert "DCGM_FI_DEV_MAX_SM_CLOCK" in clock and "< 0.9" in clock
        assert "and on (cluster, instance, gpu) (max by (cluster, instance, gpu) (DCGM_FI_DEV_GPU_UTIL" in clock
        assert ">= 20" in clock  # an idle GPU at 210 MHz is not throttled
        assert "DCGM_EXP_CLOCK_EVENTS_COUNT{" in reasons and "gpudash_clock_event_active{" in reasons


# 6 ------------------------------------------------------------------------------------------------------


def test_6_top_k_panels_are_sorted_and_fullest_gpus_became_memory_pressure(
        built: dict[str, dict[str, Any]], fleet: dict[str, Any], inlined: dict[str, Any]) -> None:
    for panel in every_panel(built):
        if panel["type"] in ("gauge", "bargauge"):
            assert panel["options"]["reduceOptions"]["values"] is True, panel["title"]
            transformation(panel, "reduce")
            sort = transformation(panel, "sortBy")["sort"][0]
            ranked = expr(panel).startswith(("topk(", "bottomk("))
            assert sort["field"] == ("Last *" if ranked else "Field"), panel["title"]
        if panel["type"] == "table" and any(t["expr"].startswith(("topk(", "bottomk(")) for t in panel["targets"]):
            assert transformation(panel, "sortBy")["sort"], panel["title"]
    assert "Fullest GPUs (top 10)" not in {p["title"] for p in panels(fleet)}
    pressure = by_title(fleet, "Memory pressure: over 90% and growing (top 10)")
    reads_list(expr(pressure), "cluster_instance_gpu:gpu_fb_hours_to_full:growing", "bottomk(10, ")
    inline = expr(by_title(inlined, "Memory pressure: over 90% and growing (top 10)"))
    assert 'DCGM_FI_DEV_FB_USED{cluster=~"$cluster"} offset 15m' in inline and "> 0.9" in inline
    rule = recorded("cluster_instance_gpu:gpu_fb_hours_to_full:growing")
    assert "DCGM_FI_DEV_FB_USED offset 15m" in rule and "> 0.9" in rule
    assert transformation(pressure, "sortBy")["sort"] == [{"field": "hours until full", "desc": False}]


# 7 ------------------------------------------------------------------------------------------------------


def _links(panel: Panel) -> list[dict[str, Any]]:
    return [link for o in panel["fieldConfig"]["overrides"] for p in o["properties"] if p["id"] == "links"
            for link in p["value"]]


def test_7_gauges_and_tables_link_to_the_node_on_the_gpu_percent_encoded(built: dict[str, dict[str, Any]]) -> None:
    linked = 0
    for dashboard in ("gpudash-fleet.json", "gpudash-job.json"):
        for panel in panels(built[dashboard]):
            # A row per GPU: every query keeps the GPU's identity.
            per_gpu = all("by (cluster, instance, gpu" in t["expr"] for t in panel["targets"])
            if panel["type"] in ("gauge", "bargauge") or (panel["type"] == "table" and per_gpu):
                links = _links(panel)
                assert links, f"{panel['title']}: no link"
                linked += 1
                for link in links:
                    for name, value in re.findall(r"var-(\w+)=([^&]*)", link["url"]):
                        assert value.endswith(":percentencode}"), (panel["title"], name)
                if "/d/gpudash-node?" in links[0]["url"]:
                    assert "&var-gpu=${__data.fields.gpu:percentencode}" in links[0]["url"], panel["title"]
    assert linked >= 8


# 8 ------------------------------------------------------------------------------------------------------


def test_8_xid_by_code_counts_per_step_as_bars(built: dict[str, dict[str, Any]], inlined: dict[str, Any]) -> None:
    for dashboard, title in (("gpudash-fleet.json", "XID errors by code"), ("gpudash-node.json", "XID errors by code"),
                             ("gpudash-job.json", "XID errors on the job's GPUs, by code")):
        panel = by_title(built[dashboard], title)
        assert "$__rate_interval" not in expr(panel) and "offset $__interval" in expr(panel)
        assert panel["fieldConfig"]["defaults"]["custom"]["drawStyle"] == "bars", title
    # At fleet scale a graph reads no GPU's last-XID gauge at every step: the counters and the recorded events of
    # each step (exact per step), or without recording rules dcgm-exporter's windowed count (seconds otherwise).
    fleet = built["gpudash-fleet.json"]
    for board, source in ((fleet, 'sum_over_time(cluster_instance_gpu_xid:gpu_xid_errors:new{cluster=~"$cluster"}'
                                  '[$__interval])'),
                          (inlined, "DCGM_EXP_XID_ERRORS_COUNT{")):
        xid_graphs = [expr(by_title(board, "XID errors by code"))] + [
            a["target"]["expr"] for a in board["annotations"]["list"] if a["name"] == "XID events"]
        for query in xid_graphs:
            assert "DCGM_FI_DEV_XID_ERRORS" not in query and source in query


# 9 ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["gpudash-fleet.json", "gpudash-node.json"])
def test_9_comparison_panels_are_wide_with_the_legend_below(built: dict[str, dict[str, Any]], name: str) -> None:
    overlays = [p for p in panels(built[name]) if p["title"].endswith(": now and 1d ago")]
    assert len(overlays) == 4
    for panel in overlays:
        assert panel["gridPos"]["w"] >= 10 and panel["options"]["legend"]["placement"] == "bottom"


# 10 -----------------------------------------------------------------------------------------------------


def test_10_panels_on_signals_stock_dcgm_exporter_lacks_say_so(built: dict[str, dict[str, Any]]) -> None:
    checked = 0
    for panel in every_panel(built):
        optional = {s for t in panel["targets"] for s in signals_in(t["expr"], DCGM)
                    if s.publisher is not Publisher.DCGM_DEFAULT}
        if optional:
            checked += 1
            text = panel["description"]
            assert "dcgm-exporter" in text or "bundled exporter" in text, \
                f"{panel['title']}: reads {sorted(s.dcgm_name for s in optional)} without saying who publishes it"
    assert checked >= 8
    node = built["gpudash-node.json"]
    assert "DCGM_EXP_CLOCK_EVENTS_COUNT" in expr(by_title(node, "Throttle reasons"))


# 11 -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["gpudash-fleet.json", "gpudash-node.json"])
def test_11_changes_of_percentages_are_in_points_and_coloured(built: dict[str, dict[str, Any]], name: str) -> None:
    dashboard = built[name]
    for what in ("Utilization", "Memory used"):
        panel = by_title(dashboard, f"{what}: change vs 1d ago")
        assert panel["fieldConfig"]["defaults"]["unit"] == "suffix:pp"  # Grafana writes "2.50 pp"
        assert "percentage points" in panel["description"]
    assert expr(by_title(dashboard, "Memory used: change vs 1d ago")).endswith(") * 100")  # a ratio, in points
    for what in ("Utilization", "Memory used", "Temperature (mean)"):
        steps = by_title(dashboard, f"{what}: change vs 1d ago")["fieldConfig"]["defaults"]["thresholds"]["steps"]
        assert len(steps) == 3 and "orange" in {s["color"] for s in steps}, what


# 12 -----------------------------------------------------------------------------------------------------


def test_12_no_data_is_not_zero_and_silent_exporters_and_gpus_are_listed(built: dict[str, dict[str, Any]],
                                                                          fleet: dict[str, Any],
                                                                          inlined: dict[str, Any]) -> None:
    for dashboard in built.values():
        for title in ("GPUs reporting", "Idle GPUs", "GPUs", "GPUs held idle"):
            matches = [p for p in panels(dashboard) if p["title"] == title]
            for panel in matches:
                assert panel["fieldConfig"]["defaults"].get("noValue") != "0", (dashboard["uid"], title)
    panel = by_title(fleet, "Exporters and GPUs that stopped reporting")
    down, silent = expr(panel, 0), expr(panel, 1)
    assert 'up{cluster=~"$cluster",job="gpu-exporter"}) == 0' in down
    reads_list(silent, "cluster_instance_gpu:gpu_reporting:stopped", "topk(10, ")
    for silent in (expr(by_title(inlined, "Exporters and GPUs that stopped reporting"), 1),
                   recorded("cluster_instance_gpu:gpu_reporting:stopped")):
        assert "present_over_time(DCGM_FI_DEV_FB_USED" in silent and "[1h]" in silent and " unless " in silent


# 13 -----------------------------------------------------------------------------------------------------


def test_13_node_graphs_of_raw_gauges_summarise_each_step(node: dict[str, Any]) -> None:
    checked = 0
    for panel in panels(node):
        if panel["type"] not in ("timeseries", "heatmap") or panel["title"].startswith(("Last XID", "XID")):
            continue
        for target in panel["targets"]:
            if target["expr"].startswith("label_replace(max by (cluster, instance, gpu) ("):
                checked += 1
                assert re.search(r"\((avg|max|min)_over_time\(DCGM_\w+\{[^}]*\}\[\$__interval\]\)", target["expr"]), \
                    f"{panel['title']}: {target['expr']}"
    assert checked >= 9


# 14 -----------------------------------------------------------------------------------------------------


def test_14_leftovers(built: dict[str, dict[str, Any]], node: dict[str, Any]) -> None:
    for panel in every_panel(built):
        for target in panel["targets"]:
            assert target.get("legendFormat") != "__table__", panel["title"]
        if panel["type"] != "table":
            continue
        # The last organize titles the columns (a first one may drop the metric name before a merge).
        organize = [t["options"] for t in panel["transformations"] if t["id"] == "organize"][-1]
        refs = [t["refId"] for t in panel["targets"]]
        values = {"Value"} if len(refs) == 1 else {f"Value #{r}" for r in refs}
        # A table of labels alone (who holds a job) hides its value instead of titling it.
        shown = values - {name for name, hidden in organize["excludeByName"].items() if hidden}
        assert shown <= set(organize.get("renameByName", {})) <= values, panel["title"]
        steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
        coloured = any(p["id"] == "custom.cellOptions" and "color" in p["value"]["type"]
                       for o in panel["fieldConfig"]["overrides"] for p in o["properties"])
        assert len(steps) == 1 or coloured, f"{panel['title']}: threshold colours that colour nothing"
    reasons = by_title(node, "Throttle reasons")
    assert "max by (cluster, instance, gpu, clock_event)" in expr(reasons)
    assert "{{clock_event}}" in reasons["targets"][0]["legendFormat"]
    assert by_title(node, "Last XID error")["fieldConfig"]["defaults"]["custom"]["drawStyle"] == "points"
    for title, ref in (("Power per GPU", "L"), ("SM clock", "M"), ("Temperature", "Z")):
        limit = next(t for t in by_title(node, title)["targets"] if t["refId"] == ref)
        assert re.match(r"(max|min) by \(cluster, instance\) \(", limit["expr"]), title  # one line, not one per GPU
        assert "{{gpu}}" not in limit["legendFormat"]


# Also: new panels and annotations ----------------------------------------------------------------------


def test_fleet_activity_nvlink_and_energy_read_cluster_recordings(fleet: dict[str, Any]) -> None:
    activity = by_title(fleet, "Tensor core and SM activity by cluster")
    assert expr(activity, 0).startswith("cluster:gpu_tensor_active:avg{")
    assert "or on (cluster) cluster:gpu_gr_engine_active:avg{" in expr(activity, 1)
    assert expr(by_title(fleet, "NVLink traffic by cluster")).startswith("cluster:gpu_nvlink_bytes_per_second:sum{")
    energy = by_title(fleet, "Energy in range")
    assert energy["fieldConfig"]["defaults"]["unit"] == "kwatth"
    counter = 'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{cluster=~"$cluster"}'
    assert expr(energy) == f"sum(increase({counter}[$__range])) / 3600000000"  # the counter's rise: no subquery


@pytest.mark.parametrize("name", ["gpudash-fleet.json", "gpudash-node.json", "gpudash-job.json"])
def test_annotations_mark_firing_alerts_and_xid_events(built: dict[str, dict[str, Any]], name: str) -> None:
    found = {a["name"]: a for a in built[name]["annotations"]["list"]}
    assert found["Annotations & Alerts"]["builtIn"] == 1
    alerts = found["Firing alerts"]
    expr = alerts["target"]["expr"]
    # gpudash's own firing alerts, not info; the fleet counts them per alert and cluster
    assert 'ALERTS{' in expr and 'alertstate="firing"' in expr and 'severity!="info"' in expr
    assert "GPUHighTemperature|" in expr and expr.startswith(
        "count by (alertname, severity, cluster) (" if name == "gpudash-fleet.json" else "ALERTS{")
    assert 'cluster=~"$cluster"' in expr and alerts["titleFormat"] == "{{alertname}}"
    xids = found["XID events"]
    assert "offset $__interval" in xids["target"]["expr"] and xids["titleFormat"] == "XID {{xid}}"
    # the query sits in `target`, where Grafana's Prometheus data source moves a top-level `expr` on load
    assert all("expr" not in a and a["target"]["refId"] == "Anno" for a in found.values() if "target" in a)
    assert all(a["datasource"] == {"type": "prometheus", "uid": "${datasource}"} for a in found.values()
               if "target" in a)
