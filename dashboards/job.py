"""GPU job: one `$job` across all its nodes; is it busy, is every GPU pulling its weight, what does it cost.

A job is a value of the site's job label (gpudash.yaml `jobs.label`, default `hpc_job`, which dcgm-exporter
and the bundled exporter set from Slurm's job-mapping files; on Kubernetes a pod label or `namespace`).

Bounded at any job size: a panel reads the job-level recording rules (`cluster_job:*`, one series per job:
size, min / median / max of each activity signal, power), or an aggregation over the job's GPUs, or a
topk/bottomk of `dashboards.fleet_topk` GPUs. A 1,024-GPU job draws 3 lines for its utilization spread,
not 1,024. Per-GPU detail is one click away on the node dashboard.
"""

from __future__ import annotations

from grafanalib import core as G

from gpudash.config.durations import Duration
from gpudash.panels.annotations import alert_and_xid_annotations
from gpudash.panels.build import BuildContext
from gpudash.panels.fabric_panels import PORT_CONGESTION, job_network, port_congestion_column, straggler_port
from gpudash.panels.gpu_panels import mig_instances
from gpudash.panels.job_panels import PROCESS_CONTEXT, energy_in_range, gpu_hours, job_holder_table, node_link
from gpudash.panels.visualizations import (
    GREEN,
    ORANGE,
    PanelGrid,
    Query,
    bar_gauge,
    color_steps,
    idle_count_steps,
    level_steps,
    stat,
    table,
    timeseries,
    utilization_steps,
)
from gpudash.promql.query import PromQL, Scope
from gpudash.repository import FLEET_UID, JOB_UID, NODE_UID

UID = JOB_UID
TITLE = "GPU job"


