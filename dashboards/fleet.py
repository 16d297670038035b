"""GPU fleet: whole clusters at a glance, what needs action now first.

The first row answers "what needs action now" (GPUs per action asked by firing alerts, each count a link to
the health dashboard's list) and "are all GPUs reporting" (reporting against expected), before anything else.
Stays fast at thousands of GPUs: every panel reads cluster-level recording rules, recorded lists of the GPUs
that pass a test (throttled, under memory pressure, silent, with a new XID) or a topk/bottomk of per-GPU
series, so no panel draws more than `dashboards.fleet_topk` GPUs or one series per cluster.
Per-GPU detail lives on the node dashboard, one click away; per-job detail on the job dashboard. A GPU
whose job or pod labels change stays one GPU (PromQL.per_gpu).
"""

from __future__ import annotations

from grafanalib import core as G

from gpudash.panels.annotations import alert_and_xid_annotations
from gpudash.panels.build import BuildContext
from gpudash.panels.fleet_actions import needs_action_row
from gpudash.panels.fleet_panels import (
    activity_and_energy,
    memory_pressure,
    stopped_reporting,
    throttled_gpus,
    xid_panels,
)
from gpudash.panels.fleet_report import goodput_and_interruptions
from gpudash.panels.gpu_panels import comparison_row, stat_row
from gpudash.panels.job_panels import fleet_job_hours, node_link
from gpudash.panels.visualizations import (
    PanelGrid,
    Query,
    count_heatmap,
    gauge,
    level_steps,
    table,
    timeseries,
    utilization_steps,
)
from gpudash.repository import FLEET_UID, JOB_UID, NODE_UID
from gpudash.rules.alert_spec import target_labels

UID = FLEET_UID
TITLE = "GPU fleet"


def build(ctx: BuildContext) -> G.Dashboard:
    q = ctx.promql("fleet")
    t = ctx.thresholds
    k = t.dashboards.fleet_topk
    gpu = q.gpu
    to_node, to_gpu = node_link(), node_link(gpu)
    layout = PanelGrid()

    layout.section("Needs action now")
    needs_action_row(layout, q, target_labels(ctx.settings, ("job",)), t.dashboards.expected_lookback)
    stopped_reporting(layout, q, ctx.settings.site.scrape_job, k)

    layout.section("Fleet at a glance")
    stat_row(layout, q, "fleet")

    layout.section("Utilization")
    layout.add(count_heatmap(
        "GPUs per utilization band", Query(q.utilization_bands(), "{{band}} %"),
        "GPUs of the selected clusters in each 10 % utilization band (0 = 0-9 %), colour = how many, every band "
        "drawn (an empty band is a pale row, not a gap). A healthy training fleet is dark at the top; a dark "
        "bottom row is idle capacity."), w=12, h=9)
    layout.add(timeseries(
        "Mean utilization by cluster",
        [Query(f"{q.use('cluster:gpu_utilization:sum')} / {q.use('cluster:gpu_count:count')}", "{{cluster}}")],
        "percent", "Mean GPU utilization of each cluster.", utilization_steps(t), 0, 100), w=12, h=9)
    activity_and_energy(layout, q, ctx.settings.site.scrape_interval)
    layout.add(table(
        f"Least busy nodes (bottom {k})",
        [Query(f"bottomk({k}, {q.use('cluster_instance:gpu_utilization:avg')})", ref="A")],
        "Nodes with the lowest mean GPU utilization right now, least busy first; click a node to open it.",
        {"A": "mean utilization"}, "percent", utilization_steps(t), links=[to_node], hide_columns=("__name__",),
        sort=("mean utilization", False)), w=24, h=8)

    layout.section("Jobs")
    goodput_and_interruptions(layout, q)
    fleet_job_hours(layout, q, k)

    layout.section("Memory")
    if q.available("cluster_instance_gpu:gpu_fb_used:ratio"):
        memory_pressure(layout, q, k)
        layout.add(timeseries(
            "Memory used by cluster",
            [Query(f"{q.use('cluster:gpu_fb_used_mib:sum')} / {q.use('cluster:gpu_fb_total_mib:sum')}",
                   "{{cluster}}")],
            "percentunit", "Framebuffer used / (used + free), per cluster.", level_steps(t.memory), 0, 1), w=12, h=9)

    layout.section("Temperature")
    temp = t.temperature
    for key, title, what, levels in (("gpu_temp", "Hottest GPUs", "GPU die", temp.gpu),
                                     ("hbm_temp", "Hottest HBM", "HBM", temp.hbm)):
        if q.has(key):
            layout.add(gauge(
                f"{title} (top {k})",
                Query(f"topk({k}, {q.per_gpu(q.metric(key))})", f"{{{{instance}}}} GPU {{{{{gpu}}}}}", instant=True),
                "celsius", f"{what} temperature of the hottest GPUs now, hottest first; click one to "
                           "open its node on that GPU.", level_steps(levels), 0, 100, links=[to_gpu]),
                w=12, h=8)

    layout.section("Power and clocks")
    layout.add(timeseries("Power by cluster", [Query(q.use("cluster:gpu_power_watts:sum"), "{{cluster}}")],
                          "watt", "Total GPU power draw of each cluster.", None, 0, fill=10), w=12)
    layout.add(timeseries("Mean SM clock by cluster", [Query(q.use("cluster:gpu_sm_clock_mhz:avg"), "{{cluster}}")],
                          "rotmhz", "Mean SM clock per cluster; a drop under load means throttling.", None, 0),
               w=12)
    throttled_gpus(layout, q, k)

    layout.section(f"Now against {t.dashboards.comparison_offset} ago")
    comparison_row(layout, q, "fleet")

    layout.section("Errors and I/O")
    xid_panels(layout, q, k)
    if q.has("pcie_rx", "pcie_tx"):
        layout.add(timeseries(
            "PCIe throughput by cluster",
            [Query(q.use("cluster:gpu_pcie_rx_bytes_per_second:sum"), "{{cluster}} RX"),
             Query(q.use("cluster:gpu_pcie_tx_bytes_per_second:sum"), "{{cluster}} TX")],
            "Bps", "Host <-> GPU PCIe throughput, summed per cluster.", None, 0), w=12)

    links = [G.DashboardLink(title="GPU node", uri=f"/d/{NODE_UID}", keepTime=True, includeVars=True),
             G.DashboardLink(title="GPU job", uri=f"/d/{JOB_UID}", keepTime=True, includeVars=True)]
    dashboard = ctx.dashboard(UID, TITLE, "What needs action now, then whole GPU clusters at a glance: busy, full, "
                                          "hot, throttled.", "fleet", layout.panels, links)
    dashboard.annotations = alert_and_xid_annotations(q, fleet=True)
    return dashboard
