"""The PromQL query builder shared by the dashboards, the rules and the live check.

A `PromQL` is bound to a metric profile, the thresholds, the site's job label and rule interval, the
recording rules (gpudash.promql.recordings) and a *scope*: the label matchers a panel adds
(`cluster=~"$cluster"` on the fleet dashboard, and `instance`, `gpu` on the node dashboard; none in rule
files). Names come from the catalog only. Make one from a site's settings with `gpudash.promql.for_settings.promql_for`.

A dashboard either reads a recorded series (`recorded=True`, the default) or inlines the expression the
recording rule records, with its own scope (`recorded=False`, used to measure what the rules save).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from gpudash.catalog import HPC_JOB_LABEL, THERMAL_OR_BRAKE_REASONS, Profile
from gpudash.config.durations import Duration, parse_duration
from gpudash.config.thresholds import Thresholds
from gpudash.escape import promql_matcher, re2_any

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
# The interval of the hourly recordings' own group: each records the hour before its evaluation.
HOURLY = parse_duration("1h")
# The rule groups the recordings evaluated every rule interval are split into (`Recording.group`). Prometheus
# evaluates the groups side by side and the rules of one group one after another, so each group's evaluation,
# not their sum, must fit in the interval: at 8,192 GPUs a single group of them took about half of it. A
# recording reads only recordings of its own group listed before it (the same evaluation's answer).
AGGREGATES = "aggregates"  # per cluster, node and job: what the fleet and job dashboards draw
JOB_STATES = "job-states"  # per GPU: memory growth and the hang signature, which the job alerts read
HEALTH_STATES = "health-states"  # per GPU: XID events, resets, temperature, clocks, NVLink, reporting
FABRIC = "fabric"  # per port, node, GPU and job: InfiniBand / RoCE


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
    # Evaluated once an hour, in a group of its own (`HOURLY`), not every rule interval: what it records is the
    # hour before each evaluation (the health ledger's rises), so its evaluations tile the time.
    hourly: bool = False
    # Which of the rule-interval groups it is evaluated in (AGGREGATES, JOB_STATES, HEALTH_STATES, FABRIC).
    group: str = AGGREGATES

    def possible(self, q: PromQL) -> bool:
        """Whether this profile has what the rule reads."""
        return any(q.has(k) for k in self.needs) if self.any_need else q.has(*self.needs)

    def in_group(self, group: str) -> Recording:
        return replace(self, group=group)

    def interval(self, rule_interval: Duration) -> Duration:
        """How often Prometheus evaluates it, where the other recording rules run every `rule_interval`."""
        return HOURLY if self.hourly else rule_interval


class PromQL:
    def __init__(self, profile: Profile, thresholds: Thresholds, recordings: Mapping[str, Recording],
                 scope: Scope = NO_SCOPE, recorded: bool = True, job_label: str = HPC_JOB_LABEL,
                 rule_interval: Duration = RULE_INTERVAL, rule_file: bool = False) -> None:
        self.profile = profile
        self.thresholds = thresholds
        self.recordings = recordings  # by recorded name: what `use` reads or inlines
        self.scope = scope
        self.recorded = recorded
        self.job_label = job_label  # the site's label that names a job (gpudash.yaml jobs.label)
        # How often the recording rules are evaluated (their group's interval: the site's scrape interval).
        self.rule_interval = rule_interval
        # Building the recording rule file (recorded=False there too): `earlier` reads the recorded series.
        self.rule_file = rule_file

    def with_scope(self, scope: Scope) -> PromQL:
        return PromQL(self.profile, self.thresholds, self.recordings, scope, self.recorded, self.job_label,
                      self.rule_interval, self.rule_file)

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

    def recorded_series(self, record: str) -> str:
        """A recorded series, always the recorded one: for a recording that reads one its group writes first."""
        return f"{self.recordings[record].record}{self.scope.selector()}"

    def earlier(self, record: str) -> str:
        """A recording its group evaluates before the one being built: the recorded series in the rule file and
        where dashboards read recorded series, its expression where they run without recording rules."""
        rec = self.recordings[record]
        if self.rule_file or self.recorded:
            return f"{rec.record}{self.scope.selector()}"
        return rec.build(self)

    def recorded_over_time(self, func: str, record: str, window: Duration | str, at: str = "") -> str:
        """`func_over_time` of a recorded series: always the recorded one (a range needs a selector); `at`
        pins the window's end (`end()`: the query's end at every step)."""
        pinned = f" @ {at}" if at else ""
        return f"{func}_over_time({self.recordings[record].record}{self.scope.selector()}[{window}]{pinned})"

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
        rec = self.recordings[record]
        if self.recorded:
            return f"{rec.record}{self.scope.selector()}"
        return rec.build(self)

    def available(self, record: str) -> bool:
        return self.recordings[record].possible(self)

    # -- expressions used in several places -------------------------------------------------------------

    def fb_used_ratio_raw(self) -> str:
        # dcgm-exporter's default counters carry no FB_TOTAL: the total is used + free.
        used = self.metric("fb_used")
        return f"{used} / ({used} + {self.metric('fb_free')})"

    def fb_used_ratio(self) -> str:
        return self.use("cluster_instance_gpu:gpu_fb_used:ratio")

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

    def increase(self, key: str, window: Duration | str) -> str:
        """How much one counter rose over `window` with the scope's matchers (resets counted), converted."""
        return self._range("increase", key, window, ())

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

    def new_codes(self, key: str, step: str) -> str:
        """A code gauge (a last XID) per GPU at the steps it changed to a code only: the gauge itself holds its
        code for as long as the exporter runs."""
        on = f"on (cluster, instance, {self.gpu})"
        now = self.per_gpu(self.metric(key))
        before = self.per_gpu(f"{self.profile.ref(key).name}{Scope(self.scope.matchers).selector()} offset {step}")
        return f"({now} > 0) unless {on} ({now} == {on} {before})"

    def raw_range(self, key: str, window: str) -> str:
        """One signal's selector over a range, unconverted (counters and codes need no unit)."""
        return f"{self.profile.ref(key).name}{Scope(self.scope.matchers).selector()}[{window}]"

    def utilization_bands(self) -> str:
        """GPUs per 10 % utilization band over the selected clusters, every band present (0 where no GPU
        sits in it), so the heatmap's rows neither merge clusters' labels nor shift when a band empties."""
        zeros = " or ".join(f'label_replace(vector(0), "band", "{band}", "", "")' for band in BANDS)
        return f"sum by (band) ({self.use('cluster:gpu_utilization_band:count')}) or on (band) ({zeros})"