def build(ctx: BuildContext) -> G.Dashboard:
    q = ctx.promql("job")
    t = ctx.thresholds
    k = t.dashboards.fleet_topk
    label, gpu = q.job_label, q.gpu
    per_job = f"{{{{{label}}}}}"
    step = ctx.settings.site.scrape_interval
    # The job's GPUs, one series per (GPU, job): the right-hand side that ties per-GPU signals published
    # without the job label (or by another job's copy) to this job.
    job_gpus = f"count by (cluster, instance, {gpu}, {label}) ({q.metric('gpu_util')})"
    # Per-GPU signals read in the cluster only, then joined to the job's GPUs.
    cluster = q.with_scope(Scope((("cluster", "=~", "$cluster"),)))

    def on_job_gpus(expr: str) -> str:
        return f"{expr} and on (cluster, instance, {gpu}) {job_gpus}"

    layout = PanelGrid()
    layout.section("Job at a glance")
    layout.add(job_holder_table(q), w=24, h=4)
    _glance(layout, q, step)

    layout.section("Nodes and GPUs")
    node_util = f"avg by (cluster, instance) ({q.metric('gpu_util')})"
    least_nodes = f"bottomk({k}, {node_util})"
    layout.add(table(
        f"The job's least busy nodes (bottom {k})",
        [Query(least_nodes, ref="A"),
         Query(f"count by (cluster, instance) ({q.metric('gpu_util')}) and on (cluster, instance) {least_nodes}",
               ref="B")],
        "The job's nodes with the lowest mean utilization of its GPUs now, and how many of its GPUs each holds. "
        "Click a node to open it.", {"A": "mean utilization %", "B": "GPUs of the job"}, "none",
        utilization_steps(q.thresholds), links=[node_link()], hide_columns=("__name__",),
        sort=("mean utilization %", False)), w=12, h=8)
    layout.add(table(
        f"The job's least busy GPUs (bottom {k})",
        [Query(f"bottomk({k}, {q.per_gpu(q.metric('gpu_util'))})")],
        "The job's GPUs with the lowest utilization now, least busy first. Click one to open its node on that GPU.",
        {"A": "utilization"}, "percent", utilization_steps(t), links=[node_link(gpu)], hide_columns=("__name__",),
        sort=("utilization", False)), w=12, h=8)

    layout.section("Spread over the job's GPUs")
    _spread(layout, q, per_job)

    layout.section("Stragglers")
    _stragglers(layout, q, cluster, k)

    layout.section("Network: the ports under the job's GPUs")
    held = f"count by (cluster, instance, {gpu}, {label}) (last_over_time({q.raw_range('gpu_util', '$__range')} " \
           "@ end()))"
    job_network(layout, cluster, job_gpus, held, k)

    layout.section("Memory")
    if q.available("cluster_instance_gpu:gpu_fb_used:ratio"):
        layout.add(bar_gauge(
            f"Fullest GPUs (top {k})",
            Query(f"topk({k}, {q.per_gpu(q.fb_used_ratio())})", f"{{{{instance}}}} GPU {{{{{gpu}}}}}"),
            "percentunit", "Framebuffer used / (used + free) of the job's fullest GPUs now, fullest first: one rank "
                           "far above the others holds more than its share. Click one to open its node on that GPU.",
            level_steps(t.memory), 0, 1, links=[node_link(gpu)]), w=12, h=9)
    by_job = f"by (cluster, {label})"
    layout.add(timeseries(
        "Memory used: median and fullest GPU",
        [Query(f"quantile {by_job} (0.5, {q.metric('fb_used')})", f"{per_job} median", ref="A"),
         Query(f"max {by_job} ({q.metric('fb_used')})", f"{per_job} fullest", ref="B")],
        "mbytes", "Framebuffer used (MiB) on the job's median GPU and on its fullest (dashed); a fullest line far "
                  "above the median is one rank holding more than the others.", None, 0, dashed_refs=("B",)),
        w=12, h=9)

    mig_instances(layout, q, f"The job's MIG instances (top {k} by memory)",
                  f"The MIG GPU instances the job holds (its `{label}` on the instance's series, from a `<gpu>.<gi>` "
                  "job-mapping file), each with its GPU_I_ID and profile: framebuffer used (MiB), the share of the "
                  "instance's own memory, and its SM activity where published (DCGM_FI_PROF_SM_ACTIVE: GPM on Hopper "
                  "in the bundled exporter, optional in dcgm-exporter's).",
                  "None: the job holds whole GPUs", k)

    layout.section("Power and energy")
    if q.available("cluster_job:gpu_power_watts:sum"):
        layout.add(timeseries(
            "Power", [Query(q.use("cluster_job:gpu_power_watts:sum"), per_job)], "watt",
            "Power drawn by all of the job's GPUs.", None, 0, fill=10), w=24)

    layout.section("Errors and throttling")
    # Both exporters copy every series of a GPU per job on it, XIDs included: the job's own copies, no join.
    in_range, per_step = q.xid_events("$__range"), q.xid_events("$__interval", per_step=True)
    if in_range is not None and per_step is not None:
        layout.add(table(
            "The job's GPUs with an XID error in range", [Query(f"topk({k}, {in_range})")],
            "The job's GPUs with XID events in the time range, by code (column xid), most first: the bundled "
            "exporter's per-code counter, else a change of dcgm-exporter's last-XID gauge to a code. Click one to "
            "open its node.", {"A": "XID events"}, "none", None, links=[node_link(gpu)], hide_columns=("__name__",),
            sort=("XID events", True)), w=12)
        layout.add(timeseries(
            "XID errors on the job's GPUs, by code",
            [Query(f"sum by (cluster, xid) ({per_step})", "{{cluster}} XID {{xid}}")],
            "none", "XID events in each step on the job's GPUs, by code: one bar per event. From the bundled "
                    "exporter's per-code counter, else a change of dcgm-exporter's last-XID gauge to a code.", None, 0,
            draw="bars", decimals=0),
            w=12)
    reasons = cluster.throttle_reasons()
    if reasons is not None:
        throttled = on_job_gpus(f"sum by (cluster, instance, {gpu}) ({reasons}) > 0")
        source = ("the bundled exporter's flag, else dcgm-exporter's count of such events in its window "
                  "(DCGM_EXP_CLOCK_EVENTS_COUNT, optional in its counters CSV)")
        layout.add(stat(
            "The job's GPUs throttled now", Query(f"count({throttled})", "throttled"), "none",
            f"The job's GPUs with a thermal or power-brake clock event reason set now: {source}. One throttled "
            "GPU slows a synchronous job to its pace.", color_steps((GREEN, None), (ORANGE, 1)),
            no_value="0"), w=4)
        layout.add(table(
            f"Throttled GPUs now (top {k})", [Query(f"topk({k}, {throttled})")],
            f"Which of the job's GPUs are throttled by heat or the power brake now, and by how many reasons "
            f"(or events): {source}. Click one to open its node.", {"A": "throttle reasons"}, "none", None,
            links=[node_link(gpu)], hide_columns=("__name__",), sort=("throttle reasons", True)), w=8)

    if q.has("process_fb_used"):
        layout.section("Other jobs on the job's GPUs")
        process = cluster.metric("process_fb_used")
        foreign = f"({process} and on (cluster, instance, {gpu}) {job_gpus}) unless on (cluster, instance, {gpu}, " \
                  f"{label}) {job_gpus}"
        layout.add(table(
            f"Processes on the job's GPUs that belong to another job (top {k} by memory)",
            [Query(f"topk({k}, ({foreign}) > 0)")],
            f"Processes on the job's GPUs whose own `{label}` is another job's or unknown, by framebuffer used "
            "used: a card taken by someone else's task. The bundled exporter labels each process with its own "
            "job (Slurm: its cgroup; Kubernetes: its container's pod); dcgm-exporter publishes no per-process "
            "series, so on a dcgm-exporter site this table stays empty.", {"A": "memory used"}, "mbytes", None,
            links=[node_link(gpu)], hide_columns=("__name__", *PROCESS_CONTEXT), sort=("memory used", True),
            empty="None: only the job's own processes"), w=24, h=7)

    links = [G.DashboardLink(title="GPU fleet", uri=f"/d/{FLEET_UID}", keepTime=True, includeVars=True),
             G.DashboardLink(title="GPU node", uri=f"/d/{NODE_UID}", keepTime=True, includeVars=True)]
    dashboard = ctx.dashboard(UID, TITLE, "One job across its nodes: size, spread, stragglers, memory, energy, "
                                          "errors.", "job", layout.panels, links)
    dashboard.annotations = alert_and_xid_annotations(q)
    # No "All" jobs: opened without a choice, Grafana shows the first job, so the dashboard costs one job's worth.
    for variable in dashboard.templating.list:
        if variable.name == "job":
            variable.includeAll = False
    return dashboard


