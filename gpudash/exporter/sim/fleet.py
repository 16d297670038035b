"""A simulated GPU node: ``Fleet``, H200s running realistic workloads with faults injected per GPU, and
``fleet_from_specs``, which builds one from the exporter's ``--workload``/``--fault`` strings.

Every reading is a pure function of (seed, configuration, t). docs/simulation.md is the manual: how to run
the simulated exporter, what each workload, fault and job fault does, and this module's API.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from gpudash.catalog import CLOCK_EVENT_REASONS
from gpudash.errors import UsageError
from gpudash.exporter.sim import fabric, faults_health, jobphysics
from gpudash.exporter.sim.counters import Integral
from gpudash.exporter.sim.gpu_state import GpuState
from gpudash.exporter.sim.jobs import Job, JobLayout
from gpudash.exporter.sim.noise import clamp, name_key, smooth, uniform
from gpudash.exporter.sim.rhythm import training_phase
from gpudash.exporter.sim.spec import (
    SHARED_FAULTS,
    Fault,
    parse_fault,
    parse_workload,
)
from gpudash.exporter.source import (
    GpuIdentity,
    GpuReading,
    ProcessUsage,
    XidState,
    xid_state,
)

XID_GPU_LOST = 79
LOST_FAULTS = ("lost", "fell-off-bus")

_BIT = {name: bit for bit, name in CLOCK_EVENT_REASONS}
_BUSY_TEMP_C = 64.0  # what a training GPU settles at near its power cap


@dataclass(frozen=True)
class GpuModel:
    """Hardware constants of the simulated part (an H200 SXM as measured with NVML)."""

    name: str = "NVIDIA H200"
    fb_total_mib: float = 143771.0
    fb_reserved_mib: float = 520.0
    power_limit_w: float = 700.0
    idle_power_w: float = 75.0
    sm_clock_max_mhz: float = 1980.0
    sm_clock_idle_mhz: float = 345.0
    mem_clock_mhz: float = 3201.0
    sw_thermal_c: float = 87.0  # also the GPU's max operating temperature (NVML GPU_MAX), as on an H200
    mem_max_op_c: float = 95.0
    slowdown_c: float = 89.0
    shutdown_c: float = 95.0


H200 = GpuModel()


# noise channels
_CH_UTIL, _CH_FB, _CH_POWER, _CH_TEMP, _CH_HBM, _CH_PCIE, _CH_ID = 0, 1, 2, 3, 4, 5, 8  # 6, 7: rhythm.py
_HGX_BUSES = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")


@dataclass
class Fleet:
    """One simulated node of ``gpus`` GPUs; docs/simulation.md says what it simulates and how."""

    gpus: int = 8
    seed: int = 0
    workloads: Mapping[int, str] = field(default_factory=dict)
    faults: Mapping[int, Sequence[Fault]] = field(default_factory=dict)
    epoch: float = 0.0
    model: GpuModel = H200
    driver_version: str = "580.159.04"
    # A node of a simulated cluster (gpudash.exporter.sim.jobs): its name in the layout, the layout, the faults
    # on other nodes (they reach this node through shared jobs), and the cluster's seed (job rhythms).
    node: str = ""
    layout: JobLayout | None = None
    cluster_faults: Sequence[tuple[str, int, Fault]] = ()
    cluster_seed: int | None = None
    # Fields this node's GPUs cannot give, beside the retired pages and the vGPU licence (an H200 without NVLink
    # lacks nvlink_bandwidth): NotSupported, as NVML answers it.
    unsupported: frozenset[str] = frozenset()
    mig: Mapping[int, tuple[str, ...]] = field(default_factory=dict)  # GPU index -> its MIG profiles (mig_layout)

    def __post_init__(self) -> None:
        if self.gpus < 1:
            raise UsageError(f"--simulate {self.gpus}: need at least one GPU")
        for where in (*self.workloads, *self.faults, *(i for _, i, _ in self.cluster_faults), *self.mig):
            if not 0 <= where < self.gpus:
                raise UsageError(f"GPU index {where} out of range: the simulated node has GPUs 0-{self.gpus - 1}")
        every = [(self.node, i, f) for i, faults in self.faults.items() for f in faults] + list(self.cluster_faults)
        self._job_faults = [(n, i, f) for n, i, f in every if f.kind in SHARED_FAULTS]
        self.identities = [self._identity(i) for i in range(self.gpus)]
        self._energy0 = [1e9 * (5 + 50 * uniform(self.seed, i, _CH_POWER, 7)) for i in range(self.gpus)]
        self._integrals = [Integral(functools.partial(self._rates, i)) for i in range(self.gpus)]

    def _identity(self, i: int) -> GpuIdentity:
        h = "".join(f"{int(uniform(self.seed, i, _CH_ID, k) * 2**32):08x}" for k in range(4))
        uuid = f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"
        bus = _HGX_BUSES[i] if i < len(_HGX_BUSES) else f"{(0x18 + 0x11 * i) % 0x100:02X}"
        domain = i // len(_HGX_BUSES)
        return GpuIdentity(i, uuid, f"{domain:08X}:{bus}:00.0", self.model.name, i)

    def workload(self, i: int) -> str:
        return self.workloads.get(i, "train")

    def job(self, i: int, t: float) -> Job | None:
        """The job of the cluster layout running on GPU i at t (None: free, or no layout)."""
        return None if self.layout is None else self.layout.job_at(self.node, i, t)

    def process_jobs(self, i: int, t: float) -> dict[int, str]:
        """The job id of each process this GPU may show at t, by pid (for attribution)."""
        out: dict[int, str] = {}
        job = self.job(i, t)
        if job is not None:
            out[self._pid(i, job)] = job.id
        for fault in self.faults.get(i, ()):
            if fault.kind == "foreign" and fault.active(t):
                foreign = self._foreign_job(i, t, fault)
                out[jobphysics.foreign_pid(foreign, i)] = foreign
        return out

    def xid_events(self, i: int) -> list[tuple[float, int]]:
        events: list[tuple[float, int]] = []
        for fault in self.faults.get(i, ()):
            if fault.kind in LOST_FAULTS:
                events.append((fault.start, XID_GPU_LOST))
            elif fault.kind == "xid":
                code = int(fault.arg) if fault.arg is not None else 13
                repeats = 1 if fault.duration is None else max(1, math.ceil(fault.duration / 60.0))
                events.extend((fault.start + 60.0 * k, code) for k in range(repeats))
        events += faults_health.xid_events(self.faults.get(i, ()))
        return sorted(events)

    def sample(self, t: float) -> list[GpuReading]:
        return [self.sample_gpu(i, t) for i in range(self.gpus)]

    def sample_gpu(self, i: int, t: float) -> GpuReading:
        t = max(0.0, t)
        xid = self._xid(i, t)
        if self.lost(i, t):
            return GpuReading(i, up=False, xid=xid)
        s = self._state(i, t)
        m = self.model
        power = m.idle_power_w + (m.power_limit_w - m.idle_power_w) * s.power_activity
        power *= 0.98 + 0.04 * smooth(t, 3.0, self.seed, i, _CH_POWER)
        reasons = 0
        sm_clock = m.sm_clock_max_mhz * s.clock_factor
        if s.util < 1:
            reasons |= _BIT["gpu_idle"]
            sm_clock = m.sm_clock_idle_mhz
        if s.power_capped:
            reasons |= _BIT["sw_power_cap"]
        temp = 27.0 + 0.055 * power + 2.0 * smooth(t, 20.0, self.seed, i, _CH_TEMP) + s.heat_excess
        if temp >= m.sw_thermal_c:
            reasons |= _BIT["sw_thermal_slowdown"]
        if temp >= m.slowdown_c:
            reasons |= _BIT["hw_thermal_slowdown"] | _BIT["hw_slowdown"]
        heat = clamp((temp - (m.sw_thermal_c - 2.0)) / 6.0, 0.0, 1.0)
        if heat > 0:
            sm_clock *= 1.0 - 0.35 * heat
            power *= 1.0 - 0.3 * heat
        elif power >= 0.97 * m.power_limit_w:
            reasons |= _BIT["sw_power_cap"]
            sm_clock -= 150.0 * smooth(t, 5.0, self.seed, i, _CH_POWER, 1)
        power = min(power, m.power_limit_w)
        fb_used = clamp(round(s.fb_used), 0.0, m.fb_total_mib - m.fb_reserved_mib)
        energy, nvlink = self._counters(i, t)
        values: dict[str, float] = {
            "sm_clock": round(sm_clock),
            "mem_clock": m.mem_clock_mhz,
            "hbm_temp": round(temp + 3.0 + 2.0 * smooth(t, 30.0, self.seed, i, _CH_HBM)),
            "gpu_temp": round(temp),
            "power": round(power, 3),
            "energy": round(energy),
            "pcie_replay": 0.0,
            "gpu_util": round(s.util),
            "mem_copy_util": round(s.util * 0.42),
            "enc_util": 0.0,
            "dec_util": 0.0,
            "xid_last": float(xid.last_code),
            "fb_free": m.fb_total_mib - m.fb_reserved_mib - fb_used,
            "fb_used": fb_used,
            "fb_reserved": m.fb_reserved_mib,
            "nvlink_bandwidth": round(nvlink),
            "gr_engine_active": round(s.util / 100 * 0.97, 4),
            "tensor_active": round(s.tensor, 4),
            "dram_active": round(s.dram, 4),
            "pcie_tx": round(s.pcie_tx),
            "pcie_rx": round(s.pcie_rx),
            "sm_active": round(jobphysics.sm_activity(s), 4),
            "sm_occupancy": round(s.util / 100 * 0.38 if s.sm_active is None
                                  else s.sm_active * jobphysics.OCCUPANCY_PER_SM, 4),
            "fb_total": m.fb_total_mib,
            "power_limit": m.power_limit_w,
            "sm_clock_max": m.sm_clock_max_mhz,
            "slowdown_temp": m.slowdown_c,
            "shutdown_temp": m.shutdown_c,
            "clock_event_reasons": float(reasons),
        }
        if xid.last_time is not None:
            values["xid_last_time"] = xid.last_time
        faults = self.faults.get(i, ())
        health, links = faults_health.health(self.seed, i, t, values["gpu_temp"], faults, m.sw_thermal_c,
                                             m.mem_max_op_c)
        values.update(health, **faults_health.violations(t, faults, m.sw_thermal_c))
        values.update(fabric.gpu_fabric(faults, t))
        processes: tuple[ProcessUsage, ...] = ()
        if s.process is not None:
            own = fb_used - (s.foreign.fb_used_mib if s.foreign is not None else 0.0)
            processes = (ProcessUsage(self._pid(i, self.job(i, t)), s.process, max(0.0, own - 510.0),
                                      values["gpu_util"]),)
        if s.foreign is not None:
            processes += (s.foreign,)
        unsupported = frozenset({"vgpu_license"}) | faults_health.RETIRED_KEYS | self.unsupported
        kept = {key: value for key, value in values.items() if key not in self.unsupported}
        return GpuReading(i, True, kept, unsupported, {}, xid, processes, links)

    # -- the model ---------------------------------------------------------------------------------

    def lost(self, i: int, t: float) -> bool:
        return any(f.kind in LOST_FAULTS and f.active(t) for f in self.faults.get(i, ()))

    def _xid(self, i: int, t: float) -> XidState:
        """XID state in Unix time (the epoch plus fleet time), as a real source reports it."""
        if i not in self.faults:
            return XidState()
        return xid_state(((self.epoch + w, code) for w, code in self.xid_events(i)), self.epoch + t)

    def _dead_since(self, i: int) -> float:
        """When this GPU's job died (OOM, or its GPU was lost and reset); inf if it never does."""
        dead = math.inf
        for f in self.faults.get(i, ()):
            if f.kind == "leak":
                dead = min(dead, f.start + (f.arg if f.arg is not None else 1200.0))
            elif f.kind in LOST_FAULTS:
                dead = min(dead, f.start)
        return dead

    def _state(self, i: int, t: float) -> GpuState:
        job = self.job(i, t)
        workload, tau, rhythm = self.workload(i), t, self.seed
        if self.layout is not None:
            workload = "idle" if job is None else job.kind
            tau = t if job is None else t - job.start
            rhythm = self.seed if job is None else job.phase_seed(self._seed)
        s = self._workload_state(i, t, workload, tau, rhythm)
        self._own_faults(i, t, s)
        if self._job_faults and s.process is not None:
            jobphysics.apply(s, self._context(i, t, job))
        return s

    def _workload_state(self, i: int, t: float, workload: str, tau: float, rhythm: int) -> GpuState:
        if workload == "idle" and self.layout is not None and self.job(i, t) is not None:
            s = GpuState(process="python3")  # a job of kind idle: held, nothing computing
            jobphysics.hold_idle(s, self.seed, i)
            return s
        if workload == "idle" or t >= self._dead_since(i):
            return GpuState(fb_used=0.0)
        if workload == "inference":
            return self._inference(i, t, tau)
        return self._train(i, t, tau, rhythm)

    def _own_faults(self, i: int, t: float, s: GpuState) -> None:
        for fault in self.faults.get(i, ()):
            if fault.kind == "leak" and fault.start <= t < self._dead_since(i):
                to_oom = fault.arg if fault.arg is not None else 1200.0
                room = self.model.fb_total_mib - self.model.fb_reserved_mib - s.fb_used
                s.fb_used += room * clamp((t - fault.start) / to_oom, 0.0, 1.0)
            elif fault.kind == "stall" and fault.active(t) and s.process is not None:
                s.util, s.tensor, s.dram, s.power_activity = 0.0, 0.0, 0.0, 0.05
                s.pcie_tx = s.pcie_rx = 1e5
                s.nvlink_kib_s = 0.0
            elif fault.kind == "thermal" and t >= fault.start:
                # a cooling failure: the die runs this much hotter than its power alone explains
                peak = fault.arg if fault.arg is not None else 91.0
                rise = 1.0 - math.exp(-(t - fault.start) / 60.0)
                fall = math.exp(-(t - fault.end) / 90.0) if t >= fault.end else 1.0
                s.heat_excess = (peak - _BUSY_TEMP_C) * rise * fall
            elif fault.kind == "idle-holder" and fault.active(t) and s.process is not None:
                jobphysics.hold_idle(s, self.seed, i)
            elif fault.kind == "hang" and fault.active(t) and s.process is not None:
                jobphysics.spin(s, t, self.seed, i)
            elif fault.kind == "foreign" and fault.active(t) and not self.lost(i, t):
                jobphysics.add_foreign(s, self.seed, i, self._foreign_job(i, t, fault))

    def _context(self, i: int, t: float, job: Job | None) -> jobphysics.JobContext:
        """The faults of GPU i's job active at t, on any node (no layout: the node's training GPUs are one job)."""
        def member(node: str, k: int) -> bool:
            if job is not None:
                return job.holds(node, k)
            if self.layout is not None:
                return (node, k) == (self.node, i)
            return node == self.node and self.workload(k) == "train" and self.workload(i) == "train"

        stragglers, node_starved, peer_starved = [], False, False
        for node, k, fault in self._job_faults:
            if not fault.active(t):
                continue
            if fault.kind == "starved":
                node_starved |= node == self.node
                peer_starved |= node != self.node and job is not None and node in job.nodes
            elif member(node, k):
                stragglers.append(jobphysics.straggler_of(self._seed, node, k, fault))
        return jobphysics.JobContext((self.node, i), tuple(stragglers), node_starved, peer_starved)

    @property
    def _seed(self) -> int:
        """The cluster's seed: what every node of it shares (the node's own seed makes its GPUs differ)."""
        return self.seed if self.cluster_seed is None else self.cluster_seed

    def _pid(self, i: int, job: Job | None) -> int:
        if job is None:
            return 4000 + 17 * i + int(1000 * uniform(self.seed, _CH_ID, 99))
        return 2000 + name_key(job.id) % 40000 + 17 * i

    def _foreign_job(self, i: int, t: float, fault: Fault) -> str:
        """The foreign process's job: the fault's argument, else another job of the layout, else a made-up id."""
        if fault.arg is not None:
            return str(int(fault.arg))
        mine = self.job(i, t)
        others = [j.id for j in self.layout.jobs if j is not mine] if self.layout is not None else []
        return others[0] if others else str(90000 + int(9999 * uniform(self._seed, _CH_ID, i, 98)))

    def _train(self, i: int, t: float, tau: float, rhythm: int) -> GpuState:
        """Training at wall time t, tau into its job, the job's rhythm (its seed) shared by all its GPUs."""
        m = self.model
        ws = m.fb_total_mib * (0.74 + 0.04 * uniform(self.seed, i, _CH_FB))
        load = clamp(tau / (120.0 + 60.0 * uniform(rhythm, _CH_FB, 1)), 0.0, 1.0)
        saw = ((t + 13.0 * i) % 120.0) / 120.0
        fb = ws * load * (0.97 + 0.03 * saw)
        util = (93.0 + 6.0 * smooth(t, 4.0, self.seed, i, _CH_UTIL)) * load**2
        s = GpuState(util=util, fb_used=fb, process="python3")
        s.tensor = (0.40 + 0.08 * smooth(t, 6.0, self.seed, i, _CH_UTIL, 1)) * load**2
        s.dram = (0.30 + 0.06 * smooth(t, 6.0, self.seed, i, _CH_UTIL, 2)) * load**2
        s.pcie_rx = 1.2e9 + 0.6e9 * smooth(t, 8.0, self.seed, i, _CH_PCIE)
        s.pcie_tx = 1.5e8 + 1e8 * smooth(t, 8.0, self.seed, i, _CH_PCIE, 1)
        s.nvlink_kib_s = 1.4e8 * util / 100.0
        phase, depth = training_phase(tau, rhythm, cluster=self.layout is not None) if load >= 1.0 else ("run", 0.0)
        if phase == "eval":  # forward passes only, smaller batches
            s.util = 45.0 + 15.0 * depth + 4.0 * smooth(t, 5.0, self.seed, i, _CH_UTIL, 3)
        elif phase == "ckpt":
            s.util = 2.0 + 6.0 * smooth(t, 5.0, self.seed, i, _CH_UTIL, 3)
            s.pcie_tx = 9e9 + 3e9 * smooth(t, 5.0, self.seed, i, _CH_PCIE, 2)
            s.pcie_rx = 2e8
        elif phase == "stall":
            s.util = 5.0 + 20.0 * (1.0 - depth)
            s.pcie_rx = 3e9
        if phase != "run":
            s.tensor *= s.util / 100.0
            s.dram *= s.util / 100.0
            s.nvlink_kib_s = 1.4e8 * s.util / 100.0
        s.power_activity = clamp(s.util / 100.0 * (0.85 + 0.2 * s.tensor), 0.0, 1.05)
        return s

    def _inference(self, i: int, t: float, tau: float) -> GpuState:
        m = self.model
        load = clamp(tau / 60.0, 0.0, 1.0)
        fb = 0.97 * m.fb_total_mib * load
        wave = 0.5 + 0.5 * math.sin(2 * math.pi * (t / 3600.0 + uniform(self.seed, i, _CH_UTIL)))
        util = (20.0 + 45.0 * wave + 8.0 * smooth(t, 10.0, self.seed, i, _CH_UTIL)) * (1.0 if load >= 1 else 0.0)
        s = GpuState(util=util, fb_used=fb, process="tritonserver")
        s.tensor = 0.3 * util / 100.0
        s.dram = 0.45 * util / 100.0
        s.pcie_rx = 5e7 + 2e8 * util / 100.0
        s.pcie_tx = 3e7 + 1e8 * util / 100.0
        s.power_activity = 0.8 * util / 100.0
        return s

    def _rates(self, i: int, t: float) -> tuple[float, float]:
        """What the counters integrate: power in mW (so energy comes out in mJ) and NVLink KiB/s."""
        if self.lost(i, t):
            return 0.0, 0.0
        s = self._state(i, t)
        m = self.model
        power = m.idle_power_w + (m.power_limit_w - m.idle_power_w) * min(s.power_activity, 1.0)
        return power * 1000.0, s.nvlink_kib_s

    def _counters(self, i: int, t: float) -> tuple[float, float]:
        """Energy (mJ since driver load) and NVLink (KiB) at t."""
        energy, nvlink = self._integrals[i].at(t)
        return self._energy0[i] + energy, nvlink


def fleet_from_specs(
    gpus: int,
    seed: int = 0,
    workloads: Iterable[str] = (),
    faults: Iterable[str] = (),
    epoch: float | None = None,
) -> Fleet:
    """Build a Fleet from ``--workload``/``--fault`` strings; bad specs raise UsageError naming the flag."""
    chosen = dict(parse_workload(w) for w in workloads)
    injected: dict[int, list[Fault]] = {}
    for spec in faults:
        index, fault = parse_fault(spec)
        injected.setdefault(index, []).append(fault)
    return Fleet(gpus, seed, chosen, injected, time.time() if epoch is None else epoch)
