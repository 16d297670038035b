"""`gpudash_exporter_field_unsupported`: one series per GPU and published field NVML answers NotSupported for."""

from __future__ import annotations

from gpudash.catalog import EXPORTER_UNSUPPORTED, SIGNALS
from gpudash.doctor.observed import Sample, parse_exposition
from gpudash.exporter.poller import Poller
from gpudash.exporter.sim.fleet import Fleet
from gpudash.exporter.sim.simulated import SimulatedSource

NVLINK = "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"


def _swept(fleet: Fleet, published: list[str]) -> dict[str, tuple[Sample, ...]]:
    poller = Poller(SimulatedSource(fleet), published, hostname="node-1")
    for loop in ("static", "slow", "fast"):
        poller.sweep(loop, now=fleet.epoch + 600)
    return parse_exposition(poller.exposition.body.decode())


def test_each_gpu_names_the_published_fields_it_cannot_give() -> None:
    fleet = Fleet(3, seed=2, epoch=1_800_000_000.0, unsupported=frozenset({"nvlink_bandwidth"}))
    samples = _swept(fleet, [s.key for s in SIGNALS])
    said = {(s.labels["gpu"], s.labels["field"]) for s in samples[EXPORTER_UNSUPPORTED]}
    assert {(str(g), NVLINK) for g in range(3)} <= said
    assert NVLINK not in samples  # its series is left out
    # only fields NVML cannot give: nothing the GPU reports is named
    assert not {field for _, field in said} & set(samples)
    one = next(s for s in samples[EXPORTER_UNSUPPORTED] if s.labels["field"] == NVLINK)
    assert one.value == 1 and one.labels["hostname"] == "node-1" and one.labels["UUID"].startswith("GPU-")


def test_a_field_not_published_is_not_named_and_a_full_gpu_names_none_of_its_own() -> None:
    lacking = Fleet(2, seed=2, epoch=1_800_000_000.0, unsupported=frozenset({"nvlink_bandwidth"}))
    samples = _swept(lacking, ["gpu_util", "power"])  # NVLink bandwidth is not asked for
    assert EXPORTER_UNSUPPORTED not in samples
    full = _swept(Fleet(2, seed=2, epoch=1_800_000_000.0), ["gpu_util", "nvlink_bandwidth"])
    assert EXPORTER_UNSUPPORTED not in full and NVLINK in full


def test_a_lost_gpu_names_nothing() -> None:
    from gpudash.exporter.sim.spec import parse_fault

    index, fault = parse_fault("1=lost@0")
    fleet = Fleet(2, seed=2, faults={index: [fault]}, epoch=1_800_000_000.0,
                  unsupported=frozenset({"nvlink_bandwidth"}))
    said = {s.labels["gpu"] for s in _swept(fleet, ["nvlink_bandwidth"])[EXPORTER_UNSUPPORTED]}
    assert said == {"0"}
