"""The fabric beside the GPUs on the node and job dashboards: each GPU's RDMA ports, their throughput and
congestion, and the congestion of a straggler's port in the straggler tables.

Every panel reads the per-GPU fabric recordings (gpudash.promql.fabric_recordings): a port's series carries
node_exporter's `instance` (host:9100), those recordings the GPU exporter's (host:9400) through
`gpudash_gpu_nic_info`, so the node dashboard's `$instance` and a job's GPUs select them as they select GPUs.
A node without RDMA ports, or whose exporter publishes no GPU <-> port map, shows a panel that says so.
"""

from __future__ import annotations

from typing import Any

from grafanalib import core as G

from gpudash.panels.visualizations import GREEN, ORANGE, RED, PanelGrid, Query, color_steps, timeseries
from gpudash.promql.fabric_recordings import GPU_CONGESTION, GPU_PORT, GPU_RX, GPU_TX
from gpudash.promql.query import PromQL

# A GPU's port, named as the GPU exporter and node_exporter name it: "gpu017:9400 GPU 3 · mlx5_3/1".
PORT_OF_GPU = "{{instance}} GPU {{gpu}} · {{device}}/{{port}}"
NO_PORTS = "No RDMA port under these GPUs (gpudash_gpu_nic_info)"
PORT_CONGESTION = "port congestion"


def congestion_levels(level: float) -> tuple[tuple[str, float | None], ...]:
    """Green, orange from half the straggler's congestion level, red from it (alerts.fabric.congestion_ratio)."""
    return (GREEN, None), (ORANGE, round(level / 2, 6)), (RED, level)


def congestion_steps(level: float) -> list[G.Threshold]:
    return color_steps(*congestion_levels(level))


def _level_text(q: PromQL) -> str:
    level = q.thresholds.alerts.fabric.congestion_ratio
    return f"orange from half of GPUFabricStragglerCongestion's level, red from it ({level:.0%}, " \
           "alerts.fabric.congestion_ratio)"


def node_network(layout: PanelGrid, q: PromQL) -> None:
    """The chosen GPUs' ports: transmit, receive and congestion, one line per GPU and port (8 on an 8-GPU node)."""
    def each(record: str) -> str:
        # The recorded series, always (inlined, node_exporter's instance would not match `$instance`), one series
        # per GPU and port (the recordings' own labels, nic_info's `gpu` whatever the profile names a GPU by).
        return q.by_gpu_index(f"max by ({GPU_PORT}) ({q.recorded_series(record)})")

    how = ("node_exporter's infiniband collector, 5m rate, on the GPU each port sits under (the bundled "
           "exporter's gpudash_gpu_nic_info; a port that serves no GPU, a storage NIC, is on the fabric "
           "dashboard).")
    for record, title, what in ((GPU_TX, "Network transmit per GPU's port", "sends"),
                                (GPU_RX, "Network receive per GPU's port", "receives")):
        layout.add(timeseries(
            title, [Query(each(record), PORT_OF_GPU)], "Bps",
            f"Bytes a second each RDMA port {what}: {how} A port far under its peers while the GPUs are busy is "
            "the node a job waits for.", min_=0, no_value=NO_PORTS), w=8, h=8)
    level = q.thresholds.alerts.fabric.congestion_ratio
    layout.add(timeseries(
        "Port congestion per GPU", [Query(each(GPU_CONGESTION), PORT_OF_GPU)], "percentunit",
        "Share of transmit slots each GPU's port spends waiting (transmit wait over wait plus words sent, 5m; a "
        f"GPU's most congested port where it has several): {_level_text(q)}.", congestion_steps(level), min_=0,
        no_value=NO_PORTS), w=8, h=8)


def job_network(layout: PanelGrid, cluster: PromQL, job_gpus: str, job_gpus_in_range: str, k: int) -> None:
    """Per node, the ports under the job's GPUs: the k nodes sending and receiving least, the k most congested.
    `job_gpus` are the job's GPUs at each step, `job_gpus_in_range` those it held at any time in the range."""
    gpu = cluster.gpu

    def of_job(record: str, gpus: str = job_gpus, over_range: bool = False) -> str:
        series = (cluster.recorded_over_time("avg", record, "$__range", at="end()") if over_range
                  else cluster.recorded_series(record))
        return f"{series} and on (cluster, instance, {gpu}) {gpus}"

    def per_node(record: str, over_range: bool = False) -> str:
        # A port under two of the job's GPUs counts once.
        ports = of_job(record, job_gpus_in_range, True) if over_range else of_job(record)
        return f"sum by (cluster, instance) (max by (cluster, instance, device, port) ({ports}))"

    def picked(pick: str, expr: str, by_range: str) -> str:
        # The k nodes are picked once, by their mean over the range (a range read, no subquery: a job younger
        # than a step still counts), so the graph draws k lines over 6 h, not every node ever among the k.
        return f"{expr}\nand on (cluster, instance)\n{pick}({k}, {by_range})"

    how = ("the RDMA ports under the job's GPUs (gpudash_gpu_nic_info), 5m rate. In a synchronous job every "
           "node moves about the same bytes: the node at the bottom is the one its peers wait for, or the one "
           "waiting.")
    for record, title, what in ((GPU_TX, "transmit", "sends"), (GPU_RX, "receive", "receives")):
        layout.add(timeseries(
            f"Network {title}: the job's {k} least nodes",
            [Query(picked("bottomk", per_node(record), per_node(record, True)), "{{instance}}")], "Bps",
            f"Bytes a second each of the job's nodes {what} through {how} The {k} nodes that moved least over "
            "the range.", min_=0, no_value=NO_PORTS), w=8, h=8)
    level = cluster.thresholds.alerts.fabric.congestion_ratio
    worst = f"max by (cluster, instance) ({of_job(GPU_CONGESTION)})"
    worst_in_range = f"max by (cluster, instance) ({of_job(GPU_CONGESTION, job_gpus_in_range, True)})"
    layout.add(timeseries(
        f"Port congestion: the job's {k} most congested nodes",
        [Query(picked("topk", worst, worst_in_range), "{{instance}}")],
        "percentunit", "Share of transmit slots the most congested port under the job's GPUs spends waiting, per "
                       f"node (5m): {_level_text(cluster)}. The straggler tables say which GPU sits on it.",
        congestion_steps(level), min_=0, no_value=NO_PORTS), w=8, h=8)


def straggler_port(cluster: PromQL, rows: str, chosen: str) -> Query:
    """The port congestion of each GPU a straggler table lists (`rows`, one series per GPU and job; `chosen`, the
    topk that picks them): its rows carry the table's labels, so the table's merge puts the value on the GPU's
    own row; a GPU without a port mapping has no row here and keeps its row there, with an empty cell."""
    on = f"on (cluster, instance, {cluster.gpu})"
    congestion = f"{cluster.recorded_series(GPU_CONGESTION)} and {on} {chosen}"
    return Query(f"0 * ({rows})\n+ {on} group_left ()\n({congestion})", ref="B")


def port_congestion_column(level: float) -> list[dict[str, Any]]:
    """The straggler tables' port-congestion column: a ratio, its text coloured at the straggler's level."""
    steps = [{"color": color, "value": value} for color, value in congestion_levels(level)]
    return [{"matcher": {"id": "byName", "options": PORT_CONGESTION},
             "properties": [{"id": "unit", "value": "percentunit"},
                            {"id": "thresholds", "value": {"mode": "absolute", "steps": steps}},
                            {"id": "custom.cellOptions", "value": {"type": "color-text"}}]}]
