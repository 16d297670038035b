"""The PromQL of each alert, built from the shared `PromQL` builder, the catalog and the thresholds.

Every expression ends in `max by (cluster, instance, <gpu>)` (or `by (cluster, instance)` for a target),
so an alert carries exactly the labels that name one GPU, whatever else the exporter attaches (UUID,
modelName, err_code, pod ...). The job alerts add the site's job label (`by (cluster, instance, <gpu>,
<job label>)` for a GPU of a job, `by (cluster, <job label>)` for a whole job). Every number comes from
thresholds.yaml.

node_exporter's names are not GPU signals, so the catalog has no row for them; they live here, once.
"""

from __future__ import annotations

from gpudash.config.durations import Duration
from gpudash.config.site import Site
from gpudash.escape import promql_matcher
from gpudash.promql.alert_states import FB_GROWING
from gpudash.promql.query import NODE_UNAME, PromQL

NODE_LOAD1 = "node_load1"
NODE_CPU_SECONDS = "node_cpu_seconds_total"
NODE_BOOT_TIME = "node_boot_time_seconds"
UP = "up"  # Prometheus' own per-target health series

# The signal whose disappearance means "this GPU stopped reporting": dcgm-exporter publishes it on every
# GPU (MIG instances included) and nvidia_gpu_exporter has it too. The recording GPUExporterDown reads
# (cluster_instance_gpu:gpu_reporting:stopped) is of the same signal.
PRESENCE_SIGNAL = "fb_used"
# `instance` without its port, so a GPU exporter (host:9400) and node_exporter (host:9100) meet on `host`.
_HOST_FROM_INSTANCE = '"host", "$1", "instance", "(.+?)(?::[0-9]+)?"'
# Binary operators that compare or compute (not `and`/`or`/`unless`): many GPUs of a node meet one node series.
_ARITHMETIC = frozenset({"<", "<=", ">", ">=", "==", "!=", "+", "-", "*", "/"})


