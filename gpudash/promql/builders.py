"""PromQL builders shared by the dashboards, the rules and the live check.

A `PromQL` is bound to a metric profile, the thresholds and a *scope*: the label matchers a panel adds
(`cluster=~"$cluster"` on the fleet dashboard, and `instance`, `gpu` on the node dashboard; none in rule
files). Names come from the catalog only.

Recording rules are declared once, in `RECORDINGS`: the rule files render each one with an empty scope,
and a dashboard either reads the recorded series (`recorded=True`, the default) or inlines the same
expression with its own scope (`recorded=False`, used to measure what the rules save).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpudash.catalog import BY_DCGM_NAME, BY_KEY, HPC_JOB_LABEL, THERMAL_OR_BRAKE_REASONS, Profile, Signal
from gpudash.config.durations import Duration, parse_duration
from gpudash.config.thresholds import Thresholds
from gpudash.escape import promql_matcher, re2_any
from gpudash.promql.scanner import metric_names

Matcher = tuple[str, str, str]  # (label, operator, value)
# The clock-event reasons that mean the GPU is slowed by heat or a power brake (not idle, not a cap it chose).
THROTTLE_REASONS: Matcher = ("clock_event", "=~", re2_any(THERMAL_OR_BRAKE_REASONS))


@dataclass(frozen=True)
class Scope:
    """Label matchers every selector of a panel carries."""

    matchers: tuple[Matcher, ...] = ()
    offset: str = ""  # e.g. "1d": every selector looks back this far (the "same time yesterday" panels)

    def selector(self, extra: tuple[Matcher, ...] = ()) -> str:
        parts = [promql_matcher(label, op, value) for label, op, value in (*self.matchers, *extra)]
        text = "{" + ",".join(parts) + "}" if parts else ""
        return f"{text} offset {self.offset}" if self.offset else text


NO_SCOPE = Scope()
# The recording rules' evaluation interval where a site says nothing: the default scrape interval.
RULE_INTERVAL = parse_duration("15s")


def dashboard_scope(profile: Profile, level: str) -> Scope:
    """Matchers for a dashboard: `fleet` filters by $cluster, `health` by $cluster and $instance, `node` by
    $cluster, $instance and $gpu."""
    matchers: list[Matcher] = [("cluster", "=~", "$cluster")]
    if level == "node":
        matchers += [("instance", "=~", "$instance"), (profile.gpu_label, "=~", "$gpu")]
    elif level == "health":
        matchers += [("instance", "=~", "$instance")]
    elif level != "fleet":
        raise ValueError(f"unknown dashboard level {level!r}")
    return Scope(tuple(matchers))


@dataclass(frozen=True)
class Recording:
    """A recording rule: its name (level:metric:operations), what it needs, and how to build it."""

    record: str
    needs: tuple[str, ...]
    build: Callable[[PromQL], str]
    help: str
    # A list: only the series that pass a test (GPUs throttled now); none recorded is the healthy answer.
    filtered: bool = False
    # Buildable from any one of `needs` (dcgm-exporter's signal or the bundled exporter's), not all of them.
    any_need: bool = False

    def possible(self, q: PromQL) -> bool:
        """Whether this profile has what the rule reads."""
        return any(q.has(k) for k in self.needs) if self.any_need else q.has(*self.needs)


class PromQL:
    def __init__(self, profile: Profile, thresholds: Thresholds, scope: Scope = NO_SCOPE,
                 recorded: bool = True, job_label: str = HPC_JOB_LABEL,
                 rule_interval: Duration = RULE_INTERVAL) -> None:
        self.profile = profile
        self.thresholds = thresholds
        self.scope = scope
        self.recorded = recorded
        self.job_label = job_label  # the site's label that names a job (gpudash.yaml jobs.label)
        # How often the recording rules are evaluated (their group's interval: the site's scrape interval).
        self.rule_interval = rule_interval

    def with_scope(self, scope: Scope) -> PromQL:
        return PromQL(self.profile, self.thresholds, scope, self.recorded, self.job_label, self.rule_interval)

    def per_gpu(self, expr: str, *keep: str) -> str:
        """One series per GPU, whatever job or pod labels come and go on it.

        dcgm-exporter and the bundled exporter add `hpc_job` / `pod` / `namespace` / `container` to a GPU's
        series, one copy per job: a GPU whose job changes (or that two jobs share) would otherwise draw two
        lines, be counted twice, or take two places of a topk. The copies carry the same reading, so `max`
        keeps it. `keep` names further labels to keep apart (an XID code).
        """
        return f"max by ({', '.join(('cluster', 'instance', self.gpu, *keep))}) ({expr})"

    def gpu_once(self, key: str) -> str:
        """One signal, one series per GPU (`per_gpu`): a GPU two jobs share is counted, summed, averaged once."""
        return self.per_gpu(self.metric(key))

    def in_job(self, key: str) -> str:
        """One signal on the GPUs that a job holds (their job label set)."""
        return self.metric(key, ((self.job_label, "!=", ""),))

    @property
    def job(self) -> str:
        """The labels of one job of one cluster: how the job recordings are keyed."""
        return f"cluster, {self.job_label}"

    @property
    def job_gpu(self) -> str:
        """The labels of one GPU of one job (a GPU shared by two jobs is one series per job)."""
        return f"cluster, instance, {self.gpu}, {self.job_label}"

    def in_job_raw(self, key: str) -> str:
        """One signal's selector on the GPUs a job holds, unconverted (for a range, or presence)."""
        held = Scope(self.scope.matchers).selector(((self.job_label, "!=", ""),))
        return f"{self.profile.ref(key).name}{held}"

    def in_job_over_time(self, func: str, key: str, window: Duration) -> str:
        """`func_over_time` of one signal on the GPUs a job holds, one series per GPU and job, converted."""
        ref = self.profile.ref(key)
        shift = f" offset {self.scope.offset}" if self.scope.offset else ""
        inner = f"{func}_over_time({self.in_job_raw(key)}[{window}]{shift})"
        return f"max by ({self.job_gpu}) ({f'({inner} {ref.convert})' if ref.convert else inner})"

    def recorded_over_time(self, func: str, record: str, window: Duration | str) -> str:
        """`func_over_time` of a recorded series: always the recorded one (a range needs a selector)."""
        return f"{func}_over_time({RECORDING_BY_NAME[record].record}{self.scope.selector()}[{window}])"

    def has(self, *keys: str) -> bool:
        return all(self.profile.has(k) for k in keys)

    @property
    def gpu(self) -> str:
        return self.profile.gpu_label

    def metric(self, key: str, extra: tuple[Matcher, ...] = ()) -> str:
        """One signal with the scope's matchers, converted to the DCGM unit."""
        ref = self.profile.ref(key)
        text = f"{ref.name}{self.scope.selector(extra)}"
        return f"({text} {ref.convert})" if ref.convert else text

    def use(self, record: str) -> str:
        """A recorded series, or the expression it records when dashboards run without recording rules."""
        rec = RECORDING_BY_NAME[record]
        if self.recorded:
            return f"{rec.record}{self.scope.selector()}"
        return rec.build(self)

    def available(self, record: str) -> bool:
        return RECORDING_BY_NAME[record].possible(self)

    # -- expressions used in several places -------------------------------------------------------------

    def fb_used_ratio_raw(self) -> str:
        # dcgm-exporter's default counters carry no FB_TOTAL: the total is used + free.
        used = self.metric("fb_used")
        return f"{used} / ({used} + {self.metric('fb_free')})"

    def fb_used_ratio(self) -> str:
        return self.use("cluster_instance_gpu:gpu_fb_used:ratio")

    def throttled(self) -> str:
        """1 per GPU while a thermal or power-brake clock event reason is set (bundled exporter only)."""
        active = self.metric("clock_event_active", (THROTTLE_REASONS,))
        return f"max by (cluster, instance, {self.gpu}) ({active})"

    def throttle_reasons(self) -> str | None:
        """Per GPU and thermal or power-brake reason (`clock_event`): 1 while the bundled exporter sees it set,
        else dcgm-exporter's count of that reason's events in its window (DCGM_EXP_CLOCK_EVENTS_COUNT)."""
        keep = ("clock_event",)
        parts = [self.per_gpu(self.metric(key, (THROTTLE_REASONS,)), *keep)
                 for key in ("clock_event_active", "clock_events_count") if self.has(key)]
        return f" or on (cluster, instance, {self.gpu}, clock_event) ".join(parts) or None

    def over_time(self, func: str, key: str, window: Duration | str, *params: str) -> str:
        """`<func>_over_time` of one signal with the scope's matchers (`avg`, `max`, `quantile` with its
        `params`), converted to the DCGM unit after it (conversions are positive scales)."""
        return self._range(f"{func}_over_time", key, window, params)

    def rate(self, key: str, window: Duration | str) -> str:
        """The per-second rate of one counter with the scope's matchers, converted to the DCGM unit."""
        return self._range("rate", key, window, ())

    def _range(self, function: str, key: str, window: Duration | str, params: tuple[str, ...]) -> str:
        ref = self.profile.ref(key)
        shift = f" offset {self.scope.offset}" if self.scope.offset else ""
        args = "".join(f"{p}, " for p in params)
        inner = f"{function}({args}{ref.name}{Scope(self.scope.matchers).selector()}[{window}]{shift})"
        return f"({inner} {ref.convert})" if ref.convert else inner

    def by_gpu_index(self, expr: str) -> str:
        """Series of one GPU each, ordered by GPU index: Prometheus orders a range result by its labels as
        text ("10" before "2"), so a one-digit index is written with a leading 0 ("02")."""
        gpu = self.gpu
        return f'label_replace({expr}, "{gpu}", "0$1", "{gpu}", "([0-9])")'

    def xid_events(self, window: str, per_step: bool = False, scan_gauge: bool = True,
                   recorded_gauge: bool = False) -> str | None:
        """XID events per GPU and code (`xid`) within `window`: the bundled exporter's per-code counter where
        a GPU has one, else dcgm-exporter's last-XID gauge.

        The counter's events are its value now minus its value a window ago (exact, and windows that abut
        count each event once), or its value where its code first appeared within the window. The gauge holds
        the last code: a new event changes it, and a return to 0 is no event, so over a range the events are
        half its changes, rounded up; where dcgm-exporter labels it with err_code, a new code starts a new,
        constant series: one event where it appeared within the window holding a code. `per_step`: at most
        one gauge event per window (a step of a graph), 1 where the code differs from the window before.
        `scan_gauge=False` (a fleet's graph: reading every GPU's gauge at every step costs seconds at a
        thousand GPUs) reads dcgm-exporter's own count of XIDs in its window (DCGM_EXP_XID_ERRORS_COUNT)
        instead of the gauge: only GPUs with an XID have that series. `recorded_gauge` (with recording rules)
        counts the gauge's events that the recording cluster_instance_gpu_xid:gpu_xid_errors:new noted within
        the window instead: exact per window, the code in `xid` also without err_code, and only GPUs that had
        an XID are read.
        """
        by = ("cluster", "instance", self.gpu)
        parts = []
        if self.has("xid_total"):
            counter = self.metric("xid_total")
            before = f"{counter} offset {window}"
            # A counter that appeared within the window counts from 0 (the exporter may publish a code at 0).
            parts.append(self.per_gpu(f"({counter} - {before}) > 0 or ({counter} unless {before}) > 0", "xid"))
        if recorded_gauge and self.recorded and self.available("cluster_instance_gpu_xid:gpu_xid_errors:new"):
            parts.append(f"{self.recorded_over_time('sum', 'cluster_instance_gpu_xid:gpu_xid_errors:new', window)} > 0")
        elif not scan_gauge:
            if self.has("xid_count_window"):
                parts.append(self.per_gpu(f"{self.metric('xid_count_window')} > 0", "xid"))
        elif self.has("xid_last"):
            gauge = self.metric("xid_last")
            if per_step:
                # Filter to the GPUs showing a code first: at every step of a range the comparison with a
                # window ago then matches a handful of series, not the fleet's.
                showing = f"({gauge} > 0)"
                new = f"clamp_max({showing} unless ({gauge} offset {window} == {showing}), 1)"
            else:
                rises = f"ceil(changes({self.raw_range('xid_last', window)}) / 2) > 0"
                new = f"{rises} or clamp_max(({gauge} > 0) unless {gauge} offset {window}, 1)"
            parts.append(self.per_gpu(f'label_replace({new}, "xid", "$1", "err_code", "(.+)")', "xid"))
        return f" or on ({', '.join(by)}) ".join(parts) or None

    def silent_gpus(self, key: str, lookback: Duration) -> str:
        """1 per GPU that reported `key` within the lookback and reports nothing now (GPUExporterDown's
        "stopped reporting"; a GPU silent for longer than the lookback drops out)."""
        seen = self.per_gpu(f"present_over_time({self.raw_range(key, str(lookback))})")
        # `== 1` keeps every such GPU (present_over_time is 1); it tells the live check an empty answer is
        # "none passes the filter", a healthy fleet, not missing data.
        return f"({seen} unless {self.per_gpu(self.metric(key))}) == 1"

    def raw_range(self, key: str, window: str) -> str:
        """One signal's selector over a range, unconverted (counters and codes need no unit)."""
        return f"{self.profile.ref(key).name}{Scope(self.scope.matchers).selector()}[{window}]"

    def utilization_bands(self) -> str:
        """GPUs per 10 % utilization band over the selected clusters, every band present (0 where no GPU
        sits in it), so the heatmap's rows neither merge clusters' labels nor shift when a band empties."""
        zeros = " or ".join(f'label_replace(vector(0), "band", "{band}", "", "")' for band in BANDS)
        return f"sum by (band) ({self.use('cluster:gpu_utilization_band:count')}) or on (band) ({zeros})"


