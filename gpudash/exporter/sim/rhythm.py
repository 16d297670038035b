"""A training job's rhythm: when all its GPUs checkpoint, evaluate or stall on input together.

The rhythm is a pure function of the job's own time and its seed, so every GPU of the job, on every node,
dips at the same moments (the job-wide dips a straggler rule must not mistake for a slow GPU).
"""

from __future__ import annotations

import functools
import math

from gpudash.exporter.sim.noise import uniform

# fleet.py's noise channels for these (the same numbers as before they moved here)
_CH_STALL, _CH_CKPT = 6, 7


@functools.lru_cache(maxsize=4096)
def _checkpoint_period(rhythm: int) -> float:
    """A cluster job's checkpoint interval: 20-40 minutes, its own."""
    return 1200.0 + 1200.0 * uniform(rhythm, _CH_CKPT)


def training_phase(t: float, rhythm: int, *, cluster: bool) -> tuple[str, float]:
    """The phase at the job's time t: ('ckpt' | 'eval' | 'stall' | 'run', depth 0..1).

    A node's own training job (``cluster`` False) checkpoints every 30 minutes and stalls on input now and
    then; a cluster job checkpoints every 20-40 minutes at its own pace and also evaluates once an hour.
    """
    period = _checkpoint_period(rhythm) if cluster else 1800.0
    k = math.floor(t / period)
    if k >= 1:
        ckpt_len = 45.0 + 30.0 * uniform(rhythm, _CH_CKPT, k)
        if t - k * period < ckpt_len:
            return "ckpt", 1.0
    hour = math.floor(t / 3600.0)
    if cluster and hour >= 1:
        begin = hour * 3600.0 + 600.0 + 300.0 * uniform(rhythm, _CH_CKPT, hour, 5)
        if begin <= t < begin + 120.0 + 120.0 * uniform(rhythm, _CH_CKPT, hour, 6):
            return "eval", uniform(rhythm, _CH_CKPT, hour, 7)
    slot = 600.0
    for j in (math.floor(t / slot), math.floor(t / slot) - 1):
        if j < 0 or uniform(rhythm, _CH_STALL, j) > 0.7:
            continue
        begin = j * slot + 200.0 + 350.0 * uniform(rhythm, _CH_STALL, j, 1)
        length = 10.0 + 30.0 * uniform(rhythm, _CH_STALL, j, 2)
        if begin <= t < begin + length:
            return "stall", 0.5 + 0.5 * uniform(rhythm, _CH_STALL, j, 3)
    return "run", 0.0