# Ten 10 %-wide utilization bands (0-9 ... 90-100): one series per band however many GPUs there are.
BAND_WIDTH = 10
BANDS = tuple(str(band) for band in range(0, 100, BAND_WIDTH))
# Prometheus's series of the alerts it evaluates (alertname, alertstate, and the alert's labels).
ALERTS = "ALERTS"
UP = "up"  # Prometheus's health series of each scrape target
NODE_UNAME = "node_uname_info"  # node_exporter: its `nodename` label is the node's host name, whatever its `instance`


def any_bit_set(x: str, bits: list[int]) -> str:
    """> 0 where any of `bits` (powers of two) is set in `x`, reading `x` once where the bits allow it.

    PromQL has no bitwise AND: bit b of x is floor(x / b) % 2, one read of x per bit, which a subquery repeats at
    every step. One read: z = floor(x / lowest) % (2 * highest / lowest) holds the bits from the lowest wanted
    to the highest; none of the wanted is set exactly when z is made of the others only, 0 or (with one other
    bit u) u, that is where |z - u/2| == u/2.
    """
    low, high = min(bits), max(bits)
    others = [b // low for b in (low << i for i in range((high // low).bit_length())) if b not in bits]
    z = f"floor({x} / {low}) % {2 * high // low}"
    if not others:
        return f"{z} > bool 0"
    if len(others) == 1:
        return f"abs({z} - {others[0] / 2:g}) != bool {others[0] / 2:g}"
    return " + ".join(f"floor({x} / {b}) % 2" for b in bits)
