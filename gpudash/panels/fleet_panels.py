"""Fleet panels that need more than one query or a fallback: who stopped reporting, the fleet's real work and
energy, memory pressure, throttled GPUs and XIDs.

Each reads recording rules, a topk/bottomk, or instant lookups, so the fleet dashboard's cost does not grow
with the GPUs it covers faster than one instant read of each GPU.
"""

from __future__ import annotations

from gpudash.config.durations import Duration
from gpudash.panels.job_panels import energy_in_range, node_link
from gpudash.panels.visualizations import (
    GREEN,
    ORANGE,
    RED,
    PanelGrid,
    Query,
    color_steps,
    level_steps,
    stat,
    table,
    timeseries,
)
from gpudash.promql.query import UP, PromQL

# On a dcgm-exporter, these come from the counters CSV; say where the data comes from in each description.
BUNDLED_ONLY = "stock dcgm-exporter does not publish it"


def stopped_reporting(layout: PanelGrid, q: PromQL, scrape_job: str, k: int) -> None:
    """Exporters whose scrape fails, and GPUs seen within the lookback that report nothing now (k of each)."""
    lookback = q.thresholds.alerts.exporter_down.lookback
    up = f"{UP}{q.scope.selector((('job', '=', scrape_job),))}"
    down = f"max by (cluster, instance) ({up}) == 0"
    silent = q.use("cluster_instance_gpu:gpu_reporting:stopped")  # the signal GPUExporterDown watches
    layout.add(table(
        "Exporters and GPUs that stopped reporting",
        [Query(f"topk({k}, {down})", ref="A"), Query(f"topk({k}, {silent})", ref="B")],
        f"Exporter targets of the `{scrape_job}` scrape job that are down (up == 0), and GPUs that reported within "
        f"{lookback} and report nothing now (GPUExporterDown's test, recorded as "
        "cluster_instance_gpu:gpu_reporting:stopped), {k} of each. Empty is good; a GPU here is missing from "
        "every other panel. Click a row to open its node.",
        {"A": "exporter up", "B": "GPU silent"}, "none", links=[node_link()], hide_columns=("__name__", "job"),
        sort=("GPU silent", True), empty="None: every exporter and GPU reports"),
        w=24, h=5)


def activity_and_energy(layout: PanelGrid, q: PromQL, step: Duration) -> None:
    """Tensor-core and SM activity and NVLink traffic per cluster, and the energy drawn over the range."""
    activity = []
    if q.available("cluster:gpu_tensor_active:avg"):
        activity.append(Query(q.use("cluster:gpu_tensor_active:avg"), "{{cluster}} tensor", ref="A"))
    if q.available("cluster:gpu_sm_active:avg"):
        sm = q.use("cluster:gpu_sm_active:avg")
        if q.available("cluster:gpu_gr_engine_active:avg"):
            sm = f"{sm} or on (cluster) {q.use('cluster:gpu_gr_engine_active:avg')}"
        activity.append(Query(sm, "{{cluster}} SM", ref="B"))
    if activity:
        layout.add(timeseries(
            "Tensor core and SM activity by cluster", activity, "percentunit",
            "Mean share of cycles the tensor pipes (solid) and the SMs (dashed) are busy, per cluster: the real "
            "work that utilization (a kernel is running) overstates. SM activity is DCGM_FI_PROF_SM_ACTIVE, an "
            "optional dcgm-exporter counter; where a cluster lacks it, the graphics-engine activity of the "
            "default counters (DCGM_FI_PROF_GR_ENGINE_ACTIVE).", None, 0, 1, dashed_refs=("B",)), w=12)
    if q.available("cluster:gpu_nvlink_bytes_per_second:sum"):
        layout.add(timeseries(
            "NVLink traffic by cluster", [Query(q.use("cluster:gpu_nvlink_bytes_per_second:sum"), "{{cluster}}")],
            "Bps", "Bytes over NVLink per second, both directions and every link, summed per cluster "
                   "(DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL, a default counter, in KiB). Flat at 0 on a training "
                   "cluster means the collectives go over PCIe or the network.", None, 0), w=12)
    energy = energy_in_range(q, "cluster:gpu_power_watts:sum", step)
    if energy is not None:
        layout.add(stat(
            "Energy in range", Query(energy[0], "energy"), "kwatth",
            f"Energy the GPUs of the selected clusters drew over the time range (kWh): {energy[1]}.", None),
            w=24, h=4)


def memory_pressure(layout: PanelGrid, q: PromQL, k: int) -> None:
    """GPUs over the memory warning level that are still growing, the soonest to fill first."""
    t = q.thresholds
    gpu = q.gpu
    window = t.alerts.memory_pressure.growth_window
    on = f"on (cluster, instance, {gpu})"
    hours = f"bottomk({k}, {q.use('cluster_instance_gpu:gpu_fb_hours_to_full:growing')})"
    layout.add(table(
        f"Memory pressure: over {t.memory.warning:.0%} and growing (top {k})",
        [Query(hours, ref="A"), Query(f"{q.per_gpu(q.fb_used_ratio())} and {on} {hours}", ref="B")],
        f"GPUs whose framebuffer is over the warning level and grew over the last {window} (now against "
        f"{window} ago), soonest to fill first: hours until full at that rate "
        "(cluster_instance_gpu:gpu_fb_hours_to_full:growing), and how full they are. A model loaded to 97 % "
        "that stays flat is not here; one still growing is about to OOM. Click one to open its node on that GPU.",
        {"A": "hours until full", "B": "used"}, "h", level_steps(t.memory), links=[node_link(gpu)],
        hide_columns=("__name__",), sort=("hours until full", False), coloured="used",
        empty="None: no GPU over the level is still growing",
        overrides=[{"matcher": {"id": "byName", "options": "used"},
                    "properties": [{"id": "unit", "value": "percentunit"}]}]), w=12, h=9)


