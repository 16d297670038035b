"""The simulated node as the exporter's Source: the same small interface as NVML, so the poller cannot tell.

Its GPUs are H200 SXMs on one NVLink fabric: P2P over NVLink reads OK (0) to every peer, and a peer that is
lost is left out, as NVML cannot answer for it. A GPU the fleet partitions (``Fleet.mig``) has MIG instances.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from gpudash.exporter.health_reads import NVLINK_KEYS
from gpudash.exporter.nic_affinity import GpuNic
from gpudash.exporter.sim import fabric
from gpudash.exporter.sim.fleet import Fleet
from gpudash.exporter.sim.mig_layout import instances
from gpudash.exporter.source import (
    COSTLY_KEYS,
    MIG_INSTANCES,
    MIG_KEYS,
    PROCESS_KEYS,
    GpuIdentity,
    GpuReading,
    MigInstance,
    PeerStatus,
    ProcessUsage,
)

P2P_OK = 0  # nvmlGpuP2PStatus_t NVML_P2P_STATUS_OK


class SimulatedSource:
    """The exporter's Source over a Fleet: t is the wall clock minus the fleet's epoch."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet

    def driver_version(self) -> str:
        return self.fleet.driver_version

    def gpus(self) -> Sequence[GpuIdentity]:
        return self.fleet.identities

    def costly_keys(self) -> frozenset[str]:
        return COSTLY_KEYS  # cheap here, but read on the same cadence as on a real node

    def read(self, index: int, keys: frozenset[str], now: float) -> GpuReading:
        full = self.fleet.sample_gpu(index, now - self.fleet.epoch)
        if not full.up:
            return full
        return GpuReading(
            index,
            True,
            {k: v for k, v in full.values.items() if k in keys},
            full.unsupported & keys,
            {},
            full.xid,
            self._processes(full.processes, keys) if keys & PROCESS_KEYS else None,
            full.links if keys & NVLINK_KEYS else None,
            self._peers(index, now - self.fleet.epoch) if "p2p_status" in keys else None,
            self._instances(index, full.values, MIG_KEYS) if MIG_INSTANCES in keys else None,
        )

    @staticmethod
    def _processes(processes: tuple[ProcessUsage, ...] | None, keys: frozenset[str]) -> tuple[ProcessUsage, ...] | None:
        """The processes, with their SM share only when it is asked for (as NVML reads it only then)."""
        if processes is None or "process_sm_util" in keys:
            return processes
        return tuple(replace(p, sm_util=None) for p in processes)

    def _instances(self, index: int, values: Mapping[str, float], keys: frozenset[str]) -> tuple[MigInstance, ...]:
        profiles = self.fleet.mig.get(index, ())
        return instances(self.fleet.identities[index].uuid, profiles, values, keys) if profiles else ()

    def _peers(self, index: int, t: float) -> tuple[PeerStatus, ...]:
        return tuple(PeerStatus(peer, P2P_OK) for peer in range(self.fleet.gpus)
                     if peer != index and not self.fleet.lost(peer, max(0.0, t)))

    def nics(self) -> tuple[GpuNic, ...]:
        """Each GPU's InfiniBand port (gpudash.exporter.sim.fabric)."""
        return tuple(fabric.port_of(g) for g in self.fleet.identities)

    def node_series(self, now: float) -> str:
        """The ports as node_exporter's infiniband collector would publish them at ``now``."""
        t = max(0.0, now - self.fleet.epoch)
        fleet = self.fleet
        ports = [(pair, fabric.port_values(fleet.seed, i, t, fleet.faults.get(i, ()), fleet.workload(i) != "idle"))
                 for pair in self.nics() for i in (pair.gpu.index,)]
        return "".join(fabric.exposition(ports))

    def close(self) -> None:
        """Nothing to release."""

