"""The fabric beside the GPUs: the node dashboard's ports, the job dashboard's nodes, the straggler tables'
port congestion, read from the built JSON."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest
from support.paths import ROOT

from gpudash.config.loading import Settings, load_settings
from gpudash.infiniband import NIC_INFO
from gpudash.panels.build import build_all
from gpudash.panels.fabric_panels import NO_PORTS, PORT_CONGESTION
from gpudash.promql.fabric_recordings import GPU_CONGESTION, GPU_RX, GPU_TX
from gpudash.promql.scanner import metric_names as names_in


def metric_names(expr: str) -> set[str]:
    return set(names_in(expr))


def settings_with_congestion(ratio: float) -> Settings:
    settings = load_settings(ROOT / "thresholds.yaml")
    t = settings.thresholds
    fabric = dataclasses.replace(t.alerts.fabric, congestion_ratio=ratio)
    alerts = dataclasses.replace(t.alerts, fabric=fabric)
    return dataclasses.replace(settings, thresholds=dataclasses.replace(t, alerts=alerts))


@pytest.fixture(scope="module")
def settings() -> Settings:
    return settings_with_congestion(0.37)


@pytest.fixture(scope="module")
def built(settings: Settings) -> dict[str, dict[str, Any]]:
    return build_all(settings, ROOT / "dashboards")


def titled(dashboard: dict[str, Any], pattern: str) -> list[dict[str, Any]]:
    found = [p for p in dashboard["panels"] if p["type"] != "row" and re.search(pattern, p["title"])]
    assert found, pattern
    return found


def node_ports(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    return titled(dashboard, r"per GPU's port|Port congestion per GPU")


def test_the_node_dashboard_draws_each_gpus_ports_on_the_nodes_own_instance(built: dict[str, Any]) -> None:
    panels = node_ports(built["gpudash-node.json"])
    read = set()
    for panel in panels:
        (target,) = panel["targets"]
        expr = target["expr"]
        read |= metric_names(expr)
        # the GPU exporter's instance, as every panel of the node: not node_exporter's host:9100
        assert 'cluster=~"$cluster"' in expr and 'instance=~"$instance"' in expr, expr
        # one series per GPU and port (8 on an 8-GPU node), named by both
        assert "max by (cluster, instance, gpu, device, port)" in expr
        assert "GPU {{gpu}}" in target["legendFormat"] and "{{device}}/{{port}}" in target["legendFormat"]
        assert panel["fieldConfig"]["defaults"]["noValue"] == NO_PORTS
    assert read == {GPU_TX, GPU_RX, GPU_CONGESTION}


def test_the_node_ports_read_the_recordings_even_where_the_dashboards_inline_them(settings: Settings) -> None:
    # Inlined, the port counters would carry node_exporter's instance, which `$instance` never matches.
    inlined = build_all(settings, ROOT / "dashboards", recorded=False)
    for panel in node_ports(inlined["gpudash-node.json"]):
        names = metric_names(panel["targets"][0]["expr"])
        assert names and names <= {GPU_TX, GPU_RX, GPU_CONGESTION}, names


def test_the_congestion_colours_follow_the_straggler_alerts_level(built: dict[str, Any]) -> None:
    (panel,) = titled(built["gpudash-node.json"], "Port congestion per GPU")
    steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert [s["value"] for s in steps] == [None, 0.185, 0.37]
    (job_panel,) = titled(built["gpudash-job.json"], "most congested nodes")
    assert job_panel["fieldConfig"]["defaults"]["thresholds"]["steps"] == steps


def test_the_job_dashboard_draws_a_bounded_number_of_its_nodes(built: dict[str, Any], settings: Settings) -> None:
    k = settings.thresholds.dashboards.fleet_topk
    panels = titled(built["gpudash-job.json"], r"Network (transmit|receive): the job's|most congested nodes")
    assert len(panels) == 3
    for panel in panels:
        (target,) = panel["targets"]
        expr = target["expr"]
        # k nodes, picked once by their mean over the range: k lines over 6 h, whatever the job's size
        picked = (rf"\nand on \(cluster, instance\)\n(top|bottom)k\({k}, "
                  r".*avg_over_time\(.*\[\$__range\] @ end\(\)\).*$")
        assert re.search(picked, expr, re.S), expr
        # the cluster's ports, tied to the job's GPUs
        assert 'cluster=~"$cluster"}' in expr and 'hpc_job=~"$job"' in expr
        assert metric_names(expr) & {GPU_TX, GPU_RX, GPU_CONGESTION}
        assert not any(name.startswith("node_infiniband_") or name == NIC_INFO for name in metric_names(expr))
        assert target["legendFormat"] == "{{instance}}"  # the GPU exporter's: its rows open the node dashboard


def straggler_tables(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    return titled(dashboard, r"against the job's median|from the job's median")


def test_each_straggler_row_gets_its_ports_congestion_on_its_own_labels(built: dict[str, Any]) -> None:
    tables = straggler_tables(built["gpudash-job.json"])
    assert len(tables) == 2
    for panel in tables:
        rows, port = (t["expr"] for t in panel["targets"])
        # the table's own rows, zeroed, plus the port's value: the labels of the row, none added, so the merge
        # puts the value on the row; a GPU with no port has no answer here and keeps its row with an empty cell
        assert port.startswith(f"0 * ({rows})\n+ on (cluster, instance, gpu) group_left ()\n("), port
        assert GPU_CONGESTION in metric_names(port)
        # only the GPUs the table lists: the congestion is cut to the same topk
        chosen = re.search(r"topk\(\d+, .*\)$", rows)
        assert chosen is not None and port.endswith(f" and on (cluster, instance, gpu) {chosen.group(0)})")
        merge = [t for t in panel["transformations"] if t["id"] == "merge"]
        assert merge, panel["title"]
        names = next(t for t in panel["transformations"] if t["id"] == "organize" and
                     "renameByName" in t["options"])["options"]["renameByName"]
        assert names["Value #B"] == PORT_CONGESTION


def test_the_straggler_port_column_is_coloured_at_the_alerts_level(built: dict[str, Any]) -> None:
    for panel in straggler_tables(built["gpudash-job.json"]):
        (override,) = [o for o in panel["fieldConfig"]["overrides"] if o["matcher"]["options"] == PORT_CONGESTION]
        props = {p["id"]: p["value"] for p in override["properties"]}
        assert props["unit"] == "percentunit"
        assert props["custom.cellOptions"] == {"type": "color-text"}
        assert [s["value"] for s in props["thresholds"]["steps"]] == [None, 0.185, 0.37]
        assert props["thresholds"]["steps"][-1]["color"] == "red"
