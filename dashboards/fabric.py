"""The fabric: InfiniBand / RoCE ports beside the GPUs, and each GPU's NVSwitch fabric, what needs action first.

The first row lists what the fabric alerts ask now (ports down, flapping, below speed, counting errors; GPUs
whose NVSwitch fabric is not ready) from Prometheus' own ALERTS series; then throughput and congestion per
cluster, the worst ports now (a topk, at most `dashboards.fleet_topk`), and errors per port over time. Every
panel reads the fabric's recording rules (node_exporter's infiniband collector, docs/fabric.md), so a fleet of
thousands of ports draws a handful of series. A fleet without RDMA ports shows empty panels, not errors.
"""

from __future__ import annotations

from grafanalib import core as G

from gpudash.catalog import PROMETHEUS_ALERTS
from gpudash.escape import re2_any
from gpudash.panels.build import BuildContext
from gpudash.panels.fabric_panels import congestion_steps
from gpudash.panels.visualizations import (
    GREEN,
    ORANGE,
    RED,
    PanelGrid,
    Query,
    bar_gauge,
    color_steps,
    stat,
    table,
    timeseries,
)
from gpudash.promql.fabric_recordings import ERRORS, PORT
from gpudash.promql.query import PromQL
from gpudash.repository import FABRIC_UID, FLEET_UID, NODE_UID
from gpudash.rules.fabric_alerts import FABRIC_ALERTS

UID = FABRIC_UID
TITLE = "GPU fabric"
PORT_LEGEND = "{{instance}} {{device}}/{{port}}"
# The stat row, worst first: each fabric alert and what its count is of.
COUNTED = (("GPUFabricPortDown", "ports down"), ("GPUFabricPortFlapping", "ports flapping"),
           ("GPUFabricPortDegraded", "ports below speed"), ("GPUFabricState", "GPUs, fabric not ready"),
           ("GPUFabricPortErrors", "ports counting errors"), ("GPUFabricStragglerCongestion", "stragglers on a "
                                                                                               "congested port"))


def build(ctx: BuildContext) -> G.Dashboard:
    q = ctx.promql("fleet")
    k = ctx.thresholds.dashboards.fleet_topk
    level = ctx.thresholds.alerts.fabric.congestion_ratio
    layout = PanelGrid()

    layout.section("Needs action now")
    _action_row(layout, q)

    layout.section("Throughput and congestion per cluster")
    layout.add(timeseries(
        "InfiniBand / RoCE throughput by cluster",
        [Query(q.use("cluster:infiniband_transmit_bytes:rate"), "{{cluster}} transmit"),
         Query(q.use("cluster:infiniband_receive_bytes:rate"), "{{cluster}} receive")], "Bps",
        "Bytes a second every RDMA port of the cluster sends and receives (node_exporter's infiniband collector, "
        "5m rate). A training cluster's all-reduce shows as a steady band; a drop that every node shares is the "
        "jobs, a drop on one cluster only its fabric.", min_=0), w=12, h=8)
    layout.add(timeseries(
        "Congestion by cluster",
        [Query(q.use("cluster:infiniband_congestion:avg"), "{{cluster}}")], "percentunit",
        "Mean share of transmit slots the cluster's busy ports spend waiting (transmit wait over wait plus words "
        f"sent, 5m). Orange from half of the straggler level, red from it ({level:.0%}, "
        "alerts.fabric.congestion_ratio).", congestion_steps(level), min_=0), w=12, h=8)

    layout.section("Worst ports now")
    layout.add(bar_gauge(
        f"Most congested ports: the {k} worst",
        Query(f"topk({k}, {q.use('cluster_instance_port:infiniband_congestion:ratio')})", PORT_LEGEND),
        "percentunit", f"The {k} ports waiting the largest share of their transmit slots now (5m). A port that a "
        "job's straggler uses, above the level, raises GPUFabricStragglerCongestion.", congestion_steps(level),
        0, 1), w=12, h=9)
    errors = q.use(ERRORS)
    layout.add(table(
        f"Ports counting errors: the {k} worst", [Query(f"topk({k}, {errors})")],
        f"Symbol, link-integrity and receive errors a second (5m), the {k} ports with the most now. A rare "
        "symbol error is corrected by the link and never pages.", {"A": "errors/s"},
        hide_columns=("__name__",), sort=("errors/s", True),
        steps=color_steps((GREEN, None), (ORANGE, 0.01), (RED, 1)), empty="No port counts errors"), w=12, h=9)

    layout.section("Errors per port over time")
    # The k are picked once, over the whole range (`@ end()`): a topk at every step would draw every port that
    # was ever among the worst.
    worst = f"topk({k}, {q.recorded_over_time('max', ERRORS, '$__range', at='end()')})"
    layout.add(timeseries(
        f"Errors a second: the {k} worst ports",
        [Query(f"(\n  {errors}\n)\nand on ({PORT})\n{worst}", PORT_LEGEND)], "short",
        f"Symbol, link-integrity and receive errors a second per port (5m), for the {k} ports with the highest "
        "rate at any time in the range: a port that climbs before it flaps is the one to service.",
        min_=0, decimals=2), w=24, h=8)

    links = [G.DashboardLink(title="GPU fleet", uri=f"/d/{FLEET_UID}", keepTime=True, includeVars=True),
             G.DashboardLink(title="GPU node", uri=f"/d/{NODE_UID}", keepTime=True, includeVars=True)]
    return ctx.dashboard(UID, TITLE, "InfiniBand / RoCE ports and NVSwitch fabric state beside the GPUs: what "
                                     "needs action now, throughput and congestion per cluster, the worst ports.",
                         "fleet", layout.panels, links)


def _action_row(layout: PanelGrid, q: PromQL) -> None:
    names = [spec.name for spec in FABRIC_ALERTS]
    firing = (("alertstate", "=", "firing"),)
    counts = [Query(f"count({PROMETHEUS_ALERTS}{q.scope.selector((*firing, ('alertname', '=', name)))})", what)
              for name, what in COUNTED]
    layout.add(stat(
        "Fabric alerts firing now", counts, "none",
        "How many ports (or GPUs, for the NVSwitch fabric) each fabric alert names now. Down, flapping, below "
        "speed and fabric not ready ask to drain the node; errors and a straggler's congestion are tickets.",
        color_steps((GREEN, None), (RED, 1)), decimals=0, no_value="0"), w=24, h=4)
    every = f"{PROMETHEUS_ALERTS}{q.scope.selector((*firing, ('alertname', '=~', re2_any(names))))}"
    layout.add(table(
        "Ports and GPUs the fabric alerts name", [Query(every)],
        "Each firing fabric alert: the port (node_exporter's instance, device and port) or the GPU, its "
        "action, and for a straggler's congested port the job.", {"A": "firing"},
        hide_columns=("__name__", "alertstate", "job"), empty="No fabric alert firing"), w=24, h=7)