def throttled_gpus(layout: PanelGrid, q: PromQL, k: int) -> None:
    """Busy GPUs whose SM clock is well under their max, and GPUs with a thermal or power-brake reason set."""
    t = q.thresholds
    gpu = q.gpu
    queries, columns, sources = [], {}, []
    if q.available("cluster_instance_gpu:gpu_sm_clock_to_max:throttled"):
        queries.append(Query(f"bottomk({k}, {q.use('cluster_instance_gpu:gpu_sm_clock_to_max:throttled')})",
                             ref="A"))
        columns["A"] = "SM clock / max"
        sources.append(f"SM clock under {1 - t.throttle_drop_ratio:.0%} of the GPU's max clock while at least "
                       f"{t.utilization.idle_below_percent:g} % busy (DCGM_FI_DEV_MAX_SM_CLOCK: optional, "
                       f"{BUNDLED_ONLY} by default)")
    if q.available("cluster_instance_gpu:gpu_throttle_reasons:count"):
        queries.append(Query(f"topk({k}, {q.use('cluster_instance_gpu:gpu_throttle_reasons:count')})", ref="B"))
        columns["B"] = "throttle reasons"
        sources.append("a thermal or power-brake clock event reason set now (the bundled exporter), or counted "
                       "in dcgm-exporter's window (DCGM_EXP_CLOCK_EVENTS_COUNT, optional in its counters CSV)")
    if not queries:
        return
    layout.add(table(
        f"Throttled GPUs now (top {k})", queries,
        "GPUs slowed by heat or power, slowest first: " + "; or ".join(sources) + ". An idle GPU's low clock "
        "is not throttling and is not listed. Both tests are recorded (cluster_instance_gpu:gpu_sm_clock_to_max:"
        "throttled, cluster_instance_gpu:gpu_throttle_reasons:count). Click one to open its node on that GPU.",
        columns, "none", color_steps((GREEN, None), (ORANGE, 1)) if "B" in columns else None,
        links=[node_link(gpu)], hide_columns=("__name__",), sort=(next(iter(columns.values())), "A" not in columns),
        coloured=columns.get("B")), w=12)


def xid_panels(layout: PanelGrid, q: PromQL, k: int) -> None:
    """GPUs with XID events over the range (code and count), and XID events per step by code."""
    gpu = q.gpu
    in_range = q.xid_events("$__range", recorded_gauge=True)
    per_step = q.xid_events("$__interval", per_step=True, scan_gauge=False, recorded_gauge=True)
    if in_range is None or per_step is None:
        return
    if q.recorded and q.available("cluster_instance_gpu_xid:gpu_xid_errors:new"):
        gauge = ("dcgm-exporter's last-XID gauge (DCGM_FI_DEV_XID_ERRORS) as the recording "
                 "cluster_instance_gpu_xid:gpu_xid_errors:new notes its events: a new code, or a new err_code "
                 "series, is one event; the return to 0 is none")
        graph_gauge = f"On dcgm-exporter, the events of {gauge.split(' as ', 1)[0]} that the recording notes."
    else:
        gauge = ("dcgm-exporter's last-XID gauge (DCGM_FI_DEV_XID_ERRORS: a change to a code, or a new err_code "
                 "series, is one event; the return to 0 is none)")
        graph_gauge = ("On dcgm-exporter, its own count of XIDs within its window (DCGM_EXP_XID_ERRORS_COUNT, "
                       "optional in its counters CSV): a bar per step while an XID is in that window.")
    source = f"the bundled exporter's per-code counter (gpudash_xid_errors_total), else {gauge}"
    layout.add(table(
        "GPUs with an XID error in range", [Query(f"topk({k}, {in_range})", ref="A")],
        f"GPUs with XID events in the time range, by code (column xid), most events first: {source}. "
        "docs/alerts.md#gpuxiderror says what each code means. Click one to open its node on that GPU.",
        {"A": "XID events"}, "none", color_steps((GREEN, None), (ORANGE, 1), (RED, 2)), links=[node_link(gpu)],
        hide_columns=("__name__",), sort=("XID events", True)), w=12)
    layout.add(timeseries(
        "XID errors by code", [Query(f"sum by (cluster, xid) ({per_step})", "{{cluster}} XID {{xid}}")],
        "none", "XID events in each step of the graph, by code: one bar per event, no smearing over "
                "neighbouring steps, from the bundled exporter's per-code counter. " + graph_gauge,
        None, 0, draw="bars", decimals=0), w=12)
