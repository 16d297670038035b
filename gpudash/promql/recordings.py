"""The recording rules, declared once: what each records, what it reads, and how to build it.

The rule files render each one with an empty scope (`recording_rules`); a dashboard's `PromQL.use` reads the
recorded series, or inlines the same expression with its own scope. Each name follows Prometheus's
level:metric:operations convention.
"""

from __future__ import annotations

from collections.abc import Callable

from gpudash.catalog import BY_DCGM_NAME, BY_KEY, CLOCK_EVENT_REASONS, THERMAL_OR_BRAKE_REASONS, Profile, Signal
from gpudash.promql.alert_states import ALERT_STATES, BUSY_AT_IDLE_POWER
from gpudash.promql.fabric_recordings import FABRIC_RECORDINGS
from gpudash.promql.ledger_recordings import LEDGER_RECORDINGS
from gpudash.promql.query import (
    BAND_WIDTH,
    BANDS,
    FABRIC,
    HEALTH_STATES,
    JOB_STATES,
    THROTTLE_REASONS,
    PromQL,
    Recording,
    Scope,
    any_bit_set,
)
from gpudash.promql.resets import RESET_RECORDINGS, XID_SEEN_LOOKBACK
from gpudash.promql.scanner import metric_names

# rate() window of the NVLink counter in its recording: several scrapes at the usual 15-60 s intervals.
NVLINK_RATE_WINDOW = "5m"


def _by(*labels: str) -> str:
    return f"by ({', '.join(labels)})"


def _fleet_bands(q: PromQL) -> str:
    band = f"clamp_max(floor({q.gpu_once('gpu_util')} / {BAND_WIDTH}) * {BAND_WIDTH}, {BANDS[-1]})"
    return f'count_values {_by("cluster")} ("band", {band})'


def _per_job(record: str, key: str, how: str, help_: str) -> Recording:
    """A job-level recording: `how` (count, sum, median, min, max) of one signal over each job's GPUs."""

    def build(q: PromQL) -> str:
        by = _by("cluster", q.job_label)
        if how == "median":
            return f"quantile {by} (0.5, {q.in_job(key)})"
        return f"{how} {by} ({q.in_job(key)})"

    return Recording(record, (key,), build, help_)


def _job_idle(q: PromQL) -> str:
    level = q.thresholds.alerts.allocated_idle.util_below_percent
    return f"sum {_by('cluster', q.job_label)} ({q.in_job('gpu_util')} < bool {level:g})"


def _from_job_median(q: PromQL, key: str, record: str) -> str:
    """One signal per GPU of a job minus the job's median of it (recorded), both averaged over the window.

    Reading the recorded median keeps this cheap (a subquery of the median cost about three times as
    much at a 1,024-GPU job). A backfill, which evaluates each rule against the raw history alone, inlines the
    medians (gpudash.promql.inline) or writes them in an earlier pass.
    """
    w = q.thresholds.alerts.job_straggler.window
    return (f"  {q.in_job_over_time('avg', key, w)}\n  - on ({q.job}) group_left ()\n"
            f"  {q.recorded_over_time('avg', record, w)}\n")


# The fleet dashboard's lists, recorded: each rule keeps only the GPUs that pass the list's test, so the dashboard
# reads a handful of series at any fleet size instead of testing every GPU's series on every load. Prometheus
# pays the same test once per rule interval (as the alert rules already do theirs).


def _fb_hours_to_full(q: PromQL) -> str:
    """Hours until the framebuffer is full at its growth over the growth window, for GPUs over the memory
    warning level that grew (now against one window ago: two readings per GPU, where deriv() would read every
    sample of the window)."""
    t = q.thresholds
    window = t.alerts.memory_pressure.growth_window
    on = f"on (cluster, instance, {q.gpu})"
    before = q.with_scope(Scope(q.scope.matchers, str(window)))
    used_now, used_before = q.per_gpu(q.metric("fb_used")), q.per_gpu(before.metric("fb_used"))
    growth = f"({used_now} - {used_before}) * {3600 / window.seconds:g} > 0"
    # the ratio as recorded at the head of the group: computing it again would read used and free of every GPU
    full = f"{q.per_gpu(q.recorded_series('cluster_instance_gpu:gpu_fb_used:ratio'))} > {t.memory.warning:g}"
    return f"{q.per_gpu(q.metric('fb_free'))} / {on} ({growth}) and {on} ({full})"


