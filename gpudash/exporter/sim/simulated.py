"""The simulated node as the exporter's Source: the same small interface as NVML, so the poller cannot tell."""

from __future__ import annotations

from collections.abc import Sequence

from gpudash.exporter.health_reads import NVLINK_KEYS
from gpudash.exporter.sim.fleet import Fleet
from gpudash.exporter.source import COSTLY_KEYS, GpuIdentity, GpuReading


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
            full.processes if "process_fb_used" in keys else None,
            full.links if keys & NVLINK_KEYS else None,
        )

    def close(self) -> None:
        """Nothing to release."""

