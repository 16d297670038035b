"""One scenario of the alert corpus (`Scenario`): a simulated node, its jobs and faults, and what must fire.

bench/alert_corpus.py writes each as promtool input series; its scenarios and bench/scenarios_jobs.py's are
built from this.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpudash.exporter.sim.cluster_node import cluster_fleet
from gpudash.exporter.sim.fleet import Fleet, fleet_from_specs
from gpudash.exporter.sim.jobs import layout_from_specs
from gpudash.exporter.sim.spec import FABRIC_FAULTS, parse_node_fault

STEP = 15  # seconds between samples and between rule evaluations
HOST = "gpu-node-01"
GPUS = 8
SEED = 7

Sample = float | str | None  # a number, "stale" (the series just vanished), or None (absent)


@dataclass(frozen=True)
class Scenario:
    name: str
    kind: str  # "benign" or "fault"
    description: str
    hours: float = 4.0
    workloads: tuple[str, ...] = ()
    faults: tuple[str, ...] = ()
    fault_gpu: int | None = None  # the GPU a fault hits; None: the whole node (or fault_gpus)
    fault_gpus: tuple[int, ...] = ()  # the GPUs a fault hits, when it is several but not the whole node
    fault_host: str = HOST  # the node those GPUs are on (a peer's alerts are off target)
    jobs: tuple[str, ...] = ()  # --sim-job specs on HOST: GPU series carry hpc_job while their job runs
    peers: tuple[str, ...] = ()  # other nodes of the jobs, written beside HOST with no fault of their own
    profiling: bool = True  # False: no SM or tensor activity series, whatever the flavour
    cpu_load: float = 0.45  # node_load1 per core in normal operation
    saturated: tuple[tuple[float, float], ...] = ()  # (start, end) s: CPU saturated
    starved: tuple[float, float] | None = None  # (start, end) s: input pipeline starves the GPUs
    target_down: tuple[float, float] | None = None  # (start, end) s: exporter unreachable
    hbm_heat: tuple[float, float, float] | None = None  # (start, end, degrees) s, C: HBM this much warmer
    expected: tuple[str, ...] = ()  # the gpudash alerts meant to catch the fault
    naive_expected: tuple[str, ...] = ()  # the naive rule (if any) that watches the signal the fault moves
    notes: dict[str, float] = field(default_factory=dict)

    @property
    def samples(self) -> int:
        return int(self.hours * 3600 // STEP) + 1

    @property
    def hosts(self) -> tuple[str, ...]:
        return (HOST, *self.peers)

    def fleet(self, host: str = HOST) -> Fleet:
        if not self.jobs:
            return fleet_from_specs(GPUS, SEED, self.workloads, self.faults, epoch=0.0)
        layout = layout_from_specs(self.jobs, False, SEED, self.hosts, GPUS)
        return cluster_fleet(GPUS, SEED, self.faults, node=host, layout=layout, epoch=0.0)

    @property
    def fabric(self) -> bool:
        """Whether a fault hits the fabric: then the node's InfiniBand ports and the GPUs' fabric state are written."""
        return any(parse_node_fault(f)[2].kind in FABRIC_FAULTS for f in self.faults)

    @property
    def targets(self) -> tuple[int, ...]:
        """The GPUs the fault hits; () for the whole node."""
        return self.fault_gpus or (() if self.fault_gpu is None else (self.fault_gpu,))

    @property
    def link_errors(self) -> bool:
        return any("nvlink" in f for f in self.faults)

    def on(self, gpu: int) -> bool:
        """Whether the fault hits this GPU."""
        return not self.targets or gpu in self.targets

    def hits(self, host: str, gpu: str) -> bool:
        """Whether an alert on `host` ("" for a job's alert, which names no node) and `gpu` ("" for the node's)
        is where the fault is."""
        on_node = host in ("", self.fault_host)
        return on_node and (not self.targets or gpu in ("", *map(str, self.targets)))

    @property
    def fault_window(self) -> tuple[float, float] | None:
        """When the fault is present: from its start to its end (or the end of the scenario)."""
        if self.target_down:
            return self.target_down
        if self.starved:
            return self.starved
        if self.hbm_heat and self.kind == "fault":
            return self.hbm_heat[0], min(self.hbm_heat[1], self.hours * 3600)
        if not self.faults:
            return None
        fault = parse_node_fault(self.faults[0])[2]
        return fault.start, min(fault.end, self.hours * 3600)
