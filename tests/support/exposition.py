"""A simulated node's whole /metrics text, every catalog signal and the odd cases (an XID, a hot GPU, a quoted host)."""

from __future__ import annotations

from gpudash.exporter.collectors import all_signals
from gpudash.exporter.poller import Poller
from gpudash.exporter.sim.fleet import fleet_from_specs
from gpudash.exporter.sim.simulated import SimulatedSource


def full_simulated_output() -> str:
    fleet = fleet_from_specs(4, seed=2, faults=["1=xid:48@0+2m", "2=thermal@0"], epoch=0)
    poller = Poller(SimulatedSource(fleet), all_signals(nvlink_per_link=True).keys, slow_keys=(),
                    hostname='we"ird\\host')
    for loop in ("static", "fast"):
        poller.sweep(loop, now=600.0)
    return poller.exposition.body.decode()


def parse_exposition(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Samples of a /metrics text by metric name: (labels, value), parsed by prometheus_client's parser."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return out
