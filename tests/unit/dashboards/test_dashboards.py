"""The generated dashboards: required panels, variables, colour steps from thresholds.yaml, modern JSON."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.paths import ROOT

from gpudash.catalog import JOB_INFO, PROFILES, PROMETHEUS_ALERTS, PROMETHEUS_ALERTS_FOR_STATE
from gpudash.config.loading import load_settings
from gpudash.panels.build import build_all, check_all
from gpudash.promql.query import UP
from gpudash.promql.recordings import RECORDING_BY_NAME
from gpudash.promql.scanner import metric_names


@pytest.fixture(scope="module")
def built() -> dict[str, dict[str, Any]]:
    return build_all(load_settings(ROOT / "thresholds.yaml"), ROOT / "dashboards")


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in dashboard["panels"] if p["type"] != "row"]


def by_title(dashboard: dict[str, Any], title: str) -> dict[str, Any]:
    matches = [p for p in panels(dashboard) if p["title"] == title]
    assert matches, f"{dashboard['uid']}: no panel titled {title!r}"
    return matches[0]


def steps(panel: dict[str, Any]) -> list[tuple[str, float | None]]:
    return [(s["color"], s["value"]) for s in panel["fieldConfig"]["defaults"]["thresholds"]["steps"]]


def exprs(dashboard: dict[str, Any]) -> Iterator[str]:
    for panel in panels(dashboard):
        for target in panel["targets"]:
            yield target["expr"]


def test_committed_json_is_what_the_code_generates(built: dict[str, dict[str, Any]]) -> None:
    check_all(built, ROOT / "dashboards" / "json")  # raises StaleOutputError naming the stale files


def _link_url(panel: dict[str, Any]) -> str:
    return str(panel["fieldConfig"]["overrides"][0]["properties"][0]["value"][0]["url"])


def test_fixed_uids_and_links_between_the_dashboards(built: dict[str, dict[str, Any]]) -> None:
    fleet, node, job = built["gpudash-fleet.json"], built["gpudash-node.json"], built["gpudash-job.json"]
    assert (fleet["uid"], node["uid"], job["uid"]) == ("gpudash-fleet", "gpudash-node", "gpudash-job")
    assert [link["url"] for link in fleet["links"]] == ["/d/gpudash-node", "/d/gpudash-job"]
    assert [link["url"] for link in node["links"]] == ["/d/gpudash-fleet"]
    assert [link["url"] for link in job["links"]] == ["/d/gpudash-fleet", "/d/gpudash-node"]
    assert all(link["keepTime"] and link["includeVars"] for link in fleet["links"] + node["links"] + job["links"])
    url = _link_url(by_title(fleet, "Least busy nodes (bottom 10)"))
    assert url.startswith("/d/gpudash-node?") and "var-instance=${__data.fields.instance:percentencode}" in url


def test_job_tables_link_to_the_job_and_to_the_node_on_the_gpu(built: dict[str, dict[str, Any]]) -> None:
    fleet, job = built["gpudash-fleet.json"], built["gpudash-job.json"]
    for title in ("GPU-hours held per job (top 10)", "Largest idle holders (top 10 GPU-hours idle)"):
        panel = by_title(fleet, title)
        assert panel["fieldConfig"]["overrides"][0]["matcher"]["options"] == "hpc_job"
        assert _link_url(panel) == ("/d/gpudash-job?var-cluster=${__data.fields.cluster:percentencode}"
                                    "&var-job=${__data.fields.hpc_job:percentencode}"
                                    "&from=${__data.fields.lifetime_from:percentencode}"
                                    "&to=${__data.fields.lifetime_to:percentencode}")
    url = _link_url(by_title(job, "Slowest SM clocks against the job's median (top 10)"))
    assert url == ("/d/gpudash-node?var-cluster=${__data.fields.cluster:percentencode}"
                   "&var-instance=${__data.fields.instance:percentencode}&var-gpu=${__data.fields.gpu:percentencode}"
                   "&${__url_time_range}")


def test_the_job_variable_lists_the_sites_job_label(built: dict[str, dict[str, Any]],
                                                     tmp_path: Path) -> None:
    variables = {v["name"]: v for v in built["gpudash-job.json"]["templating"]["list"]}
    assert list(variables) == ["datasource", "cluster", "job"]
    assert variables["job"]["definition"] == 'label_values(cluster_job:gpu_count:count{cluster=~"$cluster"}, hpc_job)'
    assert variables["job"]["includeAll"] is False  # opens on one job, so it costs one job's worth
    for expr in exprs(built["gpudash-job.json"]):
        assert '"$job"' in expr and 'cluster=~"$cluster"' in expr, expr
    site = tmp_path / "gpudash.yaml"
    site.write_text("jobs:\n  label: training_kubeflow_org_job_name\n")
    kube = build_all(load_settings(ROOT / "thresholds.yaml", site), ROOT / "dashboards")
    job = kube["gpudash-job.json"]
    definition = {v["name"]: v for v in job["templating"]["list"]}["job"]["definition"]
    assert definition.endswith(", training_kubeflow_org_job_name)")
    assert all('training_kubeflow_org_job_name=~"$job"' in e and "hpc_job" not in e for e in exprs(job))
    fleet = kube["gpudash-fleet.json"]
    held = by_title(fleet, "Largest idle holders (top 10 GPU-hours idle)")["targets"][0]["expr"]
    assert "on (cluster, training_kubeflow_org_job_name)" in held


def test_gpu_hours_add_up_the_recorded_job_size_over_the_range(built: dict[str, dict[str, Any]]) -> None:
    job = built["gpudash-job.json"]
    expr = by_title(job, "GPU-hours in range")["targets"][0]["expr"]
    # The GPU-seconds recorded at each evaluation, added up: one sample per evaluation read, no subquery.
    assert expr == ('sum(sum_over_time(cluster_job:gpu_held_seconds:interval{cluster=~"$cluster",hpc_job=~"$job",'
                    'hpc_job!=""}[$__range]) / 3600)')
    energy = by_title(job, "Energy in range")["targets"][0]["expr"]  # the energy counter's rise, no subquery
    assert energy == ('sum(increase(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{cluster=~"$cluster",hpc_job=~"$job",'
                      'hpc_job!=""}[$__range])) / 3600000000')


def test_variables_are_chained_multi_select_with_all(built: dict[str, dict[str, Any]]) -> None:
    variables = {v["name"]: v for v in built["gpudash-node.json"]["templating"]["list"]}
    assert list(variables) == ["datasource", "cluster", "instance", "gpu"]
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert variables["cluster"]["definition"] == "label_values(DCGM_FI_DEV_GPU_UTIL, cluster)"
    assert variables["instance"]["definition"] == 'label_values(DCGM_FI_DEV_GPU_UTIL{cluster=~"$cluster"}, instance)'
    assert variables["gpu"]["definition"] == \
        'label_values(DCGM_FI_DEV_GPU_UTIL{cluster=~"$cluster",instance=~"$instance"}, gpu)'
    for name in ("cluster", "instance", "gpu"):
        v = variables[name]
        # No "All" nodes: the node dashboard opens on one node, so its cost does not grow with the fleet.
        with_all = name != "instance"
        assert v["multi"] and v["includeAll"] == with_all and v.get("allValue") == (".*" if with_all else None), name
        assert v["query"]["query"] == v["definition"]
        assert v["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    fleet_vars = [v["name"] for v in built["gpudash-fleet.json"]["templating"]["list"]]
    assert fleet_vars == ["datasource", "cluster"]


def test_every_panel_filters_by_its_variables(built: dict[str, dict[str, Any]]) -> None:
    for expr in exprs(built["gpudash-node.json"]):
        assert 'instance=~"$instance"' in expr and 'gpu=~"$gpu"' in expr, expr
    for expr in exprs(built["gpudash-fleet.json"]):
        assert 'cluster=~"$cluster"' in expr, expr


REQUIRED = {
    "gpudash-node.json": {
        "Utilization per GPU": "heatmap", "Memory used per GPU": "bargauge", "GPU temperature": "gauge",
        "HBM temperature": "gauge", "Power per GPU": "timeseries", "SM clock": "timeseries",
        "Throttle reasons": "state-timeline", "PCIe throughput": "timeseries", "Last XID error": "timeseries",
        "Memory per process": "table", "GPUs reporting": "stat", "Mean utilization": "stat", "Idle GPUs": "stat",
        "Hottest GPU": "stat", "Total power": "stat",
    },
    "gpudash-fleet.json": {
        "GPUs per utilization band": "heatmap",
        "Memory pressure: over 90% and growing (top 10)": "table", "Hottest GPUs (top 10)": "gauge",
        "Power by cluster": "timeseries", "Mean SM clock by cluster": "timeseries", "GPUs reporting": "stat",
        "Mean utilization": "stat", "Idle GPUs": "stat", "Hottest GPU": "stat", "Total power": "stat",
        "PCIe throughput by cluster": "timeseries", "GPUs with an XID error in range": "table",
    },
}


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_required_panels_are_present(built: dict[str, dict[str, Any]], name: str) -> None:
    for title, kind in REQUIRED[name].items():
        assert by_title(built[name], title)["type"] == kind, title


def test_memory_is_used_over_used_plus_free(built: dict[str, dict[str, Any]]) -> None:
    bars = by_title(built["gpudash-node.json"], "Memory used per GPU")
    assert bars["targets"][0]["expr"].startswith(
        "label_replace(max by (cluster, instance, gpu) (cluster_instance_gpu:gpu_fb_used:ratio{")
    assert RECORDING_BY_NAME["cluster_instance_gpu:gpu_fb_used:ratio"].needs == ("fb_used", "fb_free")
    raw = build_all(load_settings(ROOT / "thresholds.yaml"), ROOT / "dashboards", recorded=False)
    expr = by_title(raw["gpudash-node.json"], "Memory used per GPU")["targets"][0]["expr"]
    assert re.fullmatch(r"label_replace\(max by \(cluster, instance, gpu\) \(DCGM_FI_DEV_FB_USED\{.*\} / "
                        r"\(DCGM_FI_DEV_FB_USED\{.*\} \+ DCGM_FI_DEV_FB_FREE\{.*\}\)\), .*\)", expr)
    assert "FB_TOTAL" not in json.dumps(raw)


def test_colour_steps_come_from_thresholds(built: dict[str, dict[str, Any]]) -> None:
    node = built["gpudash-node.json"]
    assert steps(by_title(node, "Utilization per GPU")) == [("orange", None), ("green", 20), ("dark-green", 90)]
    assert steps(by_title(node, "Memory used per GPU")) == [("green", None), ("orange", 0.9), ("red", 0.95)]
    assert steps(by_title(node, "GPU temperature")) == [("green", None), ("orange", 80), ("red", 85)]
    # HBM's levels are an H200's memory max operating temperature (95 C) less the 5 C margin, and that limit
    assert steps(by_title(node, "HBM temperature")) == [("green", None), ("orange", 90), ("red", 95)]
    assert steps(by_title(node, "Power against limit")) == [("green", None), ("orange", 0.9), ("red", 0.98)]


def test_changing_thresholds_changes_the_matching_steps(thresholds_copy: Callable[..., Path]) -> None:
    path = thresholds_copy((("utilization", "idle_below_percent"), 25), (("memory", "warning_ratio"), 0.8),
                           (("temperature", "hbm_critical_celsius"), 98), (("dashboards", "comparison_offset"), "7d"))
    node = build_all(load_settings(path), ROOT / "dashboards")["gpudash-node.json"]
    assert steps(by_title(node, "Utilization per GPU")) == [("orange", None), ("green", 25), ("dark-green", 90)]
    assert steps(by_title(node, "Memory used per GPU")) == [("green", None), ("orange", 0.8), ("red", 0.95)]
    assert steps(by_title(node, "HBM temperature")) == [("green", None), ("orange", 90), ("red", 98)]
    assert steps(by_title(node, "GPU temperature")) == [("green", None), ("orange", 80), ("red", 85)]
    assert any("offset 7d" in e for e in exprs(node))
    assert 'DCGM_FI_DEV_GPU_UTIL{cluster=~"$cluster",instance=~"$instance",gpu=~"$gpu"}) < bool 25' in \
        by_title(node, "Idle GPUs")["targets"][0]["expr"]


@pytest.mark.parametrize("name", ["gpudash-fleet.json", "gpudash-node.json"])
def test_24h_comparison_row(built: dict[str, dict[str, Any]], name: str) -> None:
    dashboard = built[name]
    rows = [p["title"] for p in dashboard["panels"] if p["type"] == "row"]
    assert "Now against 1d ago" in rows
    for what in ("Utilization", "Memory used", "Temperature (mean)", "Power"):
        overlay = by_title(dashboard, f"{what}: now and 1d ago")
        now, before = (t["expr"] for t in overlay["targets"])
        assert "offset 1d" not in now and before.count("offset 1d") == now.count("{")
        assert before.replace(" offset 1d", "") == now
        change = by_title(dashboard, f"{what}: change vs 1d ago")
        points = " * 100" if what == "Memory used" else ""  # a difference of ratios, in percentage points
        expected = f"(({now}) - ({before})){points}" if points else f"({now}) - ({before})"
        assert change["type"] == "stat" and change["targets"][0]["expr"] == expected


def _known_names() -> set[str]:
    # Prometheus' own series: its alerts (what the health dashboard reads the health alerts from) and each
    # target's health; and who holds a job, the exporter's info series.
    names = set(RECORDING_BY_NAME) | {PROMETHEUS_ALERTS, PROMETHEUS_ALERTS_FOR_STATE, UP, JOB_INFO}
    for profile in PROFILES.values():
        names |= {ref.name for ref in profile.metrics.values()}
    return names


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_every_expression_reads_only_catalog_names(profile: str) -> None:
    built = build_all(load_settings(ROOT / "thresholds.yaml"), ROOT / "dashboards", profile_name=profile)
    known = _known_names()
    for dashboard in built.values():
        for expr in exprs(dashboard):
            for name in metric_names(expr):
                assert name in known, \
                    f"{dashboard['uid']}: {name!r} in {expr!r} is not a catalog or recording-rule name"


def test_nvidia_smi_profile_leaves_out_what_it_cannot_fill() -> None:
    built = build_all(load_settings(ROOT / "thresholds.yaml"), ROOT / "dashboards", profile_name="nvidia_smi")
    node = built["gpudash-node.json"]
    titles = {p["title"] for p in panels(node)}
    assert "PCIe throughput" not in titles and "Last XID error" not in titles and "Throttle reasons" not in titles
    assert "Clock event reasons (bitmask)" in titles and "Memory per process" in titles
    assert all("DCGM_" not in e for d in built.values() for e in exprs(d))
    assert any("nvidia_smi_memory_used_bytes" in e for e in exprs(node))
    variables = {v["name"]: v for v in node["templating"]["list"]}
    assert variables["gpu"]["definition"].endswith(", uuid)")
    assert all('uuid=~"$gpu"' in e for e in exprs(node))


# ------------------------------------------------------------------------------------- modern JSON


def all_panels(built: dict[str, dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for dashboard in built.values():
        yield from panels(dashboard)


def test_heatmap_is_the_native_grafana_10_heatmap(built: dict[str, dict[str, Any]]) -> None:
    heatmaps = [p for p in all_panels(built) if p["type"] == "heatmap"]
    assert len(heatmaps) == 2
    for panel in heatmaps:
        options = panel["options"]
        assert options["calculate"] is False
        assert options["color"]["mode"] == "scheme"
        assert options["rowsFrame"]["layout"] == "auto"
        assert options["yAxis"]["axisPlacement"] == "left"
        for legacy in ("cards", "dataFormat", "heatmap", "color", "xBucketSize", "yBucketBound"):
            assert legacy not in panel, legacy
    per_gpu = by_title(built["gpudash-node.json"], "Utilization per GPU")
    # Colour bands line up with the idle (20) and saturated (90) levels: 10 % wide.
    assert (per_gpu["options"]["color"]["min"], per_gpu["options"]["color"]["max"]) == (0, 100)
    assert per_gpu["options"]["color"]["steps"] == 10
    assert per_gpu["targets"][0]["legendFormat"] == "{{instance}} GPU {{gpu}}"


def test_gauges_bar_gauges_and_stats_in_modern_form(built: dict[str, dict[str, Any]]) -> None:
    seen = set()
    for panel in all_panels(built):
        kind, options, defaults = panel["type"], panel.get("options", {}), panel["fieldConfig"]["defaults"]
        seen.add(kind)
        if kind == "gauge":
            assert options["showThresholdMarkers"] is True
            assert "showThresholdMarkers" not in defaults and "showThresholdMarkers" not in panel["fieldConfig"]
            assert options["reduceOptions"]["calcs"] == ["lastNotNull"]
        if kind == "bargauge":
            assert options["displayMode"] in ("gradient", "lcd", "basic")
            assert "fieldOptions" not in options
            # Fractions 0-1; the health dashboard's temperature headroom in degrees.
            assert (defaults["min"], defaults["max"]) == ((0, 40) if defaults["unit"] == "celsius" else (0, 1))
        if kind in ("gauge", "bargauge"):
            assert all(t["instant"] for t in panel["targets"]), panel["title"]
        if kind == "stat":
            assert "reduceOptions" in options
        base = defaults["thresholds"]["steps"][0]
        assert base["value"] is None, f"{panel['title']}: threshold base must be JSON null"
        assert set(base) == {"color", "value"}
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        for target in panel["targets"]:
            assert "intervalFactor" not in target and "step" not in target
    assert {"gauge", "bargauge", "stat", "heatmap", "timeseries", "table", "state-timeline"} <= seen


def test_dashboard_level_modern_fields(built: dict[str, dict[str, Any]]) -> None:
    for dashboard in built.values():
        assert dashboard["schemaVersion"] == 42
        for legacy in ("rows", "style", "sharedCrosshair", "id", "version", "gnetId"):
            assert legacy not in dashboard
        assert '"null"' not in json.dumps(dashboard)
        ids = [p["id"] for p in dashboard["panels"]]
        assert ids == list(range(1, len(ids) + 1))
        assert "gpudash" in dashboard["tags"]


def test_panels_do_not_overlap_and_fit_the_grid(built: dict[str, dict[str, Any]]) -> None:
    for dashboard in built.values():
        cells: set[tuple[int, int]] = set()
        for panel in dashboard["panels"]:
            g = panel["gridPos"]
            assert g["x"] + g["w"] <= 24
            for x in range(g["x"], g["x"] + g["w"]):
                for y in range(g["y"], g["y"] + g["h"]):
                    assert (x, y) not in cells, f"{dashboard['uid']}: {panel['title']} overlaps"
                    cells.add((x, y))


# ------------------------------------------------------------------------------------- writing


def test_node_legends_name_the_node_as_several_can_be_picked(built: dict[str, dict[str, Any]]) -> None:
    node = built["gpudash-node.json"]
    instance = next(v for v in node["templating"]["list"] if v["name"] == "instance")
    assert instance["multi"]
    legends = [t["legendFormat"] for p in node["panels"] for t in p.get("targets") or []
               if "{{gpu}}" in (t.get("legendFormat") or "")]
    assert len(legends) > 10 and all(legend.startswith("{{instance}} GPU {{gpu}}") for legend in legends), legends


def test_the_health_dashboard_refreshes_every_five_minutes_not_with_the_live_ones(
        built: dict[str, dict[str, Any]]) -> None:
    assert built["gpudash-health.json"]["refresh"] == "5m"
    assert {built[n]["refresh"] for n in ("gpudash-fleet.json", "gpudash-node.json", "gpudash-job.json")} == {"30s"}
