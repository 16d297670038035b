"""GPU fleet: whole clusters at a glance.

Stays fast at thousands of GPUs: every panel reads cluster-level recording rules or a topk/bottomk of
per-GPU series, so no panel draws more than `dashboards.fleet_topk` GPUs or one series per cluster.
Per-GPU detail lives on the node dashboard, one click away; per-job detail on the job dashboard. A GPU
whose job or pod labels change stays one GPU (gpu_panels.per_gpu).
"""

from __future__ import annotations

from grafanalib import core as G

from gpudash.dashboards.build import BuildContext
from gpudash.dashboards.gpu_panels import comparison_row, per_gpu, stat_row
from gpudash.dashboards.job_panels import fleet_job_hours, node_link
from gpudash.dashboards.panels import (
    GREEN,
    ORANGE,
    Layout,
    Query,
    bar_gauge,
    color_steps,
    count_heatmap,
    gauge,
    level_steps,
    stat,
    table,
    timeseries,
    utilization_steps,
)
from gpudash.layout import FLEET_UID, JOB_UID, NODE_UID

UID = FLEET_UID
TITLE = "GPU fleet"


def build(ctx: BuildContext) -> G.Dashboard:
    q = ctx.promql("fleet")
    t = ctx.thresholds
    k = t.dashboards.fleet_topk
    gpu = q.gpu
    to_node = node_link()
    layout = Layout()

    def each(expr: str, *keep: str) -> str:
        return per_gpu(q, expr, *keep)

    layout.section("Fleet at a glance")
    stat_row(layout, q, "fleet")

    layout.section("Utilization")
    layout.add(count_heatmap(
        "GPUs per utilization band", Query(q.use("cluster:gpu_utilization_band:count"), "{{band}}"),
        "One row per 10 % utilization band (0 = 0-9 %), colour = how many GPUs sit in it. A healthy training "
        "fleet is dark at the top; a dark bottom row is idle capacity."), w=12, h=9)
    layout.add(timeseries(
        "Mean utilization by cluster",
        [Query(f"{q.use('cluster:gpu_utilization:sum')} / {q.use('cluster:gpu_count:count')}", "{{cluster}}")],
        "percent", "Mean GPU utilization of each cluster.", utilization_steps(t), 0, 100), w=12, h=9)
    layout.add(table(
        f"Least busy nodes (bottom {k})",
        [Query(f"bottomk({k}, {q.use('cluster_instance:gpu_utilization:avg')})", ref="A")],
        "Nodes with the lowest mean GPU utilization right now; click a node to open it.", "percent",
        utilization_steps(t), links=[to_node], hide_columns=("__name__",)), w=24, h=8)

    layout.section("Jobs")
    fleet_job_hours(layout, q, ctx.settings.site.scrape_interval, k)

    layout.section("Memory")
    if q.available("cluster_instance_gpu:gpu_fb_used:ratio"):
        layout.add(bar_gauge(
            f"Fullest GPUs (top {k})",
            Query(f"topk({k}, {each(q.fb_used_ratio())})", f"{{{{instance}}}} GPU {{{{{gpu}}}}}", instant=True),
            "percentunit", "Framebuffer used / (used + free) of the fullest GPUs.", level_steps(t.memory), 0, 1),
            w=12, h=9)
        layout.add(timeseries(
            "Memory used by cluster",
            [Query(f"{q.use('cluster:gpu_fb_used_mib:sum')} / {q.use('cluster:gpu_fb_total_mib:sum')}",
                   "{{cluster}}")],
            "percentunit", "Framebuffer used / (used + free), per cluster.", level_steps(t.memory), 0, 1), w=12, h=9)

    layout.section("Temperature")
    temp = t.temperature
    for key, title, levels in (("gpu_temp", "Hottest GPUs", temp.gpu), ("hbm_temp", "Hottest HBM", temp.hbm)):
        if q.has(key):
            layout.add(gauge(
                f"{title} (top {k})",
                Query(f"topk({k}, {each(q.metric(key))})", f"{{{{instance}}}} GPU {{{{{gpu}}}}}", instant=True),
                "celsius", f"{title.split()[1]} temperature of the hottest GPUs now.", level_steps(levels), 0, 100),
                w=12, h=8)

    layout.section("Power and clocks")
    layout.add(timeseries("Power by cluster", [Query(q.use("cluster:gpu_power_watts:sum"), "{{cluster}}")],
                          "watt", "Total GPU power draw of each cluster.", None, 0, fill=10), w=12)
    layout.add(timeseries("Mean SM clock by cluster", [Query(q.use("cluster:gpu_sm_clock_mhz:avg"), "{{cluster}}")],
                          "rotmhz", "Mean SM clock per cluster; a drop under load means throttling.", None, 0),
               w=12)
    if q.has("clock_event_active"):
        # Now, not over the range: a range query reads four series per GPU at every step, seconds at thousands
        # of GPUs; the mean SM clock above shows the history.
        layout.add(stat(
            "GPUs throttled by heat or power brake now",
            Query(f"sum by (cluster) ({q.throttled()})", "{{cluster}}"), "none",
            "GPUs with a thermal or power-brake clock event reason set now, per cluster (bundled exporter).",
            color_steps((GREEN, None), (ORANGE, 1))), w=12)
    if q.has("sm_clock_max"):
        layout.add(table(
            f"Slowest GPUs against their max clock (bottom {k})",
            [Query(f"bottomk({k}, {each(q.metric('sm_clock'))} / on(cluster, instance, {gpu}) "
                   f"{each(q.metric('sm_clock_max'))})")],
            "SM clock as a fraction of the GPU's maximum; low while busy = throttled.", "percentunit",
            None, links=[to_node], hide_columns=("__name__",)), w=12)

    layout.section(f"Now against {t.dashboards.comparison_offset} ago")
    comparison_row(layout, q, "fleet")

    layout.section("Errors and I/O")
    if q.has("xid_last"):
        xid_changes = f"changes({q.metric('xid_last')}[$__range])"
        layout.add(table(
            "GPUs with an XID error in range",
            [Query(f"topk({k}, {each(xid_changes)} > 0)")],
            "GPUs whose last-XID value changed in the time range (dcgm-exporter and the bundled exporter).",
            "none", None, links=[to_node], hide_columns=("__name__",)), w=12)
    if q.has("xid_total"):
        xid_increase = each(f"increase({q.metric('xid_total')}[$__rate_interval])", "xid")
        layout.add(timeseries(
            "XID errors by code", [Query(f"sum by (cluster, xid) ({xid_increase})",
                                         "{{cluster}} XID {{xid}}")],
            "none", "XID events per interval, by code (bundled exporter).", None, 0), w=12)
    if q.has("pcie_rx", "pcie_tx"):
        layout.add(timeseries(
            "PCIe throughput by cluster",
            [Query(q.use("cluster:gpu_pcie_rx_bytes_per_second:sum"), "{{cluster}} RX"),
             Query(q.use("cluster:gpu_pcie_tx_bytes_per_second:sum"), "{{cluster}} TX")],
            "Bps", "Host <-> GPU PCIe throughput, summed per cluster.", None, 0), w=12)

    links = [G.DashboardLink(title="GPU node", uri=f"/d/{NODE_UID}", keepTime=True, includeVars=True),
             G.DashboardLink(title="GPU job", uri=f"/d/{JOB_UID}", keepTime=True, includeVars=True)]
    return ctx.dashboard(UID, TITLE, "Whole GPU clusters at a glance: busy, full, hot, throttled.", "fleet",
                         layout.panels, links)