class AlertExpressions:
    """Builds each alert's expression for one metric profile, thresholds and site."""

    def __init__(self, q: PromQL, site: Site) -> None:
        self.q = q
        self.t = q.thresholds
        self.a = q.thresholds.alerts
        self.site = site
        self.gpu = f"cluster, instance, {q.gpu}"

    # -- helpers -----------------------------------------------------------------------------------------

    def has(self, *keys: str) -> bool:
        return self.q.has(*keys)

    @property
    def fb_ratio(self) -> str:
        return self.q.fb_used_ratio()

    @property
    def memory_growing(self) -> str:
        """The GPUs whose memory grew across the growth window (`alert_states.memory_growing`), recorded once."""
        return self.q.recorded_series(FB_GROWING)

    # -- alerts ------------------------------------------------------------------------------------------

    def typical(self, key: str, *keep: str) -> str:
        """The median of a signal over the short window: a spike or a dip shorter than half of it is ignored."""
        return self.q.per_gpu(self.q.over_time("quantile", key, self.a.temperature.window, "0.5"), *keep)

    def throttling(self) -> str | None:
        """Hot and clocked down against the recent (or max) clock, or a thermal / power-brake reason set.

        Clock and temperature are medians over the short window and reasons count if set within it, so the
        seconds-long dips of a training job (a data-loader stall cools the die and frees the clock) neither
        reset the `for:` nor make the alert flap.

        Each signal is read once: the median clock is compared with a per-GPU bar, which is no bar at all
        (+Inf) where a reason was set, else the clock it must stay above where the GPU is hot. The reasons
        come from their recording (cluster_instance_gpu:gpu_thermal_reason:set), read over the window.
        """
        if not self.has("sm_clock", "gpu_temp"):
            return None
        keep = 1 - self.t.throttle_drop_ratio
        on = f"on ({self.gpu})"
        peak = self.q.per_gpu(self.q.over_time("max", "sm_clock", self.a.throttling.window))
        if self.has("sm_clock_max"):
            # the higher of the recent peak and the max clock: `or` of the two, told apart by a label, then max
            top = self.q.per_gpu(self.q.metric("sm_clock_max"))
            peak = (f'max by ({self.gpu}) (label_replace({peak}, "peak", "recent", "", "")'
                    f' or label_replace({top}, "peak", "max", "", ""))')
        hot = f"{self.typical('gpu_temp')} >= {self.t.temperature.gpu.warning:g}"
        bar = f"{keep:g} * {peak}\n    and {on}\n    {hot}"
        record = "cluster_instance_gpu:gpu_thermal_reason:set"
        if self.q.available(record):
            reasons = self.q.recorded_over_time("max", record, self.a.temperature.window)
            bar = f"{reasons} * 0 + Inf\n    or {on}\n    {bar}"
        return f"{self.typical('sm_clock')}\n  < {on}\n  (\n    {bar}\n  )"

    def memory_pressure(self, level: float, job: tuple[str, ...] = ()) -> str | None:
        """Over the level and growing, per GPU and per job on it (`job`: the labels that name the job)."""
        if not self.has("fb_used", "fb_free"):
            return None
        return self.q.per_gpu(f"\n  {self.fb_ratio} > {level:g}\n  and\n  {self.memory_growing}\n", *job)

    def memory_leak(self, job: tuple[str, ...] = ()) -> str | None:
        if not self.has("fb_used", "fb_free"):
            return None
        leak = self.a.memory_leak
        # capped at 1: the value shown is "where memory is heading", and nothing exceeds all of it
        projected = f"clamp_max(predict_linear({self.fb_ratio}[{leak.window}], {leak.horizon.seconds}), 1)"
        return self.q.per_gpu(
            f"\n  {projected} >= {self.t.memory.critical:g}\n  and\n  {self.memory_growing}\n", *job
        )

    def job_stalled(self, job: tuple[str, ...] = ()) -> str | None:
        """A GPU holds memory and does no work, whichever way its utilization reads: under the level, or
        spinning (`spinning`) on a GPU no job holds (a job's spinning GPUs are GPUJobHung's, once per job).
        The value is its highest utilization over the window."""
        if not self.has("gpu_util", "fb_used", "fb_free"):
            return None
        s, q = self.a.job_stalled, self.q
        busiest = q.per_gpu(q.over_time("max", "gpu_util", s.window), *job)
        held = q.per_gpu(f"min_over_time({self.fb_ratio}[{s.window}])", *job)
        # ... and already held it a whole window ago, so a job that just started is not judged on a part-window
        before = q.per_gpu(f"{self.fb_ratio} offset {s.window}", *job)
        above = f"{s.memory_above_ratio:g}"
        idle = f"{busiest} < {s.util_below_percent:g}"
        spinning = self.spinning(s.window, job)
        if spinning is not None:
            alone = f"(\n{_indent(spinning)}\n)\nunless on (cluster, instance, {q.gpu})\n{q.in_job_raw('gpu_util')}"
            idle = f"(\n  {idle}\n  or\n  {busiest}\n  and\n  (\n{_indent(alone, 4)}\n  )\n)"
        return f"{idle}\nand\n{held} > {above}\nand\n{before} > {above}"

    # -- hangs: busy by utilization (spin kernels of a hung collective), doing no work -------------------

    def spinning(self, window: Duration, keep: tuple[str, ...], profiled: bool | None = None) -> str | None:
        """Per GPU (and the `keep` labels: its job): busy by utilization at every evaluation of the window while
        doing no work: the GPU was in a spinning recording (cluster_instance_gpu:gpu_spinning:*) at each of them
        but the newest, which the recording group may not have written yet when the alert group reads it. A GPU
        in no job keeps the job labels empty.

        No work is tensor and DRAM activity idle and power near idle where the GPU publishes profiling
        (`profiled` True), power near idle alone where it does not (False); None: either. The value is how
        many evaluations of the window it spun.
        """
        q = self.q
        readings = max(1, window.seconds // q.rule_interval.seconds - 1)
        kinds = {True: ("profiled",), False: ("unprofiled",), None: ("profiled", "unprofiled")}[profiled]
        records = [q.recordings[f"cluster_instance_gpu:gpu_spinning:{kind}"] for kind in kinds]
        counts = [f"count_over_time({q.recorded_series(r.record)}[{window}]) >= {readings}"
                  for r in records if r.possible(q)]
        if not counts:
            return None
        return q.per_gpu(counts[0] if len(counts) == 1 else f"{counts[0]}\nor\n{counts[1]}", *keep)

    def job_hung(self, job: tuple[str, ...], profiled: bool) -> str | None:
        """Per job: at least gpus_ratio of its GPUs spin (`spinning`) for the window, and the job held GPUs a
        window ago. One alert per job (per pod of it on Kubernetes); the value is the share of its GPUs."""
        h, q = self.a.job_hung, self.q
        spinning = self.spinning(h.window, job, profiled=profiled)
        if spinning is None:
            return None
        size = q.use("cluster_job:gpu_count:count")
        share = (f"count by ({q.job}) (\n{_indent(spinning)}\n)\n/ on ({q.job})\n{size}\n"
                 f">= {h.gpus_ratio:g}\nand on ({q.job})\n{size} offset {h.window}")
        named = f"max by (cluster, {', '.join(job)}) ({q.in_job_raw('gpu_util')})"
        return f"{named} * 0\n+ on ({q.job}) group_left ()\n(\n{_indent(share)}\n)"

    def data_loader(self) -> str | None:
        if not self.has("gpu_util"):
            return None
        d = self.a.data_loader
        node = promql_matcher("job", "=", self.site.node_job)
        util = f"{self.q.per_gpu(self.q.over_time('avg', 'gpu_util', d.window))} < {d.util_below_percent:g}"
        load = (
            f"sum by (instance) (avg_over_time({NODE_LOAD1}{{{node}}}[{d.window}]))\n"
            f"      / on (instance)\n"
            f'      count by (instance) ({NODE_CPU_SECONDS}{{{node},mode="idle"}})\n'
            f"      > {d.cpu_load_ratio:g}"
        )
        return self.q.per_gpu(f"\n{_indent(self.on_node(util, 'and', load))}\n")

    def on_node(self, gpu: str, op: str, node: str) -> str:
        """`gpu <op> node`, a GPU series against its node's node_exporter series, matched on a `host` label.

        The GPU side's host is its host-name label where the exporter sets one, else its `instance` without
        the port; node_exporter's is the `nodename` of its node_uname_info where published (so an exporter
        scraped by IP meets one scraped by name), else its `instance` without the port. `node` must keep
        node_exporter's `instance`. A comparison or arithmetic `op` matches many GPUs to one node (group_left).
        """
        hostname = self.q.profile.hostname_label
        gpu_host = f"label_replace(\n  {gpu},\n  {_HOST_FROM_INSTANCE}\n)"
        if hostname:
            gpu_host = f'label_replace(\n{_indent(gpu_host)},\n  "host", "$1", "{hostname}", "(.+)"\n)'
        uname = f"{NODE_UNAME}{{{promql_matcher('job', '=', self.site.node_job)}}}"
        node = f"({node})" if NL not in node else f"(\n{_indent(node)}\n)"  # `*` binds tighter than a comparison
        named = (f"label_replace(\n  {node}\n  * on (instance) group_left (nodename)\n"
                 f"  max by (instance, nodename) ({uname}),\n  \"host\", \"$1\", \"nodename\", \"(.+)\"\n)")
        by_instance = f"label_replace(\n  {node}\n  unless on (instance)\n  {uname},\n  {_HOST_FROM_INSTANCE}\n)"
        match = f"{op} on (host){' group_left ()' if op in _ARITHMETIC else ''}"
        return f"{gpu_host}\n{match}\n(\n{_indent(named)}\n  or\n{_indent(by_instance)}\n)"

    def exporter_down(self) -> str:
        """The exporter target is down (no gpu label), or one GPU stopped reporting on a target that is up."""
        return f"{self.target_down()}\nor\n{self.gpu_silent()}"

    def up(self) -> str:
        """Prometheus' health series of the GPU exporters' scrape job."""
        return f"{UP}{{{promql_matcher('job', '=', self.site.scrape_job)}}}"

    def target_down(self) -> str:
        return f"max by (cluster, instance) ({self.up()}) == 0"

    def gpu_silent(self) -> str:
        """A GPU seen within the lookback that reports nothing now, on a target that is itself up.

        The lookback tells "stopped reporting" from "never existed": a GPU silent for longer drops out. The
        fleet dashboard's recording holds exactly those GPUs (of PRESENCE_SIGNAL, over the same lookback), so
        the alert reads it rather than every GPU's series over the lookback a second time.
        """
        stopped = self.q.use("cluster_instance_gpu:gpu_reporting:stopped")
        down = f"{self.up()} == 0"
        parts = [f"(\n  {stopped}\n  unless on (cluster, instance)\n  {down}\n)"]
        if self.has("gpu_up"):
            parts.append(f"{self.q.per_gpu(self.q.metric('gpu_up'))} == 0")
        return f"{NL}or{NL}".join(parts)

    # -- job alerts: every GPU of a job against the job's own median (the job recordings) ---------------

    def job_settled(self) -> str:
        """Per job: at least min_gpus GPUs, the same number for the whole window and a window ago, and busy.

        A job that is starting or ending has GPUs joining or leaving; a job that is idle as a whole (loading,
        evaluating on one rank) has no pace to fall behind. Neither is judged.
        """
        s, q = self.a.job_straggler, self.q
        size = q.use("cluster_job:gpu_count:count")
        fewest = q.recorded_over_time("min", "cluster_job:gpu_count:count", s.window)
        most = q.recorded_over_time("max", "cluster_job:gpu_count:count", s.window)
        busy = q.recorded_over_time("avg", "cluster_job:gpu_utilization:median", s.window)
        return f"\nand on ({q.job})\n".join((
            f"{size} >= {s.min_gpus}", f"{fewest} == {most}", f"{size} offset {s.window}",
            f"{busy} > {s.busy_above_percent:g}"))

    def job_clock_behind(self) -> str | None:
        """Per GPU of a job: its SM clock over the window is more than clock_below_ratio below the job's median."""
        if not self.has("sm_clock"):
            return None
        s, q = self.a.job_straggler, self.q
        clock = q.in_job_over_time("avg", "sm_clock", s.window)
        median = q.recorded_over_time("avg", "cluster_job:gpu_sm_clock_mhz:median", s.window)
        return f"{clock}\n< on ({q.job}) group_left ()\n{1 - s.clock_below_ratio:g} * {median}"

    def job_straggler(self) -> str | None:
        """A GPU of a settled, busy job departs from the job's median: clock behind, or activity off either way.

        The activity departure is recorded per GPU (SM activity, utilization where a GPU has none: each GPU is
        judged on one of the two, never both) and is the alert's value, + when the GPU is busier than its
        peers: a slowed GPU computes longer while its peers wait in collectives. Everything is relative to the
        job's median, so a dip of the whole job (loading, checkpoint, evaluation) moves the median with it
        and departs from nothing.
        """
        if not self.has("gpu_util"):
            return None
        q = self.q
        departure = q.use("cluster_instance_gpu_job:gpu_activity_departure:points")
        odd = [f"abs({departure}) > {self.a.job_straggler.activity_points:g}"]
        clock = self.job_clock_behind()
        if clock is not None:
            odd.append(clock)
        parts = (departure, f"and on ({q.job_gpu})", f"(\n{_indent(_or(odd))}\n)",
                 f"and on ({q.job})", f"(\n{_indent(self.job_settled())}\n)")
        return f"max by ({q.job_gpu}) (\n{_indent(NL.join(parts))}\n)"

    def allocated_idle(self) -> str | None:
        """Per job: how many of its GPUs stayed under the level for the whole window (held a window ago too)."""
        if not self.has("gpu_util"):
            return None
        i, q = self.a.allocated_idle, self.q
        busiest = q.in_job_over_time("max", "gpu_util", i.window)
        idle = f"{busiest} < {i.util_below_percent:g}"
        # a GPU that spun for the whole window (a hung collective) did no work either: it counts as idle
        spinning = self.spinning(i.window, (q.job_label,))
        if spinning is not None:
            idle = f"(\n    {idle}\n    or\n{_indent(spinning, 4)}\n  )"
        # the raw series: only its presence a window ago counts (and offset takes no parentheses)
        held_before = f"max by ({q.job_gpu}) ({q.in_job_raw('gpu_util')} offset {i.window})"
        return (f"count by ({q.job}) (\n  {idle}\n"
                f"  and on ({q.job_gpu})\n  {held_before}\n)")


NL = "\n"


def _indent(text: str, spaces: int = 2) -> str:
    return NL.join(" " * spaces + line if line else line for line in text.splitlines())


def _or(parts: list[str]) -> str:
    return f"{NL}or{NL}".join(parts)