def _sm_clock_throttled(q: PromQL) -> str:
    """SM clock / max SM clock of busy GPUs under 1 - throttle_drop_ratio of their max."""
    t = q.thresholds
    on = f"on (cluster, instance, {q.gpu})"
    ratio = f"{q.per_gpu(q.metric('sm_clock'))} / {on} {q.per_gpu(q.metric('sm_clock_max'))}"
    busy = f"{q.per_gpu(q.metric('gpu_util'))} >= {t.utilization.idle_below_percent:g}"
    return f"{ratio} < {1 - t.throttle_drop_ratio:g} and {on} ({busy})"


def _throttle_reasons_set(q: PromQL) -> str:
    reasons = q.throttle_reasons()
    assert reasons is not None, "built only where the profile has a clock-event signal (Recording.possible)"
    return f"sum by (cluster, instance, {q.gpu}) ({reasons}) > 0"


def _thermal_reason_set(q: PromQL) -> str:
    """1 per GPU with a thermal or power-brake clock event reason set at this evaluation: the bundled exporter's
    per-reason gauge, or the bits of the clock-event mask. GPUThermalThrottling reads it over its window: one
    instant read of the mask per evaluation, where a subquery tested every sample of the window each time."""
    forms = []
    if q.has("clock_event_active"):
        forms.append(f"{q.per_gpu(q.metric('clock_event_active', (THROTTLE_REASONS,)))} > 0")
    if q.has("clock_event_reasons"):
        bits = {name: bit for bit, name in CLOCK_EVENT_REASONS}
        wanted = [bits[name] for name in THERMAL_OR_BRAKE_REASONS]
        # a mask under the lowest wanted bit holds none of them: kept out first, the bit arithmetic then runs on
        # the few GPUs clocked down for a reason, not on every GPU's mask
        mask = f"({q.profile.ref('clock_event_reasons').name} >= {min(wanted)})"
        test = any_bit_set(mask, wanted)
        forms.append(f"{q.per_gpu(test)} > 0")
    return f"({' or '.join(forms)}) * 0 + 1"


# Each temperature sensor: its max operating temperature signal, its name in thresholds.yaml, its recording.
TEMPERATURE_SENSORS = {
    "gpu_temp": ("gpu_max_op_temp", "gpu", "cluster_instance_gpu:gpu_temperature_celsius:near_limit"),
    "hbm_temp": ("mem_max_op_temp", "hbm", "cluster_instance_gpu:gpu_memory_temperature_celsius:near_limit"),
}


def _near_limit(key: str) -> Callable[[PromQL], str]:
    """The GPUs whose median temperature (alerts.temperature.window) is within the margin of their own limit, or
    above the fixed warning level where they publish no limit: GPUHighTemperature's warning, and the only GPUs its
    critical can name (at the limit itself, or above the higher critical level; margins are not negative). The
    medians are taken once per evaluation here, not by each of the alerts. Labelled with the card."""
    limit_key, sensor, _ = TEMPERATURE_SENSORS[key]

    def build(q: PromQL) -> str:
        card = q.profile.card_labels
        median = q.per_gpu(q.over_time("quantile", key, q.thresholds.alerts.temperature.window, "0.5"), *card)
        fixed = f"{median} > {getattr(q.thresholds.temperature, sensor).warning:g}"
        if not q.has(limit_key):
            return fixed
        on = f"on (cluster, instance, {q.gpu})"
        limit = q.gpu_once(limit_key)
        margin = getattr(q.thresholds.temperature, f"{sensor}_margin")
        return f"{median}\n  >= {on}\n  ({limit} - {margin:g})\nor\n(\n  {fixed}\n  unless {on}\n  {limit}\n)"

    return build


