"""The states several alert rules test, recorded once per evaluation: each holds only the GPUs in that state
(sparse), so each reader reads a handful of series where it would have read every GPU's.

The alert group runs apart from the recording group: an alert reading one of these sees the recording
group's last evaluation, at most one rule interval old.
"""

from __future__ import annotations

from functools import partial

from gpudash.config.durations import duration_text
from gpudash.promql import nvlink_sources as nvlink
from gpudash.promql.query import HEALTH_STATES, JOB_STATES, PromQL, Recording

FB_RATIO = "cluster_instance_gpu:gpu_fb_used:ratio"
FB_GROWING = "cluster_instance_gpu:gpu_fb_used:growing"
NVLINK_RECOVERED = "cluster_instance_gpu_link:gpu_nvlink_recovery_errors:latched"
NVLINK_STORM = "cluster_instance_gpu_link:gpu_nvlink_crc_errors_per_second:storm"
BUSY_AT_IDLE_POWER = "cluster_instance_gpu:gpu_utilization:busy_at_idle_power"


def memory_growing(q: PromQL) -> str:
    """Memory rose across each third of the growth window, judged by the lowest reading in each third.

    The lowest point is the floor a training job's allocator saw-tooth keeps returning to, so the saw-tooth
    itself does not count as growth, while a leak lifts the floor third after third. A model that loads in
    one step and then stays flat never counts: one step can lift only one of the two comparisons at a time.
    Reads the ratio the group records first, every label of it kept.
    """
    window = q.thresholds.alerts.memory_pressure.growth_window.seconds
    third, two_thirds = duration_text(window // 3), duration_text(2 * (window // 3))
    r = q.recorded_series(FB_RATIO)
    newest = f"min_over_time({r}[{third}])"
    middle = f"min_over_time({r}[{third}] offset {third})"
    oldest = f"min_over_time({r}[{third}] offset {two_thirds})"
    # each third read once: `newest > (middle > oldest)` keeps newest where both comparisons hold
    return f"{newest}\n  > ({middle} > {oldest})"


def busy_at_idle_power(q: PromQL) -> str:
    """The GPUs busy by utilization (at or above alerts.job_hung.util_above_percent) at near-idle power: under
    power_below_ratio of the power limit, or under power_below_watts where the GPU publishes no limit. Every
    label of the utilization series kept, its value the utilization: the hang signature's first half, which
    both spinning recordings complete."""
    h = q.thresholds.alerts.job_hung
    on = f"on (cluster, instance, {q.gpu})"
    busy = f"{q.metric('gpu_util')} >= {h.util_above_percent:g}"
    drawn = q.gpu_once("power")
    if q.has("power_limit"):
        limit = q.gpu_once("power_limit")
        idle_power = (f"{drawn} / {on} {limit} < {h.power_below_ratio:g}\n  or\n  {drawn} < {h.power_below_watts:g}"
                      f"\n  unless {on}\n  {limit}")
    else:
        idle_power = f"{drawn} < {h.power_below_watts:g}"
    return f"{busy}\nand {on}\n(\n  {idle_power}\n)"


def nvlink_recovered(q: PromQL) -> str:
    """A link (or GPU) whose recovery counter is above 0: it went down and retrained since the counter last
    restarted. The counter is the latch: a GPU reset, driver reload or reboot zeroes it."""
    expr = nvlink.combine(q, nvlink.card_labels(q), nvlink.recoveries)
    assert expr is not None, "built only where the profile has a recovery counter (Recording.possible)"
    return expr


def nvlink_storm(q: PromQL) -> str:
    """CRC errors of one kind at or above alerts.nvlink.crc_per_second_critical over its storm_window."""
    n = q.thresholds.alerts.nvlink
    expr = nvlink.combine(q, nvlink.card_labels(q), partial(nvlink.storms, n.storm_window, n.crc_per_second_critical))
    assert expr is not None, "built only where the profile has a CRC counter (Recording.possible)"
    return expr


# After the ratio they read (recordings.RECORDINGS starts with it), before the recordings that read them.
ALERT_STATES: tuple[Recording, ...] = (
    Recording(FB_GROWING, ("fb_used", "fb_free"), memory_growing,
              "Per GPU whose lowest framebuffer used ratio rose across each third of "
              "alerts.memory_pressure.growth_window: the lowest over the newest third (only such GPUs, every "
              "label of the ratio kept). GPUMemoryPressure and GPUMemoryLeakPredicted read it.", filtered=True,
              group=JOB_STATES),
    # read by the spinning recordings (recordings.FLEET_LISTS), which GPUJobHung, GPUJobStalled and
    # GPUAllocatedIdle read
    Recording(BUSY_AT_IDLE_POWER, ("gpu_util", "power"), busy_at_idle_power,
              "Per GPU at or above alerts.job_hung.util_above_percent utilization with power under the job_hung "
              "levels: its utilization (only such GPUs, every label of the utilization series kept).",
              filtered=True, group=JOB_STATES),
    # GPUNVLinkErrors' critical conditions: its critical rules read them, and its warning gives way to them
    Recording(NVLINK_RECOVERED, (nvlink.LINKS, *nvlink.GPU_KINDS["recovery"]), nvlink_recovered,
              "Per NVLink link (per GPU from dcgm-exporter's totals) whose recovery counter is above 0: the "
              "count (only such links, with the card's UUID and host name).", filtered=True, any_need=True,
              group=HEALTH_STATES),
    Recording(NVLINK_STORM, (nvlink.LINKS, *nvlink.GPU_KINDS["crc"]), nvlink_storm,
              "Per NVLink link (per GPU from dcgm-exporter's totals) with CRC errors of one kind at or above "
              "alerts.nvlink.crc_per_second_critical over alerts.nvlink.storm_window: the rate (only such "
              "links, with the card's UUID and host name).", filtered=True, any_need=True,
              group=HEALTH_STATES),
)
