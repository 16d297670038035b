"""The PromQL of each alert, built from the shared `PromQL` builder, the catalog and the thresholds.

Every expression ends in `max by (cluster, instance, <gpu>)` (or `by (cluster, instance)` for a target),
so an alert carries exactly the labels that name one GPU, whatever else the exporter attaches (UUID,
modelName, err_code, pod ...). The job alerts add the site's job label (`by (cluster, instance, <gpu>,
<job label>)` for a GPU of a job, `by (cluster, <job label>)` for a whole job). Every number comes from
thresholds.yaml.

node_exporter's names are not GPU signals, so the catalog has no row for them; they live here, once.
"""

from __future__ import annotations

from gpudash.catalog import CLOCK_EVENT_REASONS, THERMAL_OR_BRAKE_REASONS
from gpudash.config.durations import duration_text
from gpudash.config.site import Site
from gpudash.escape import promql_matcher
from gpudash.promql.query import THROTTLE_REASONS, PromQL

NODE_LOAD1 = "node_load1"
NODE_CPU_SECONDS = "node_cpu_seconds_total"
UP = "up"  # Prometheus' own per-target health series

# The signal whose disappearance means "this GPU stopped reporting": dcgm-exporter publishes it on every
# GPU (MIG instances included) and nvidia_gpu_exporter has it too. The recording GPUExporterDown reads
# (cluster_instance_gpu:gpu_reporting:stopped) is of the same signal.
PRESENCE_SIGNAL = "fb_used"
# `instance` without its port, so a GPU exporter (host:9400) and node_exporter (host:9100) meet on `host`.
_HOST_FROM_INSTANCE = '"host", "$1", "instance", "(.+?)(?::[0-9]+)?"'


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

    def memory_growing(self) -> str:
        """Memory rose across each third of the growth window, judged by the lowest reading in each third.

        The lowest point is the floor a training job's allocator saw-tooth keeps returning to, so the
        saw-tooth itself does not count as growth, while a leak lifts the floor third after third. A model
        that loads in one step and then stays flat never counts: one step can lift only one of the two
        comparisons at a time.
        """
        third = duration_text(self.a.memory_pressure.growth_window.seconds // 3)
        two_thirds = duration_text(2 * (self.a.memory_pressure.growth_window.seconds // 3))
        r = self.fb_ratio
        newest = f"min_over_time({r}[{third}])"
        middle = f"min_over_time({r}[{third}] offset {third})"
        oldest = f"min_over_time({r}[{third}] offset {two_thirds})"
        # each third read once: `newest > (middle > oldest)` keeps newest where both comparisons hold
        return f"{newest}\n  > ({middle} > {oldest})"

    # -- alerts ------------------------------------------------------------------------------------------

    def typical(self, key: str) -> str:
        """The median of a signal over the short window: a spike or a dip shorter than half of it is ignored."""
        return self.q.per_gpu(self.q.over_time("quantile", key, self.a.temperature.window, "0.5"))

    def throttling(self) -> str | None:
        """Hot and clocked down against the recent (or max) clock, or a thermal / power-brake reason set.

        Clock and temperature are medians over the short window and reasons count if set within it, so the
        seconds-long dips of a training job (a data-loader stall cools the die and frees the clock) neither
        reset the `for:` nor make the alert flap.
        """
        if not self.has("sm_clock", "gpu_temp"):
            return None
        keep = 1 - self.t.throttle_drop_ratio
        clock = self.typical("sm_clock")
        recent = self.q.per_gpu(self.q.over_time("max", "sm_clock", self.a.throttling.window))
        hot = f"{self.typical('gpu_temp')} >= {self.t.temperature.gpu.warning:g}"
        dropped = [f"{clock} < {keep:g} * {recent}"]
        if self.has("sm_clock_max"):
            dropped.append(f"{clock} < {keep:g} * {self.q.per_gpu(self.q.metric('sm_clock_max'))}")
        parts = [f"(\n  ({' or '.join(dropped)})\n  and\n  {hot}\n)"]
        reasons = self._throttle_reasons()
        if reasons:
            parts.append(f"(\n  {clock}\n  and\n  ({reasons}) > 0\n)")
        return f"{NL}or{NL}".join(parts)

    def _throttle_reasons(self) -> str | None:
        """Per GPU, > 0 if a thermal or power-brake reason was set within the short window."""
        window = self.a.temperature.window
        forms = []
        if self.has("clock_event_active"):
            active = self.q.metric("clock_event_active", (THROTTLE_REASONS,))
            forms.append(self.q.per_gpu(f"max_over_time({active}[{window}])"))
        if self.has("clock_event_reasons"):
            mask = self.q.profile.ref("clock_event_reasons").name
            bits = {name: bit for bit, name in CLOCK_EVENT_REASONS}
            step = self.site.scrape_interval
            test = any_bit_set(mask, [bits[name] for name in THERMAL_OR_BRAKE_REASONS])
            forms.append(self.q.per_gpu(f"max_over_time(({test})[{window}:{step}])"))
        return " or ".join(forms) or None

    def memory_pressure(self, level: float) -> str | None:
        if not self.has("fb_used", "fb_free"):
            return None
        return self.q.per_gpu(f"\n  {self.fb_ratio} > {level:g}\n  and\n  {self.memory_growing()}\n")

    def memory_leak(self) -> str | None:
        if not self.has("fb_used", "fb_free"):
            return None
        leak = self.a.memory_leak
        # capped at 1: the value shown is "where memory is heading", and nothing exceeds all of it
        projected = f"clamp_max(predict_linear({self.fb_ratio}[{leak.window}], {leak.horizon.seconds}), 1)"
        return self.q.per_gpu(
            f"\n  {projected} >= {self.t.memory.critical:g}\n  and\n  {self.memory_growing()}\n"
        )

    def job_stalled(self) -> str | None:
        if not self.has("gpu_util", "fb_used", "fb_free"):
            return None
        s = self.a.job_stalled
        busiest = self.q.per_gpu(self.q.over_time("max", "gpu_util", s.window))
        held = self.q.per_gpu(f"min_over_time({self.fb_ratio}[{s.window}])")
        # ... and already held it a whole window ago, so a job that just started is not judged on a part-window
        before = self.q.per_gpu(f"{self.fb_ratio} offset {s.window}")
        above = f"{s.memory_above_ratio:g}"
        return f"{busiest} < {s.util_below_percent:g}\nand\n{held} > {above}\nand\n{before} > {above}"

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
        joined = (
            f"\n  label_replace(\n    {util},\n    {_HOST_FROM_INSTANCE}\n  )\n"
            f"  and on (host)\n"
            f"  label_replace(\n    {load},\n    {_HOST_FROM_INSTANCE}\n  )\n"
        )
        return self.q.per_gpu(joined)

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
        # the raw series: only its presence a window ago counts (and offset takes no parentheses)
        held_before = f"max by ({q.job_gpu}) ({q.in_job_raw('gpu_util')} offset {i.window})"
        return (f"count by ({q.job}) (\n  {busiest} < {i.util_below_percent:g}\n"
                f"  and on ({q.job_gpu})\n  {held_before}\n)")


NL = "\n"


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


def _indent(text: str, spaces: int = 2) -> str:
    return NL.join(" " * spaces + line if line else line for line in text.splitlines())


def _or(parts: list[str]) -> str:
    return f"{NL}or{NL}".join(parts)