def _glance(layout: PanelGrid, q: PromQL, step: Duration) -> None:
    t = q.thresholds
    count, idle = q.use("cluster_job:gpu_count:count"), q.use("cluster_job:gpu_idle:count")
    idle_level = t.alerts.allocated_idle.util_below_percent
    idle_steps = idle_count_steps()
    specs: list[tuple[str, str, str, str, list[G.Threshold] | None, bool]] = [
        ("GPUs", f"sum({count})", "none", "GPUs the job holds now.", None, False),
        ("Nodes", f"count(count by (cluster, instance) ({q.metric('gpu_util')}))", "none",
         "Nodes the job's GPUs are on now.", None, False),
        ("Median utilization", f"avg({q.use('cluster_job:gpu_utilization:median')})", "percent",
         "Utilization of the job's median GPU.", utilization_steps(t), True),
        ("GPUs held idle", f"sum({idle})", "none",
         f"The job's GPUs under {idle_level:g} % utilization now (GPUAllocatedIdle's level).", idle_steps, False),
        ("GPU-hours in range", f"sum({gpu_hours(q, 'held')})", "none",
         "GPUs held, added up over the time range (the GPU-seconds recorded at each rule evaluation, "
         "cluster_job:gpu_held_seconds:interval).", None, False),
        ("GPU-hours idle in range", f"sum({gpu_hours(q, 'idle')})", "none",
         f"GPU-hours the job held under {idle_level:g} % utilization over the time range "
         "(cluster_job:gpu_idle_seconds:interval).", idle_steps, False),
    ]
    if q.available("cluster_job:gpu_power_watts:sum"):
        power = q.use("cluster_job:gpu_power_watts:sum")
        specs.append(("Power", f"sum({power})", "watt", "Power drawn by the job's GPUs now.", None, True))
    energy = energy_in_range(q, "cluster_job:gpu_power_watts:sum", step)
    if energy is not None:
        specs.append(("Energy in range", energy[0], "kwatth",
                      f"Energy the job's GPUs drew over the time range (kWh): {energy[1]}.", None, False))
    for title, expr, unit, description, steps, graph in specs:
        layout.add(stat(title, Query(expr, title), unit, description, steps, graph=graph), w=3, h=4)