def _xid_new(q: PromQL) -> str:
    """1 per GPU and code (`xid`) at each evaluation where the last-XID gauge shows a code it did not show one
    rule interval before: a new XID event. The code comes from dcgm-exporter's err_code label, else from the
    gauge's value. A return to 0 is no event; a job or pod label that changes on the GPU is none either."""
    by = f"max by (cluster, instance, {q.gpu}, err_code)"
    now = f"{by} ({q.metric('xid_last')})"
    before = f"{by} (last_over_time({q.raw_range('xid_last', XID_SEEN_LOOKBACK)} offset {q.rule_interval}))"
    new = f"({now} > 0) unless ({now} == {before})"
    coded = f'count_values by (cluster, instance, {q.gpu}, err_code) ("xid", {new})'
    return q.per_gpu(f'label_replace({coded}, "xid", "$1", "err_code", "(.+)")', "xid")


def _spinning(q: PromQL, profiled: bool) -> str:
    """The GPUs that show a hang's signature at this evaluation (alerts.job_hung): busy by utilization at
    near-idle power (`alert_states.busy_at_idle_power`, recorded first: utilization, power and its limit read
    once for both), and, `profiled`, tensor and DRAM activity idle (GPUs that publish them); not `profiled`,
    power alone (GPUs that publish no tensor activity). Every label of the utilization series is kept (the job,
    its pod, the card), its value is the utilization. GPUJobHung, GPUJobStalled and GPUAllocatedIdle ask
    whether a GPU was here at every evaluation of their windows: one instant read of each signal per
    evaluation, where each of them read every sample of its window of every GPU."""
    h = q.thresholds.alerts.job_hung
    on = f"on (cluster, instance, {q.gpu})"
    spins = q.recorded_series(BUSY_AT_IDLE_POWER)
    if not q.has("tensor_active", "dram_active"):
        return spins
    if not profiled:
        return f"{spins}\nunless {on}\n{q.profile.ref('tensor_active').name}"
    return (f"{spins}\nand {on}\n{q.gpu_once('tensor_active')} < {h.tensor_below_ratio:g}\n"
            f"and {on}\n{q.gpu_once('dram_active')} < {h.dram_below_ratio:g}")


FLEET_LISTS: tuple[Recording, ...] = (
    Recording("cluster_instance_gpu:gpu_fb_hours_to_full:growing", ("fb_used", "fb_free"), _fb_hours_to_full,
              "Per GPU over memory.warning_ratio whose framebuffer grew over "
              "alerts.memory_pressure.growth_window: hours until full at that growth (only such GPUs).",
              filtered=True, group=JOB_STATES),
    Recording("cluster_instance_gpu:gpu_sm_clock_to_max:throttled", ("sm_clock", "sm_clock_max", "gpu_util"),
              _sm_clock_throttled,
              "Per busy GPU whose SM clock is under 1 - clocks.throttle_drop_ratio of its max: SM clock / max "
              "(only such GPUs).", filtered=True, group=HEALTH_STATES),
    Recording("cluster_instance_gpu:gpu_throttle_reasons:count", ("clock_event_active", "clock_events_count"),
              _throttle_reasons_set,
              "Per GPU with a thermal or power-brake clock event reason set now (bundled exporter) or counted in "
              "dcgm-exporter's window: how many (only such GPUs).", filtered=True, any_need=True, group=HEALTH_STATES),
    Recording("cluster_instance_gpu:gpu_thermal_reason:set", ("clock_event_active", "clock_event_reasons"),
              _thermal_reason_set,
              "Per GPU with a thermal or power-brake clock event reason set now (the bundled exporter's gauge or "
              "the bits of the clock-event mask): 1 (only such GPUs).", filtered=True, any_need=True,
              group=HEALTH_STATES),
    *(Recording(record, (key,), _near_limit(key),
                f"Per GPU whose median {sensor.upper()} temperature over alerts.temperature.window is within "
                f"temperature.{sensor}_margin_celsius of its max operating temperature, or above "
                f"temperature.{sensor}_warning_celsius where it publishes none: the median (only such GPUs).",
                filtered=True, group=HEALTH_STATES)
      for key, (_, sensor, record) in TEMPERATURE_SENSORS.items()),
    Recording("cluster_instance_gpu:gpu_reporting:stopped", ("fb_used",),
              lambda q: q.silent_gpus("fb_used", q.thresholds.alerts.exporter_down.lookback),
              "Per GPU that reported within alerts.exporter_down.lookback and reports nothing now: 1 (only such "
              "GPUs).", filtered=True, group=HEALTH_STATES),
    Recording("cluster_instance_gpu:gpu_spinning:profiled", ("gpu_util", "power", "tensor_active", "dram_active"),
              lambda q: _spinning(q, profiled=True),
              "Per GPU that spins now, judged on its profiling: utilization at or above "
              "alerts.job_hung.util_above_percent with tensor activity, DRAM activity and power under the job_hung "
              "levels; its utilization (only such GPUs, every label of the utilization series kept).", filtered=True,
              group=JOB_STATES),
    Recording("cluster_instance_gpu:gpu_spinning:unprofiled", ("gpu_util", "power"),
              lambda q: _spinning(q, profiled=False),
              "Per GPU that publishes no tensor activity and spins now, judged on power alone: utilization at or "
              "above alerts.job_hung.util_above_percent with power under the job_hung levels; its utilization "
              "(only such GPUs, every label of the utilization series kept).", filtered=True, group=JOB_STATES),
    Recording("cluster_instance_gpu_xid:gpu_xid_errors:new", ("xid_last",), _xid_new,
              "Per GPU and XID code (xid): 1 at each evaluation where the last-XID gauge shows a code it did not "
              "show one rule interval before (a new XID event); sum_over_time counts the events of a range.",
              filtered=True, group=HEALTH_STATES),
)


