"""One simulated GPU's instantaneous state, before the node turns it into readings and counters."""

from __future__ import annotations

from dataclasses import dataclass

from gpudash.exporter.source import ProcessUsage


@dataclass
class GpuState:
    """What a workload and its faults decide; fleet.Fleet.sample_gpu derives clocks, heat and power from it."""

    util: float = 0.0
    fb_used: float = 0.0
    power_activity: float = 0.0  # 0..1 of the way from idle power to the cap
    tensor: float = 0.0
    dram: float = 0.0
    pcie_tx: float = 1e5
    pcie_rx: float = 1e5
    nvlink_kib_s: float = 0.0
    process: str | None = None
    heat_excess: float = 0.0  # thermal fault: degrees above what the power draw explains
    sm_active: float | None = None  # None: follows utilization (the busy fraction is the SM-active fraction)
    clock_factor: float = 1.0  # a throttled straggler: the SM clock this much of what it would be
    power_capped: bool = False  # the sw_power_cap clock event (a straggler held under a lowered power limit)
    foreign: ProcessUsage | None = None  # another job's process on this GPU
    foreign_job: str = ""
