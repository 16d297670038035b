"""A simulated node's whole /metrics text, every catalog signal and the odd cases (an XID, a hot GPU, a quoted host)."""

from __future__ import annotations

from gpudash.exporter.collectors import all_signals
from gpudash.exporter.poller import Poller
from gpudash.exporter.sim.fleet import fleet_from_specs
from gpudash.exporter.sim.source import SimulatedSource


def full_simulated_output() -> str:
    fleet = fleet_from_specs(4, seed=2, faults=["1=xid:48@0+2m", "2=thermal@0"], epoch=0)
    poller = Poller(SimulatedSource(fleet), all_signals().keys, slow_keys=(), hostname='we"ird\\host')
    for loop in ("static", "fast"):
        poller.sweep(loop, now=600.0)
    return poller.exposition.body.decode()