def _job_departure(q: PromQL) -> str:
    # SM activity where a GPU publishes it; `or` adds the utilization departure only for GPUs without it
    by_util = f"(\n{_from_job_median(q, 'gpu_util', 'cluster_job:gpu_utilization:median')})"
    if not q.has("sm_active"):
        return by_util
    return f"100 * (\n{_from_job_median(q, 'sm_active', 'cluster_job:gpu_sm_active:median')})\nor\n{by_util}"


# Per job (the site's job label, gpudash.yaml jobs.label): what the job dashboard and the job alerts read, so
# a 1,024-GPU job costs one series per statistic, not 1,024.
JOB_RECORDINGS: tuple[Recording, ...] = (
    _per_job("cluster_job:gpu_count:count", "gpu_util", "count", "GPUs a job holds (its size), per job."),
    *(_per_job(f"cluster_job:gpu_utilization:{how}", "gpu_util", how, f"The {word} GPU utilization (%) of a job.")
      for how, word in (("median", "median"), ("min", "lowest"), ("max", "highest"))),
    *(_per_job(f"cluster_job:gpu_sm_active:{how}", "sm_active", how, f"The {word} SM activity (ratio) of a job.")
      for how, word in (("median", "median"), ("min", "lowest"), ("max", "highest"))),
    _per_job("cluster_job:gpu_tensor_active:median", "tensor_active", "median",
             "The median tensor-core activity (ratio) of a job."),
    _per_job("cluster_job:gpu_sm_clock_mhz:median", "sm_clock", "median", "The median SM clock (MHz) of a job."),
    _per_job("cluster_job:gpu_power_watts:sum", "power", "sum", "Power draw (W) of a job's GPUs."),
    Recording("cluster_job:gpu_idle:count", ("gpu_util",), _job_idle,
              "A job's GPUs under alerts.allocated_idle.util_below_percent utilization (held idle)."),
    # GPU-seconds per evaluation: sum_over_time of these over any range is the GPU-seconds of that range, exact to
    # one evaluation whatever the group's interval, and reads one sample per evaluation (a subquery of the GPU
    # count would look every series up again at every step). These three read the job counts recorded just before
    # them in the same evaluation, not every GPU's series again.
    Recording("cluster_job:gpu_held_seconds:interval", ("gpu_util",),
              lambda q: f"{q.recorded_series('cluster_job:gpu_count:count')} * {q.rule_interval.seconds:g}",
              "GPU-seconds a job held over one rule interval (its GPU count x the interval): GPU-hours over a range "
              "are sum_over_time / 3600."),
    # Its own evaluation time: min_over_time / max_over_time of it over a range are a job's first and last
    # evaluation in that range, for a job that lasted one evaluation too (a subquery's step can miss it).
    Recording("cluster_job:gpu_held:timestamp", ("gpu_util",),
              lambda q: f"timestamp({q.recorded_series('cluster_job:gpu_count:count')})",
              "The rule evaluation's time (s since the epoch), per job holding GPUs at it: a job's first and last "
              "evaluation in a range are min_over_time and max_over_time of it."),
    Recording("cluster_job:gpu_idle_seconds:interval", ("gpu_util",),
              lambda q: f"{q.recorded_series('cluster_job:gpu_idle:count')} * {q.rule_interval.seconds:g}",
              "GPU-seconds a job held idle over one rule interval (cluster_job:gpu_idle:count x the interval)."),
    # Per GPU of a job, after the job medians it reads: GPUJobStraggler's value, and the job's odd GPUs out.
    Recording("cluster_instance_gpu_job:gpu_activity_departure:points", ("gpu_util",), _job_departure,
              "Per GPU of a job: its SM activity x100 (utilization where it has none) minus the job's median, "
              "both averaged over alerts.job_straggler.window, in points (+ = busier than its peers)."),
)

