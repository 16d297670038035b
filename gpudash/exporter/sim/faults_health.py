"""The simulated GPU's health: ECC, row remapping, NVLink per link, thermal limits, and the faults that break them.

A pure function of (seed, GPU, t, faults), like the rest of the fleet. A healthy GPU keeps every error
counter flat, but for a corrected single-bit ECC error every few hours on some GPUs; it has 18 active NVLink
links (an H200 SXM) and reports the H200's limits (GPU max operating 87 C, memory 95 C). Faults
(``IDX=KIND[:ARG][@START][+DURATION]``):

- ``dbe-burst[:N]``: N (default 4) double-bit errors at START: the volatile and aggregate DBE counters jump,
  XIDs 48 and 63, a row remap pending (one more uncorrectable remapped row), recovery action 4 (drain and
  reset). After DURATION the GPU has been reset: volatile counters and the pending flag clear.
- ``remap-pending``: a row remap pending (1) from one more correctable remapped row, XID 63; cleared after
  DURATION (the reset applied it; the row stays counted).
- ``remap-failure``: the remap failure flag (1, for the GPU's life) with one more uncorrectable row, XID 64,
  recovery action 1 (GPU reset).
- ``nvlink-crc-storm[:RATE]``: one link (chosen by the seed) counts RATE (default 300) flow-control CRC errors
  a second, a third as many data CRC errors and a replay every 100 CRC errors, until DURATION ends.
- ``fell-off-bus``: as ``lost`` (docs/simulation.md): XID 79, then the GPU reads up=0.
- corrected errors, RATE an hour from START until DURATION ends, evenly spaced: ``nvlink-crc-trickle[:RATE]``
  (default 2) flow-control CRC errors on the storm's link, ``nvlink-replay-trickle[:RATE]`` (default 6) CRC
  errors each with the replay that corrected it, ``sbe-trickle[:RATE]`` (default 30) single-bit ECC errors.
- ``recovery-action[:N]``: the driver's recovery action reads N (default 1, GPU reset) from START, with XID 154
  ("recovery action changed"); after DURATION the GPU has been reset and it reads 0 again.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

from gpudash.catalog import NVLINK_ERROR_KINDS
from gpudash.exporter.health_reads import RETIRED_KEYS
from gpudash.exporter.sim.noise import uniform
from gpudash.exporter.sim.spec import Fault
from gpudash.exporter.source import LinkHealth

__all__ = ["RETIRED_KEYS", "health", "storm_link", "violations", "xid_events"]

NVLINK_LINKS = 18  # an H200 SXM's NVLink 4 links
XID_DBE, XID_REMAP, XID_REMAP_FAILURE, XID_RECOVERY_ACTION = 48, 63, 64, 154
DRAIN_AND_RESET, GPU_RESET = 4.0, 1.0  # nvmlDeviceGpuRecoveryAction_t
TRICKLE_PER_HOUR = {"nvlink-crc-trickle": 2.0, "nvlink-replay-trickle": 6.0, "sbe-trickle": 30.0}
_CH_SBE, _CH_LINK = 11, 12  # noise channels of their own (fleet.py and rhythm.py use 0-8)


def xid_events(faults: Sequence[Fault]) -> list[tuple[float, int]]:
    """The XIDs the health faults raise, at their start."""
    codes = {"dbe-burst": (XID_DBE, XID_REMAP), "remap-pending": (XID_REMAP,), "remap-failure": (XID_REMAP_FAILURE,),
             "recovery-action": (XID_RECOVERY_ACTION,)}
    return [(f.start, code) for f in faults for code in codes.get(f.kind, ())]


def storm_link(seed: int, i: int) -> int:
    """The link an NVLink CRC storm hits on GPU i."""
    return int(uniform(seed, i, _CH_LINK) * NVLINK_LINKS)


def health(seed: int, i: int, t: float, gpu_temp: float, faults: Sequence[Fault], gpu_max_op_c: float,
           mem_max_op_c: float) -> tuple[dict[str, float], tuple[LinkHealth, ...]]:
    """GPU i's health values (catalog keys) and NVLink links at t, given its max operating temperatures."""
    every, sbe_before = _corrected_errors(seed, i)
    sbe = float(math.floor(t / every)) if math.isfinite(every) else 0.0
    v: dict[str, float] = {
        "ecc_sbe_vol": sbe, "ecc_dbe_vol": 0.0, "ecc_sbe_agg": sbe_before + sbe, "ecc_dbe_agg": 0.0,
        "remapped_rows_cor": 0.0, "remapped_rows_unc": 0.0, "row_remap_pending": 0.0, "row_remap_failure": 0.0,
        "gpu_max_op_temp": gpu_max_op_c, "mem_max_op_temp": mem_max_op_c,
        "temp_margin": gpu_max_op_c - gpu_temp, "recovery_action": 0.0,
    }
    errors: dict[int, dict[str, float]] = {}  # link -> error kind -> count so far, on links a fault hits
    for f in faults:
        if t < f.start:
            continue
        reset = t >= f.end  # the fault's DURATION ends with a GPU reset
        if f.kind == "dbe-burst":
            burst = f.arg if f.arg is not None else 4.0
            v["ecc_dbe_agg"] += burst
            v["remapped_rows_unc"] += 1
            if not reset:
                v["ecc_dbe_vol"] += burst
                v["row_remap_pending"] = 1.0
                v["recovery_action"] = max(v["recovery_action"], DRAIN_AND_RESET)
        elif f.kind == "remap-pending":
            v["remapped_rows_cor"] += 1
            v["row_remap_pending"] = max(v["row_remap_pending"], 0.0 if reset else 1.0)
        elif f.kind == "remap-failure":
            v["remapped_rows_unc"] += 1
            v["row_remap_failure"] = 1.0
            v["recovery_action"] = max(v["recovery_action"], GPU_RESET)
        elif f.kind == "recovery-action" and not reset:
            v["recovery_action"] = max(v["recovery_action"], f.arg if f.arg is not None else GPU_RESET)
        elif f.kind == "nvlink-crc-storm":
            crc = math.floor((f.arg if f.arg is not None else 300.0) * (min(t, f.end) - f.start))
            _add(errors, storm_link(seed, i), crc_flit=crc, crc_data=crc // 3, replay=crc // 100)
        elif f.kind in TRICKLE_PER_HOUR:
            count = float(math.floor((f.arg or TRICKLE_PER_HOUR[f.kind]) * (min(t, f.end) - f.start) / 3600))
            if f.kind == "sbe-trickle":
                v["ecc_sbe_vol"] += count
                v["ecc_sbe_agg"] += count
            else:
                replays = count if f.kind == "nvlink-replay-trickle" else 0.0
                _add(errors, storm_link(seed, i), crc_flit=count, replay=replays)
    if not errors:
        v.update(dict.fromkeys((key for _, key in NVLINK_ERROR_KINDS), 0.0))
        return v, _HEALTHY_LINKS
    links = tuple(LinkHealth(link.link, True, {**link.errors, **errors[link.link]}) if link.link in errors else link
                  for link in _HEALTHY_LINKS)
    for kind, key in NVLINK_ERROR_KINDS:
        v[key] = sum(link.errors[kind] for link in links)
    return v, links


def _add(errors: dict[int, dict[str, float]], link: int, **counts: float) -> None:
    """Add `counts` (by error kind) to one link's errors."""
    mine = errors.setdefault(link, {})
    for kind, count in counts.items():
        mine[kind] = mine.get(kind, 0.0) + count


@functools.lru_cache(maxsize=4096)
def _corrected_errors(seed: int, i: int) -> tuple[float, float]:
    """Seconds between corrected ECC errors on GPU i (inf: none), and how many it had before this driver load.

    One every 3-30 h on a third of the GPUs: real HBM does that, and it must not page."""
    every = 3600.0 * (3 + 27 * uniform(seed, i, _CH_SBE)) if uniform(seed, i, _CH_SBE, 1) < 0.33 else math.inf
    return every, float(int(200 * uniform(seed, i, _CH_SBE, 2)))


_HEALTHY_LINKS = tuple(LinkHealth(k, True, dict.fromkeys((kind for kind, _ in NVLINK_ERROR_KINDS), 0.0))
                       for k in range(NVLINK_LINKS))


def violations(t: float, faults: Sequence[Fault], gpu_max_op_c: float) -> dict[str, float]:
    """Thermal and power violation time (ns): while a thermal fault runs over the max operating temperature,
    and while a straggler is held under its power cap."""
    thermal = power = 0.0
    for f in faults:
        if f.kind == "thermal" and (f.arg if f.arg is not None else 91.0) >= gpu_max_op_c:
            over = f.start + 90.0  # about when the climb passes the max operating temperature
            thermal += max(0.0, min(t, f.end + 60.0) - over)
        elif f.kind == "straggler":
            power += max(0.0, min(t, f.end) - f.start)
    return {"thermal_violation": round(thermal * 1e9), "power_violation": round(power * 1e9)}