def _by(*labels: str) -> str:
    return f"by ({', '.join(labels)})"


# Ten 10 %-wide utilization bands (0-9 ... 90-100): one series per band however many GPUs there are.
BAND_WIDTH = 10
BANDS = tuple(str(band) for band in range(0, 100, BAND_WIDTH))
# rate() window of the NVLink counter in its recording: several scrapes at the usual 15-60 s intervals.
NVLINK_RATE_WINDOW = "5m"
# Prometheus's series of the alerts it evaluates (alertname, alertstate, and the alert's labels).
ALERTS = "ALERTS"
UP = "up"  # Prometheus's health series of each scrape target


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
    much at a 1,024-GPU job); the price is that a backfill (promtool tsdb create-blocks-from rules) must
    write the job medians before this rule, in a second pass.
    """
    w = q.thresholds.alerts.job_straggler.window
    return (f"  {q.in_job_over_time('avg', key, w)}\n  - on ({q.job}) group_left ()\n"
            f"  {q.recorded_over_time('avg', record, w)}\n")


# The fleet dashboard's lists, recorded: each rule keeps only the GPUs that pass the list's test, so the dashboard
# reads a handful of series at any fleet size instead of testing every GPU's series on every load. Prometheus
# pays the same test once per rule interval (as the alert rules already do theirs).

# How far back the XID-event recording looks for the code a GPU showed before: an exporter that restarts within
# this long does not count its GPUs' standing codes as new events.
XID_SEEN_LOOKBACK = "15m"


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
    full = f"{q.per_gpu(q.fb_used_ratio())} > {t.memory.warning:g}"
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


FLEET_LISTS: tuple[Recording, ...] = (
    Recording("cluster_instance_gpu:gpu_fb_hours_to_full:growing", ("fb_used", "fb_free"), _fb_hours_to_full,
              "Per GPU over memory.warning_ratio whose framebuffer grew over "
              "alerts.memory_pressure.growth_window: hours until full at that growth (only such GPUs).",
              filtered=True),
    Recording("cluster_instance_gpu:gpu_sm_clock_to_max:throttled", ("sm_clock", "sm_clock_max", "gpu_util"),
              _sm_clock_throttled,
              "Per busy GPU whose SM clock is under 1 - clocks.throttle_drop_ratio of its max: SM clock / max "
              "(only such GPUs).", filtered=True),
    Recording("cluster_instance_gpu:gpu_throttle_reasons:count", ("clock_event_active", "clock_events_count"),
              _throttle_reasons_set,
              "Per GPU with a thermal or power-brake clock event reason set now (bundled exporter) or counted in "
              "dcgm-exporter's window: how many (only such GPUs).", filtered=True, any_need=True),
    Recording("cluster_instance_gpu:gpu_reporting:stopped", ("fb_used",),
              lambda q: q.silent_gpus("fb_used", q.thresholds.alerts.exporter_down.lookback),
              "Per GPU that reported within alerts.exporter_down.lookback and reports nothing now: 1 (only such "
              "GPUs).", filtered=True),
    Recording("cluster_instance_gpu_xid:gpu_xid_errors:new", ("xid_last",), _xid_new,
              "Per GPU and XID code (xid): 1 at each evaluation where the last-XID gauge shows a code it did not "
              "show one rule interval before (a new XID event); sum_over_time counts the events of a range.",
              filtered=True),
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
    # count would look every series up again at every step).
    Recording("cluster_job:gpu_held_seconds:interval", ("gpu_util",),
              lambda q: f"count {_by('cluster', q.job_label)} ({q.in_job('gpu_util')}) * {q.rule_interval.seconds:g}",
              "GPU-seconds a job held over one rule interval (its GPU count x the interval): GPU-hours over a range "
              "are sum_over_time / 3600."),
    Recording("cluster_job:gpu_idle_seconds:interval", ("gpu_util",),
              lambda q: f"{_job_idle(q)} * {q.rule_interval.seconds:g}",
              "GPU-seconds a job held idle over one rule interval (cluster_job:gpu_idle:count x the interval)."),
    # Per GPU of a job, after the job medians it reads: GPUJobStraggler's value, and the job's odd GPUs out.
    Recording("cluster_instance_gpu_job:gpu_activity_departure:points", ("gpu_util",), _job_departure,
              "Per GPU of a job: its SM activity x100 (utilization where it has none) minus the job's median, "
              "both averaged over alerts.job_straggler.window, in points (+ = busier than its peers)."),
)

RECORDINGS: tuple[Recording, ...] = (
    Recording("cluster_instance_gpu:gpu_fb_used:ratio", ("fb_used", "fb_free"),
              lambda q: q.fb_used_ratio_raw(), "Framebuffer used / (used + free), per GPU."),
    Recording("cluster:gpu_count:count", ("gpu_util",),
              lambda q: f"count {_by('cluster')} ({q.gpu_once('gpu_util')})", "GPUs reporting, per cluster."),
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
              lambda q: f"sum {_by('cluster')} ({q.gpu_once('power')})", "Power draw (W), per cluster."),
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
    Recording("cluster_instance:gpu_power_watts:sum", ("power",),
              lambda q: f"sum {_by('cluster', 'instance')} ({q.gpu_once('power')})", "Power draw (W), per node."),
    *JOB_RECORDINGS,
    *FLEET_LISTS,
)

RECORDING_BY_NAME: dict[str, Recording] = {r.record: r for r in RECORDINGS}


def recording_rules(profile: Profile, thresholds: Thresholds, job_label: str = HPC_JOB_LABEL,
                    interval: Duration = RULE_INTERVAL) -> list[tuple[Recording, str]]:
    """Every recording rule this profile can fill, with its expression as it goes into a rule file evaluated
    every `interval`."""
    q = PromQL(profile, thresholds, NO_SCOPE, recorded=False, job_label=job_label, rule_interval=interval)
    return [(rec, rec.build(q)) for rec in RECORDINGS if rec.possible(q)]


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