RECORDINGS: tuple[Recording, ...] = (
    Recording("cluster_instance_gpu:gpu_fb_used:ratio", ("fb_used", "fb_free"),
              lambda q: q.fb_used_ratio_raw(), "Framebuffer used / (used + free), per GPU.", group=JOB_STATES),
    # Per node first: the per-cluster count and power add up the nodes' recorded just before them (each GPU's
    # series once per node), not every GPU's series again.
    Recording("cluster_instance:gpu_count:count", ("gpu_util",),
              lambda q: f"count {_by('cluster', 'instance')} ({q.gpu_once('gpu_util')})",
              "GPUs reporting, per node (the health dashboard's GPUs reporting over its range, on any node chosen)."),
    Recording("cluster_instance:gpu_power_watts:sum", ("power",),
              lambda q: f"sum {_by('cluster', 'instance')} ({q.gpu_once('power')})", "Power draw (W), per node."),
    Recording("cluster:gpu_count:count", ("gpu_util",),
              lambda q: f"sum {_by('cluster')} ({q.earlier('cluster_instance:gpu_count:count')})",
              "GPUs reporting, per cluster."),
    Recording("cluster:gpu_utilization:sum", ("gpu_util",),
              lambda q: f"sum {_by('cluster')} ({q.gpu_once('gpu_util')})",
              "Sum of GPU utilization (%), per cluster; divide by the count for the mean."),
    Recording("cluster:gpu_idle:count", ("gpu_util",),
              lambda q: f"sum {_by('cluster')} ({q.gpu_once('gpu_util')} < bool "
                        f"{q.thresholds.utilization.idle_below_percent:g})",
              "GPUs under the idle utilization level, per cluster."),
    Recording("cluster:gpu_utilization_band:count", ("gpu_util",), _fleet_bands,
              "GPUs per 10 % utilization band, per cluster (the fleet heatmap)."),
    Recording("cluster:gpu_fb_used_mib:sum", ("fb_used",),
              lambda q: f"sum {_by('cluster')} ({q.gpu_once('fb_used')})", "Framebuffer used (MiB), per cluster."),
    Recording("cluster:gpu_fb_total_mib:sum", ("fb_used", "fb_free"),
              lambda q: f"sum {_by('cluster')} ({q.gpu_once('fb_used')} + {q.gpu_once('fb_free')})",
              "Framebuffer used + free (MiB), per cluster."),
    Recording("cluster:gpu_power_watts:sum", ("power",),
              lambda q: f"sum {_by('cluster')} ({q.earlier('cluster_instance:gpu_power_watts:sum')})",
              "Power draw (W), per cluster."),
    Recording("cluster:gpu_temperature_celsius:max", ("gpu_temp",),
              lambda q: f"max {_by('cluster')} ({q.gpu_once('gpu_temp')})", "Hottest GPU (C), per cluster."),
    Recording("cluster:gpu_sm_clock_mhz:avg", ("sm_clock",),
              lambda q: f"avg {_by('cluster')} ({q.gpu_once('sm_clock')})", "Mean SM clock (MHz), per cluster."),
    # Read by fleet panels that would otherwise read every GPU's series over the whole range at each load.
    Recording("cluster:gpu_temperature_celsius:sum", ("gpu_temp",),
              lambda q: f"sum {_by('cluster')} ({q.gpu_once('gpu_temp')})",
              "Sum of GPU temperatures (C), per cluster; divide by the GPU count for the mean."),
    Recording("cluster:gpu_pcie_rx_bytes_per_second:sum", ("pcie_rx",),
              lambda q: f"sum {_by('cluster')} ({q.gpu_once('pcie_rx')})",
              "PCIe receive throughput (B/s), per cluster."),
    Recording("cluster:gpu_pcie_tx_bytes_per_second:sum", ("pcie_tx",),
              lambda q: f"sum {_by('cluster')} ({q.gpu_once('pcie_tx')})",
              "PCIe transmit throughput (B/s), per cluster."),
    # The fleet's real work (dcgm-exporter's default profiling counters) and its NVLink traffic, per cluster.
    Recording("cluster:gpu_tensor_active:avg", ("tensor_active",),
              lambda q: f"avg {_by('cluster')} ({q.gpu_once('tensor_active')})",
              "Mean tensor-pipe activity (ratio), per cluster."),
    Recording("cluster:gpu_sm_active:avg", ("sm_active",),
              lambda q: f"avg {_by('cluster')} ({q.gpu_once('sm_active')})", "Mean SM activity (ratio), per cluster."),
    Recording("cluster:gpu_gr_engine_active:avg", ("gr_engine_active",),
              lambda q: f"avg {_by('cluster')} ({q.gpu_once('gr_engine_active')})",
              "Mean graphics-engine activity (ratio), per cluster: SM activity where a GPU does not publish it."),
    Recording("cluster:gpu_nvlink_bytes_per_second:sum", ("nvlink_bandwidth",),
              lambda q: f"sum {_by('cluster')} "
                        f"({q.per_gpu(q.rate('nvlink_bandwidth', NVLINK_RATE_WINDOW))}) * 1024",
              "NVLink traffic (B/s, both directions, every link), per cluster; the counter is in KiB."),
    Recording("cluster_instance:gpu_utilization:avg", ("gpu_util",),
              lambda q: f"avg {_by('cluster', 'instance')} ({q.gpu_once('gpu_util')})",
              "Mean GPU utilization (%), per node."),
    *JOB_RECORDINGS,
    *ALERT_STATES,  # the states several alerts test, before any recording that reads them
    *FLEET_LISTS,
    *(r.in_group(HEALTH_STATES) for r in RESET_RECORDINGS),  # after the XID-event recording they read
    *(r if r.hourly else r.in_group(HEALTH_STATES) for r in LEDGER_RECORDINGS),
    *(r.in_group(FABRIC) for r in FABRIC_RECORDINGS),
)

RECORDING_BY_NAME: dict[str, Recording] = {r.record: r for r in RECORDINGS}


def signals_in(expr: str, profile: Profile) -> set[Signal]:
    """The catalog signals an expression reads, directly or through a recorded series."""
    names = metric_names(expr)
    by_profile_name = {ref.name: key for key, ref in profile.metrics.items()}
    found: set[Signal] = set()
    for name in names:
        if name in by_profile_name:
            found.add(BY_KEY[by_profile_name[name]])
        elif name in RECORDING_BY_NAME:
            found.update(BY_KEY[k] for k in RECORDING_BY_NAME[name].needs)
        elif name in BY_DCGM_NAME:
            found.add(BY_DCGM_NAME[name])
    return found

