"""GPU node: one `$instance` in detail, every GPU on its own row, line or gauge.

Everything here is scoped to one node (and the chosen GPUs), so its cost does not grow with the fleet:
`$instance` has no "All", and opens on the first node.
"""

from __future__ import annotations

from grafanalib import core as G

from gpudash.dashboards.build import BuildContext
from gpudash.dashboards.gpu_panels import comparison_row, per_gpu, stat_row
from gpudash.dashboards.panels import (
    GREEN,
    RED,
    Layout,
    Query,
    bar_gauge,
    color_steps,
    gauge,
    heatmap,
    level_steps,
    state_timeline,
    table,
    timeseries,
    utilization_steps,
)
from gpudash.layout import FLEET_UID, NODE_UID

UID = NODE_UID
TITLE = "GPU node"


def build(ctx: BuildContext) -> G.Dashboard:
    q = ctx.promql("node")
    t = ctx.thresholds
    gpu = q.gpu
    legend = f"GPU {{{{{gpu}}}}}"
    layout = Layout()

    def each(key: str) -> str:
        # One series per GPU even while its job or pod labels change (gpu_panels.per_gpu).
        return per_gpu(q, q.metric(key))

    layout.section("Node at a glance")
    stat_row(layout, q, "node")

    layout.section("Utilization")
    layout.add(heatmap(
        "Utilization per GPU", Query(each("gpu_util"), legend),
        f"One row per GPU over time, colour = utilization: yellow under {t.utilization.idle_below_percent:g} % "
        f"(idle), green, red over {t.utilization.saturated_above_percent:g} % (saturated).", t), w=24, h=9)
    layout.add(timeseries("Utilization", [Query(each("gpu_util"), legend)], "percent",
                          "GPU utilization: share of time a kernel was running.", utilization_steps(t), 0, 100), w=12)
    if q.has("tensor_active"):
        layout.add(timeseries("Tensor core activity", [Query(each("tensor_active"), legend)], "percentunit",
                              "Ratio of cycles the tensor pipe is active: real work, unlike utilization.", None, 0, 1),
                   w=12)

    layout.section("Memory")
    if q.available("cluster_instance_gpu:gpu_fb_used:ratio"):
        layout.add(bar_gauge("Memory used per GPU", Query(per_gpu(q, q.fb_used_ratio()), legend), "percentunit",
                             "Framebuffer used / (used + free) of each GPU.", level_steps(t.memory), 0, 1), w=8, h=9)
    layout.add(timeseries("Memory used", [Query(each("fb_used"), legend)], "mbytes",
                          "Framebuffer used (MiB) per GPU; a line that only climbs is a leak.", None, 0), w=16, h=9)
    if q.has("process_fb_used"):
        layout.add(table("Memory per process", [Query(q.metric("process_fb_used"))],
                         "Framebuffer used by each process on each GPU (pid, process name).", "mbytes",
                         hide_columns=("__name__",)), w=24, h=7)

    layout.section("Temperature")
    temp = t.temperature
    for key, title, levels in (("gpu_temp", "GPU temperature", temp.gpu), ("hbm_temp", "HBM temperature", temp.hbm)):
        if q.has(key):
            layout.add(gauge(title, Query(each(key), legend), "celsius",
                             f"{title} of each GPU now, against the warning and critical levels.",
                             level_steps(levels), 0, 100), w=12, h=7)
    temps = [Query(each("gpu_temp"), f"{legend} die")]
    if q.has("hbm_temp"):
        temps.append(Query(each("hbm_temp"), f"{legend} HBM"))
    if q.has("slowdown_temp"):
        temps.append(Query(each("slowdown_temp"), f"{legend} slowdown", ref="Z"))
    layout.add(timeseries("Temperature", temps, "celsius", "GPU die and HBM temperature; dashed: slowdown level.",
                          level_steps(temp.gpu), dashed_refs=("Z",)), w=24)

    layout.section("Power")
    power = [Query(each("power"), legend, ref="A")]
    if q.has("power_limit"):
        power.append(Query(each("power_limit"), f"{legend} limit", ref="L"))
    layout.add(timeseries("Power per GPU", power, "watt",
                          "Power draw per GPU; dashed: the enforced power limit where the exporter gives it.",
                          None, 0, dashed_refs=("L",)), w=16)
    if q.has("power", "power_limit"):
        layout.add(bar_gauge("Power against limit", Query(f"{each('power')} / {each('power_limit')}",
                                                          legend),
                             "percentunit", "Power draw as a fraction of the enforced limit.", level_steps(t.power),
                             0, 1), w=8)

    layout.section("SM clock")
    clocks = [Query(each("sm_clock"), legend, ref="A")]
    if q.has("sm_clock_max"):
        clocks.append(Query(each("sm_clock_max"), f"{legend} max", ref="M"))
    layout.add(timeseries("SM clock", clocks, "rotmhz",
                          "SM clock per GPU; dashed: the maximum clock. Busy and well under max = throttled.",
                          None, 0, dashed_refs=("M",)), w=16)
    if q.has("clock_event_active"):
        layout.add(state_timeline(
            "Throttle reasons", Query(q.throttled(), legend),
            "Red while a thermal or power-brake clock event reason is set.", color_steps((GREEN, None), (RED, 1))), w=8)
    elif q.has("clock_event_reasons"):
        layout.add(state_timeline(
            "Clock event reasons (bitmask)", Query(each("clock_event_reasons"), legend),
            "NVML clock event reason bitmask; 0 = none, 1 = idle; anything else slows the clocks.",
            color_steps((GREEN, None), ("yellow", 2))), w=8)

    layout.section(f"Now against {t.dashboards.comparison_offset} ago")
    comparison_row(layout, q, "node")

    layout.section("Errors and I/O")
    if q.has("pcie_rx", "pcie_tx"):
        layout.add(timeseries("PCIe throughput", [Query(each("pcie_rx"), f"{legend} RX"),
                                                  Query(each("pcie_tx"), f"{legend} TX")],
                              "Bps", "Host <-> GPU PCIe throughput per GPU.", None, 0), w=12)
    if q.has("xid_last"):
        layout.add(timeseries("Last XID error", [Query(each("xid_last"), legend)], "none",
                              "Code of the last XID error per GPU (0 = none since start).", None, 0), w=12)
    if q.has("xid_total"):
        increase = per_gpu(q, f"increase({q.metric('xid_total')}[$__rate_interval])", "xid")
        xids = Query(increase, f"{legend} XID {{{{xid}}}}")
        layout.add(timeseries("XID errors by code", [xids], "none",
                              "XID events per interval, by code (bundled exporter).", None, 0), w=12)

    links = [G.DashboardLink(title="GPU fleet", uri=f"/d/{FLEET_UID}", keepTime=True, includeVars=True)]
    dashboard = ctx.dashboard(UID, TITLE,
                              "One GPU node in detail: every GPU's utilization, memory, heat, power, clocks.",
                              "node", layout.panels, links)
    # No "All" nodes: opened without a choice, Grafana shows the first node instead of drawing every GPU of
    # the fleet, so this dashboard costs the same at 8 GPUs and at 8,000. Several nodes can still be picked.
    for variable in dashboard.templating.list:
        if variable.name == "instance":
            variable.includeAll = False
    return dashboard