def _spread(layout: PanelGrid, q: PromQL, per_job: str) -> None:
    """Lowest, median and highest GPU of the job over time: three lines per job, from the recording rules."""
    t = q.thresholds
    physics = ("In a synchronous job the three lines stay close. A wide gap is a straggler: a slowed GPU computes "
               "longer, so its activity is the highest while its peers' drops as they wait in collectives (their "
               "utilization stays high). All three falling together is the whole job waiting: data loading, a "
               "checkpoint, evaluation.")
    optional = (" SM activity is DCGM_FI_PROF_SM_ACTIVE, which dcgm-exporter publishes only when its counters CSV "
                "enables it (the bundled exporter always does).")
    for signal, title, unit, steps, top, source in (
            ("gpu_utilization", "Utilization: lowest, median, highest GPU", "percent", utilization_steps(t), 100, ""),
            ("gpu_sm_active", "SM activity: lowest, median, highest GPU", "percentunit", None, 1, optional)):
        names = [f"cluster_job:{signal}:{how}" for how in ("min", "median", "max")]
        if not all(q.available(name) for name in names):
            continue
        queries = [Query(q.use(name), f"{per_job} {name.rsplit(':', 1)[1]}", ref=ref)
                   for name, ref in zip(names, "ABC", strict=True)]
        description = f"{title} of the job (dashed: lowest and highest). {physics}{source}"
        layout.add(timeseries(title, queries, unit, description, steps, 0, top, dashed_refs=("A", "C")), w=12, h=8)
    if q.available("cluster_job:gpu_tensor_active:median"):
        layout.add(timeseries(
            "Tensor core activity (median GPU)", [Query(q.use("cluster_job:gpu_tensor_active:median"), per_job)],
            "percentunit", "Tensor-pipe activity of the job's median GPU: the share of cycles doing matrix math, "
                           "real work unlike utilization.", None, 0, 1), w=12, h=8)
    if q.available("cluster_job:gpu_sm_clock_mhz:median"):
        slowest = f"min by (cluster, {q.job_label}) ({q.metric('sm_clock')})"
        layout.add(timeseries(
            "SM clock: median and slowest GPU",
            [Query(q.use("cluster_job:gpu_sm_clock_mhz:median"), f"{per_job} median", ref="A"),
             Query(slowest, f"{per_job} slowest", ref="B")],
            "rotmhz", "SM clock of the job's median GPU and of its slowest (dashed). A slowest line well under the "
                      "median while the job is busy is a throttled GPU holding the others back.", None, 0,
            dashed_refs=("B",)), w=12, h=8)


def _stragglers(layout: PanelGrid, q: PromQL, cluster: PromQL, k: int) -> None:
    """The GPUs furthest from their job's median: the suspects when a synchronous job runs slow; beside each,
    its port's congestion, which tells a slow GPU from one that waits on a congested port."""
    levels = q.thresholds.alerts.job_straggler
    congestion = q.thresholds.alerts.fabric.congestion_ratio
    port = ("port congestion: the share of transmit slots the GPU's most congested RDMA port spends waiting (5m; "
            f"GPUFabricStragglerCongestion's level {congestion:.0%}, red from it): a red one is a port to look at "
            "before the GPU; empty where no port maps to the GPU (gpudash_gpu_nic_info).")
    port_column = port_congestion_column(congestion)
    label = q.job_label
    to_median = f"on (cluster, {label}) group_left()"
    hide = ("__name__",)
    link = node_link(q.gpu)
    window = levels.window
    if q.available("cluster_job:gpu_sm_clock_mhz:median"):
        # As GPUJobStraggler reads them: each averaged over its window; GPUs at or above the median are no rows.
        clock = q.in_job_over_time("avg", "sm_clock", window)
        median = q.recorded_over_time("avg", "cluster_job:gpu_sm_clock_mhz:median", window)
        slowest = f"topk({k}, (1 - {clock} / {to_median} {median}) > 0)"
        layout.add(table(
            f"Slowest SM clocks against the job's median (top {k})",
            [Query(slowest, ref="A"), straggler_port(cluster, slowest, slowest)],
            f"How far each GPU's SM clock is below its job's median clock, both averaged over the last {window} "
            f"(GPUJobStraggler looks for more than {levels.clock_below_ratio:.0%}), furthest first; a GPU at or "
            f"above the median is not listed. Click one to open its node. {port}",
            {"A": "below the median", "B": PORT_CONGESTION}, "percentunit",
            color_steps((GREEN, None), (ORANGE, levels.clock_below_ratio)), links=[link], hide_columns=hide,
            sort=("below the median", True), coloured="below the median", overrides=port_column), w=12)
    departure = "cluster_instance_gpu_job:gpu_activity_departure:points"
    if not q.available(departure):
        return
    points = q.use(departure)
    # The furthest either way, signed; under a point from the median is the noise of averaging, not a row.
    chosen = f"topk({k}, abs({points}) >= 1)"
    furthest = f"{points} and on (cluster, instance, {q.gpu}, {label}) {chosen}"
    layout.add(table(
        f"Activity furthest from the job's median (top {k})",
        [Query(furthest, ref="A"), straggler_port(cluster, furthest, chosen)],
        f"Points between each GPU's SM activity (its utilization where it has none) and its job's median, both "
        f"averaged over the last {window}: GPUJobStraggler's own value (it looks for more than "
        f"{levels.activity_points:g} either way). + : busier than its peers, a slowed GPU computing longer while "
        "they wait; - : a node starved of input. A GPU within a point of the median is not listed. Click one to "
        f"open its node. {port}", {"A": "points from the median", "B": PORT_CONGESTION}, "none",
        color_steps((ORANGE, None), (GREEN, -levels.activity_points), (ORANGE, levels.activity_points)),
        links=[link], hide_columns=hide, sort=("points from the median", True), coloured="points from the median",
        overrides=port_column), w=12)
