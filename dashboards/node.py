"""GPU node: one `$instance` in detail, every GPU on its own row, line or gauge, in GPU index order.

Everything here is scoped to one node (and the chosen GPUs), so its cost does not grow with the fleet:
`$instance` has no "All", and opens on the first node. Graphs of raw gauges draw each step's average (or its
peak or dip, where that is what the panel is for), so a 7-day range still shows a short dip.
"""

from __future__ import annotations

from grafanalib import core as G

from gpudash.panels.annotations import alert_and_xid_annotations
from gpudash.panels.build import BuildContext
from gpudash.panels.fabric_panels import node_network
from gpudash.panels.gpu_panels import comparison_row, mig_instances, stat_row
from gpudash.panels.job_panels import PROCESS_CONTEXT
from gpudash.panels.visualizations import (
    GREEN,
    RED,
    UTILIZATION_SCHEME,
    PanelGrid,
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
from gpudash.repository import FLEET_UID, NODE_UID

UID = NODE_UID
TITLE = "GPU node"
STEP = "$__interval"


def build(ctx: BuildContext) -> G.Dashboard:
    q = ctx.promql("node")
    t = ctx.thresholds
    gpu = q.gpu
    # $instance is multi-select: a legend names the node too, or two nodes' GPU 0 read the same.
    legend = f"{{{{instance}}}} GPU {{{{{gpu}}}}}"
    layout = PanelGrid()

    def now(key: str) -> str:
        # One series per GPU even while its job or pod labels change, in GPU index order.
        return q.by_gpu_index(q.per_gpu(q.metric(key)))

    def each(key: str, how: str = "avg") -> str:
        """Per GPU over time: `how` (avg, max, min) of the raw gauge within each step of the graph."""
        return q.by_gpu_index(q.per_gpu(q.over_time(how, key, STEP)))

    def node_wide(key: str) -> str:
        # One reference line per node, not one identical line per GPU.
        return f"max by (cluster, instance) ({q.metric(key)})"

    layout.section("Node at a glance")
    stat_row(layout, q, "node")

    layout.section("Utilization")
    low, high = UTILIZATION_SCHEME[1]
    layout.add(heatmap(
        "Utilization per GPU", Query(each("gpu_util"), legend),
        f"One row per GPU over time, colour = mean utilization in each step: {low} at 0 % (idle; under "
        f"{t.utilization.idle_below_percent:g} % counts as idle) to {high} at 100 % (busy). An idle GPU is a "
        f"{low} row, a missing one a gap.", t), w=24, h=9)
    layout.add(timeseries("Utilization", [Query(each("gpu_util"), legend)], "percent",
                          "GPU utilization, the mean of each step: share of time a kernel was running.",
                          utilization_steps(t), 0, 100), w=12)
    if q.has("tensor_active"):
        layout.add(timeseries("Tensor core activity", [Query(each("tensor_active"), legend)], "percentunit",
                              "Ratio of cycles the tensor pipe is active, the mean of each step: real work, unlike "
                              "utilization.", None, 0, 1), w=12)

    layout.section("Memory")
    if q.available("cluster_instance_gpu:gpu_fb_used:ratio"):
        layout.add(bar_gauge("Memory used per GPU", Query(q.by_gpu_index(q.per_gpu(q.fb_used_ratio())), legend),
                             "percentunit", "Framebuffer used / (used + free) of each GPU now.", level_steps(t.memory),
                             0, 1, desc=None), w=8, h=9)
    layout.add(timeseries("Memory used", [Query(each("fb_used", "max"), legend)], "mbytes",
                          "Framebuffer used (MiB) per GPU, the peak of each step (what an OOM sees); a line that "
                          "only climbs is a leak.", None, 0), w=16, h=9)
    if q.has("process_fb_used"):
        layout.add(table("Memory per process", [Query(q.metric("process_fb_used"))],
                         "Framebuffer used by each process on each GPU now (pid, process name), largest first. "
                         "The bundled exporter publishes it; stock dcgm-exporter has no per-process series.",
                         {"A": "memory used"}, "mbytes", hide_columns=("__name__", *PROCESS_CONTEXT),
                         sort=("memory used", True)),
                   w=24, h=7)
    mig_instances(layout, q, "MIG instances",
                  "Each MIG GPU instance of this node's GPUs (GPU_I_ID, its profile GPU_I_PROFILE) now: framebuffer "
                  "used (MiB), the share of the instance's own memory, and its SM activity where published "
                  "(DCGM_FI_PROF_SM_ACTIVE: GPM on Hopper in the bundled exporter, optional in dcgm-exporter's). "
                  "The GPU's own rows above stay the whole GPU's.",
                  "None: no GPU of this node is partitioned with MIG")

    layout.section("Temperature")
    temp = t.temperature
    for key, title, levels in (("gpu_temp", "GPU temperature", temp.gpu), ("hbm_temp", "HBM temperature", temp.hbm)):
        if q.has(key):
            layout.add(gauge(title, Query(now(key), legend), "celsius",
                             f"{title} of each GPU now, against the warning and critical levels.",
                             level_steps(levels), 0, 100, desc=None), w=12, h=7)
    temps = [Query(each("gpu_temp", "max"), f"{legend} die")]
    if q.has("hbm_temp"):
        temps.append(Query(each("hbm_temp", "max"), f"{legend} HBM"))
    slowdown = ""
    if q.has("slowdown_temp"):
        temps.append(Query(f"min by (cluster, instance) ({q.metric('slowdown_temp')})", "slowdown", ref="Z"))
        slowdown = (" Dashed: the lowest slowdown temperature of the node's GPUs (DCGM_FI_DEV_SLOWDOWN_TEMP: "
                    "optional, stock dcgm-exporter does not publish it by default, then the line is absent).")
    layout.add(timeseries("Temperature", temps, "celsius",
                          f"GPU die and HBM temperature, the peak of each step.{slowdown}", level_steps(temp.gpu),
                          dashed_refs=("Z",)), w=24)

    layout.section("Power")
    power = [Query(each("power"), legend, ref="A")]
    if q.has("power_limit"):
        power.append(Query(node_wide("power_limit"), "limit", ref="L"))
    layout.add(timeseries("Power per GPU", power, "watt",
                          "Power draw per GPU, the mean of each step; dashed: the highest enforced power limit of the "
                          "node's GPUs (DCGM_FI_DEV_ENFORCED_POWER_LIMIT: optional, stock dcgm-exporter does not "
                          "publish it by default, then the line is absent).", None, 0, dashed_refs=("L",)), w=16)
    if q.has("power", "power_limit"):
        against = f"{q.per_gpu(q.metric('power'))} / {q.per_gpu(q.metric('power_limit'))}"
        layout.add(bar_gauge("Power against limit", Query(q.by_gpu_index(against), legend),
                             "percentunit", "Power draw as a fraction of the enforced limit now. Needs "
                                            "DCGM_FI_DEV_ENFORCED_POWER_LIMIT, which stock dcgm-exporter does not "
                                            "publish by default: add it to its counters CSV, or this stays empty.",
                             level_steps(t.power), 0, 1, desc=None), w=8)

    layout.section("SM clock")
    reasons = q.throttle_reasons()
    clocks = [Query(each("sm_clock", "min"), legend, ref="A")]
    if q.has("sm_clock_max"):
        clocks.append(Query(node_wide("sm_clock_max"), "max clock", ref="M"))
    layout.add(timeseries("SM clock", clocks, "rotmhz",
                          "SM clock per GPU, the lowest of each step (a throttling dip is not averaged away); dashed: "
                          "the node's max SM clock (DCGM_FI_DEV_MAX_SM_CLOCK: optional, stock dcgm-exporter does not "
                          "publish it by default). Busy and well under max = throttled.", None, 0,
                          dashed_refs=("M",)), w=24 if reasons is not None else 16)
    if reasons is not None:
        # An 8-GPU node's four reasons each are 32 rows: 18 grid units give each about 16 px.
        layout.add(state_timeline(
            "Throttle reasons", Query(q.by_gpu_index(reasons), f"{legend} {{{{clock_event}}}}"),
            "One row per GPU and thermal or power-brake reason, red while it is set: the bundled exporter's "
            "gpudash_clock_event_active, else dcgm-exporter's DCGM_EXP_CLOCK_EVENTS_COUNT (events in its window; "
            "optional in its counters CSV).", color_steps((GREEN, None), (RED, 1))), w=24, h=18)
    elif q.has("clock_event_reasons"):
        layout.add(state_timeline(
            "Clock event reasons (bitmask)", Query(now("clock_event_reasons"), legend),
            "NVML clock event reason bitmask; 0 = none, 1 = idle; anything else slows the clocks.",
            color_steps((GREEN, None), ("yellow", 2))), w=8)

    layout.section("Network: InfiniBand / RoCE ports under the GPUs")
    node_network(layout, q)

    layout.section(f"Now against {t.dashboards.comparison_offset} ago")
    comparison_row(layout, q, "node")

    layout.section("Errors and I/O")
    if q.has("pcie_rx", "pcie_tx"):
        layout.add(timeseries("PCIe throughput", [Query(each("pcie_rx"), f"{legend} RX"),
                                                  Query(each("pcie_tx"), f"{legend} TX")],
                              "Bps", "Host <-> GPU PCIe throughput per GPU, the mean of each step.", None, 0), w=12)
    if q.has("xid_last"):
        layout.add(timeseries("Last XID error", [Query(q.by_gpu_index(q.new_codes("xid_last", STEP)), legend)],
                              "none", "Code of each GPU's last XID error, one point at the step it appeared: the "
                              "exporter's gauge holds a code until the driver reports another, so only its "
                              "changes are drawn (a code is a label, not a level).", None, 0, draw="points"),
                   w=12)
    per_step = q.xid_events(STEP, per_step=True)
    if per_step is not None:
        layout.add(timeseries("XID errors by code", [Query(q.by_gpu_index(per_step), f"{legend} XID {{{{xid}}}}")],
                              "none", "XID events in each step, per GPU and code: the bundled exporter's counter, "
                                      "else a change of dcgm-exporter's last-XID gauge to a code.", None, 0,
                              draw="bars", decimals=0), w=12)

    links = [G.DashboardLink(title="GPU fleet", uri=f"/d/{FLEET_UID}", keepTime=True, includeVars=True)]
    dashboard = ctx.dashboard(UID, TITLE,
                              "One GPU node in detail: every GPU's utilization, memory, heat, power, clocks, "
                              "network ports.",
                              "node", layout.panels, links)
    dashboard.annotations = alert_and_xid_annotations(q)
    # No "All" nodes: opened without a choice, Grafana shows the first node instead of drawing every GPU of
    # the fleet, so this dashboard costs the same at 8 GPUs and at 8,000. Several nodes can still be picked.
    for variable in dashboard.templating.list:
        if variable.name == "instance":
            variable.includeAll = False
    return dashboard
