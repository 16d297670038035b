"""The states several alert rules test, recorded once per evaluation: each holds only the GPUs in that state
(sparse), so each reader reads a handful of series where it would have read every GPU's.

The alert group runs apart from the recording group: an alert reading one of these sees the recording
group's last evaluation, at most one rule interval old.
"""

from __future__ import annotations

from gpudash.config.durations import duration_text
from gpudash.promql.query import PromQL, Recording

FB_RATIO = "cluster_instance_gpu:gpu_fb_used:ratio"
FB_GROWING = "cluster_instance_gpu:gpu_fb_used:growing"


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


# After the ratio they read (recordings.RECORDINGS starts with it), before the recordings that read them.
ALERT_STATES: tuple[Recording, ...] = (
    Recording(FB_GROWING, ("fb_used", "fb_free"), memory_growing,
              "Per GPU whose lowest framebuffer used ratio rose across each third of "
              "alerts.memory_pressure.growth_window: the lowest over the newest third (only such GPUs, every "
              "label of the ratio kept). GPUMemoryPressure and GPUMemoryLeakPredicted read it.", filtered=True),
)
