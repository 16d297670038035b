"""How one job's GPUs move together: a synchronous data-parallel step runs at the pace of its slowest GPU.

Every GPU of a job computes the same work per step and then meets the others in a collective (all-reduce).
A GPU that waits there still runs a kernel (NCCL spins), so its *utilization* (the fraction of time a kernel
runs) stays high, while its *SM activity*, tensor activity and power drop with the share of the step it
computes. fleet.Fleet gives each GPU the faults of its job on every node (a ``JobContext``) and this module
changes the GPU's state accordingly:

- the straggler itself (``straggler``: throttled, its SM clock down; ``foreign``: shared with another job's
  process, contention, clock unchanged) takes (1 + slow) times as long per step and never waits: utilization,
  SM and tensor activity a little higher than before;
- every other GPU of the job waits the difference: it computes a (1 - slow) share of the step, so its SM and
  tensor activity and its power drop by that share, its utilization barely moves;
- a node starved of input (``starved``): its GPUs wait for data with nothing running, so utilization, SM
  activity and power all fall to about a third; the job's GPUs on other nodes wait for them in collectives,
  less visibly: SM activity falls as much, utilization only by about a tenth.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpudash.exporter.sim.gpu_state import GpuState
from gpudash.exporter.sim.noise import clamp, name_key, smooth, uniform
from gpudash.exporter.sim.spec import Fault
from gpudash.exporter.source import ProcessUsage

SM_PER_UTIL = 0.86  # SM activity of a GPU that computes all the time it is busy
OCCUPANCY_PER_SM = 0.38 / 0.86
STARVED_SHARE = 0.35  # the share of a step a starved node's GPUs compute
NCCL_SM = 0.04  # what a collective's spinning kernels add to SM activity while they wait
_CH_SLOW, _CH_HELD, _CH_FOREIGN = 201, 202, 203


@dataclass(frozen=True)
class Straggler:
    node: str
    index: int
    slow: float  # the share of the step the others wait: 0.2 means the job runs 20 % slower
    throttled: bool  # SM clock down (straggler); False: shared with another process (foreign)


@dataclass(frozen=True)
class JobContext:
    """The faults of this GPU's job, on any node, active now."""

    me: tuple[str, int]
    stragglers: tuple[Straggler, ...] = ()
    node_starved: bool = False  # this GPU's own node
    peer_starved: bool = False  # another node of its job

    @property
    def quiet(self) -> bool:
        return not (self.stragglers or self.node_starved or self.peer_starved)


def straggler_of(seed: int, node: str, index: int, fault: Fault) -> Straggler:
    """How much a straggler or foreign fault slows its job: its argument, or 20-40 % (20-30 % shared) seeded."""
    throttled = fault.kind == "straggler"
    if fault.arg is not None and throttled:
        slow = fault.arg / 100.0
    else:
        u = uniform(seed, _CH_SLOW, name_key(node), index, int(fault.start))
        slow = 0.2 + (0.2 if throttled else 0.1) * u
    return Straggler(node, index, slow, throttled)


def sm_activity(s: GpuState) -> float:
    return s.util / 100.0 * SM_PER_UTIL if s.sm_active is None else s.sm_active


def apply(s: GpuState, ctx: JobContext) -> None:
    """Change a busy GPU's state for what its job's faults do to it (see the module docstring)."""
    if s.process is None or ctx.quiet:
        return
    sm = sm_activity(s)
    if ctx.node_starved:
        s.util *= STARVED_SHARE
        sm *= STARVED_SHARE
        s.tensor *= STARVED_SHARE
        s.dram *= STARVED_SHARE
        s.nvlink_kib_s *= STARVED_SHARE
        s.power_activity *= STARVED_SHARE + 0.1
        s.pcie_rx *= 0.5
    elif ctx.peer_starved:
        s.util *= 0.9
        sm = sm * STARVED_SHARE + NCCL_SM
        s.tensor *= STARVED_SHARE
        s.dram *= STARVED_SHARE + 0.1
        s.power_activity *= 0.55
    mine = [st for st in ctx.stragglers if (st.node, st.index) == ctx.me]
    others = [st.slow for st in ctx.stragglers if (st.node, st.index) != ctx.me]
    if mine:
        st = mine[0]
        s.util = min(100.0, s.util * 1.04)
        sm = min(0.97, sm * 1.08)
        s.tensor = min(0.95, s.tensor * 1.05)
        if st.throttled:
            s.clock_factor = 1.0 - st.slow
            s.power_capped = True
            s.power_activity *= 1.0 - 0.5 * st.slow
    elif others:
        slow = max(others)
        busy = 1.0 - slow
        s.util *= 1.0 - 0.03 * slow
        sm = sm * busy + NCCL_SM * slow
        s.tensor *= busy
        s.dram *= busy
        s.power_activity *= 1.0 - 0.6 * slow
    s.sm_active = clamp(sm, 0.0, 1.0)


def hold_idle(s: GpuState, seed: int, index: int) -> None:
    """Allocated and held, nothing computing: a process with its CUDA context and a little memory, ~0 %."""
    s.util = s.tensor = s.dram = s.nvlink_kib_s = 0.0
    s.sm_active = 0.0
    s.power_activity = 0.03
    s.pcie_tx = s.pcie_rx = 1e5
    s.fb_used = 1500.0 + 3000.0 * uniform(seed, _CH_HELD, index)
    s.process = s.process or "python3"


def spin(s: GpuState, t: float, seed: int, index: int) -> None:
    """A hung collective: the spin kernels of a collective that never completes keep utilization at ~100 %
    on a few SMs while nothing computes: tensor and DRAM activity, NVLink traffic near 0, power just above
    idle. Memory stays held."""
    s.util = 98.0 + 2.0 * smooth(t, 7.0, seed, _CH_HELD, index)
    s.sm_active = 0.10 + 0.04 * smooth(t, 9.0, seed, _CH_HELD, index, 1)
    s.tensor, s.dram = 0.0, 0.002 + 0.004 * smooth(t, 11.0, seed, _CH_HELD, index, 2)
    s.nvlink_kib_s = 0.0
    s.power_activity = 0.06 + 0.02 * smooth(t, 13.0, seed, _CH_HELD, index, 3)
    s.pcie_tx = s.pcie_rx = 1e5


def add_foreign(s: GpuState, seed: int, index: int, job_id: str) -> None:
    """Another job's process on this GPU: its own memory, and a share of the GPU's time."""
    mib = float(round(9000.0 + 15000.0 * uniform(seed, _CH_FOREIGN, index)))
    s.foreign = ProcessUsage(foreign_pid(job_id, index), "python3", mib)
    s.foreign_job = job_id
    s.fb_used += mib
    s.util = min(100.0, s.util + 20.0 if s.util < 50 else s.util * 1.04)
    s.power_activity = min(1.0, s.power_activity + 0.1)
    if s.process is None:
        s.sm_active = s.util / 100.0 * SM_PER_UTIL


def foreign_pid(job_id: str, index: int) -> int:
    return 50000 + name_key(job_id) % 10000 + 17 * index
