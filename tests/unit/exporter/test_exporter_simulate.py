"""The simulated fleet: deterministic, consistent units, and each fault does what its docstring says."""

from __future__ import annotations

import itertools

import pytest

from gpudash.catalog import BY_KEY, CLOCK_EVENT_REASONS
from gpudash.errors import UsageError
from gpudash.exporter.sim.fleet import Fleet, fleet_from_specs
from gpudash.exporter.sim.simulated import SimulatedSource
from gpudash.exporter.sim.spec import Fault, parse_fault

BIT = {name: bit for bit, name in CLOCK_EVENT_REASONS}


def test_same_seed_same_readings_in_any_order() -> None:
    a = fleet_from_specs(4, seed=3, faults=["1=leak:10m@2m"], epoch=0)
    b = fleet_from_specs(4, seed=3, faults=["1=leak:10m@2m"], epoch=0)
    late_first = b.sample(7200.0)  # fills b's counter integral out of order
    assert a.sample(7200.0) == late_first
    assert [a.sample(t) for t in (0, 15, 600, 3000)] == [b.sample(t) for t in (0, 15, 600, 3000)]
    c = fleet_from_specs(4, seed=4, epoch=0)
    assert [g.uuid for g in a.identities] != [g.uuid for g in c.identities]
    assert len({g.uuid for g in a.identities}) == 4


def test_values_are_catalog_keys_in_dcgm_units() -> None:
    fleet = Fleet(8, seed=1)
    for t in (0.0, 30.0, 400.0, 1830.0):
        for reading in fleet.sample(t):
            assert set(reading.values) <= set(BY_KEY)
            v = reading.values
            assert v["fb_used"] + v["fb_free"] + v["fb_reserved"] == pytest.approx(v["fb_total"])
            assert 0 <= v["gpu_util"] <= 100
            assert 0 <= v["tensor_active"] <= 1
            assert 50 <= v["power"] <= v["power_limit"]
            assert v["sm_clock"] <= v["sm_clock_max"]


def test_counters_never_decrease_and_match_power() -> None:
    fleet = Fleet(2, seed=5)
    energy = [fleet.sample_gpu(0, float(t)).values["energy"] for t in range(0, 7200, 15)]
    assert all(b >= a for a, b in itertools.pairwise(energy))
    mean_power = (energy[-1] - energy[0]) / 1000.0 / (7185.0)
    powers = [fleet.sample_gpu(0, float(t)).values["power"] for t in range(0, 7200, 15)]
    assert mean_power == pytest.approx(sum(powers) / len(powers), rel=0.1)


def test_training_has_stalls_and_checkpoints_idle_stays_idle() -> None:
    fleet = fleet_from_specs(2, seed=7, workloads=["1=idle"], epoch=0)
    util = [fleet.sample_gpu(0, float(t)).values["gpu_util"] for t in range(300, 4 * 3600, 15)]
    assert sum(u > 90 for u in util) > 0.8 * len(util)
    assert any(u < 30 for u in util)  # a stall or a checkpoint
    ckpt = fleet.sample_gpu(0, 1805.0).values
    assert ckpt["gpu_util"] < 10 and ckpt["pcie_tx"] > 5e9
    idle = fleet.sample_gpu(1, 1000.0)
    assert idle.values["gpu_util"] == 0 and idle.processes == ()
    assert int(idle.values["clock_event_reasons"]) & BIT["gpu_idle"]


def test_inference_loads_to_97_percent_then_flat() -> None:
    fleet = fleet_from_specs(1, workloads=["0=inference"], epoch=0)
    used = [fleet.sample_gpu(0, float(t)).values for t in (120, 1800, 3600)]
    for v in used:
        assert v["fb_used"] / v["fb_total"] == pytest.approx(0.97, abs=0.005)


def test_leak_fills_memory_then_the_job_dies() -> None:
    fleet = fleet_from_specs(2, faults=["1=leak:10m@5m"], epoch=0)
    before = fleet.sample_gpu(1, 290.0).values
    near = fleet.sample_gpu(1, 295.0 + 590.0).values
    after = fleet.sample_gpu(1, 1000.0)
    assert near["fb_used"] / near["fb_total"] > 0.97 > before["fb_used"] / before["fb_total"]
    assert after.values["fb_used"] == 0 and after.values["gpu_util"] == 0 and after.processes == ()
    assert fleet.sample_gpu(0, 1000.0).values["gpu_util"] > 50  # the neighbour keeps training


def test_thermal_fault_sets_reasons_and_drops_the_clock() -> None:
    fleet = fleet_from_specs(2, seed=7, faults=["0=thermal@5m+15m"], epoch=0)
    hot = fleet.sample_gpu(0, 900.0).values
    reasons = int(hot["clock_event_reasons"])
    assert hot["gpu_temp"] >= 89
    assert reasons & BIT["sw_thermal_slowdown"] and reasons & BIT["hw_thermal_slowdown"]
    assert hot["sm_clock"] < 0.75 * hot["sm_clock_max"]
    cool = fleet.sample_gpu(0, 1200.0 + 900.0).values
    assert cool["gpu_temp"] < 80


def test_stall_keeps_memory_and_drops_work() -> None:
    fleet = fleet_from_specs(1, faults=["0=stall@10m+10m"], epoch=0)
    during = fleet.sample_gpu(0, 900.0)
    assert during.values["gpu_util"] == 0 and during.values["tensor_active"] == 0
    assert during.values["fb_used"] > 0.7 * during.values["fb_total"] and during.processes
    assert fleet.sample_gpu(0, 1300.0).values["gpu_util"] > 50


def test_xid_counts_repeat_and_last_code_resets() -> None:
    fleet = fleet_from_specs(1, faults=["0=xid:48@2m+3m"], epoch=1000.0)
    assert fleet.sample_gpu(0, 100.0).xid.counts == {}
    r = fleet.sample_gpu(0, 300.0)
    assert r.xid.counts == {48: 3} and r.values["xid_last"] == 48
    assert r.values["xid_last_time"] == 1000.0 + 240.0
    assert fleet.sample_gpu(0, 1000.0).values["xid_last"] == 0
    assert fleet.sample_gpu(0, 1000.0).xid.counts == {48: 3}


def test_lost_gpu_goes_down_and_comes_back_idle() -> None:
    fleet = fleet_from_specs(3, faults=["1=lost@1m+5m"], epoch=0)
    down = fleet.sample(120.0)
    assert [r.up for r in down] == [True, False, True]
    assert down[1].values == {} and down[1].xid.counts == {79: 1}
    back = fleet.sample_gpu(1, 400.0)
    assert back.up and back.values["gpu_util"] == 0 and back.values["energy"] > 0
    assert fleet.sample_gpu(1, 1e6).up


def test_source_reads_only_what_is_asked() -> None:
    fleet = fleet_from_specs(2, epoch=100.0)
    source = SimulatedSource(fleet)
    reading = source.read(0, frozenset({"gpu_util", "fb_used", "vgpu_license"}), now=400.0)
    assert set(reading.values) == {"gpu_util", "fb_used"}
    assert reading.unsupported == {"vgpu_license"} and reading.processes is None
    assert reading.values == {k: fleet.sample_gpu(0, 300.0).values[k] for k in ("gpu_util", "fb_used")}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("2=leak", (2, Fault("leak"))),
        ("5=thermal:93@10m+15m", (5, Fault("thermal", 600.0, 900.0, 93.0))),
        ("3=xid:48@120", (3, Fault("xid", 120.0, None, 48.0))),
        ("4=lost@1h30m+5m", (4, Fault("lost", 5400.0, 300.0))),
        ("0=leak:20m", (0, Fault("leak", 60.0, None, 1200.0))),
    ],
)
def test_parse_fault(spec: str, expected: tuple[int, Fault]) -> None:
    assert parse_fault(spec) == expected


@pytest.mark.parametrize(
    ("spec", "message"),
    [("2=melt", "unknown fault 'melt'"), ("leak", "expected IDX=KIND"), ("1=xid:abc", "bad number")],
)
def test_bad_fault_specs_are_one_clear_line(spec: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_fault(spec)


def test_out_of_range_gpu_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="GPU index 9 out of range"):
        fleet_from_specs(8, faults=["9=leak"])
    with pytest.raises(UsageError, match="--workload '1=gaming'"):
        fleet_from_specs(8, workloads=["1=gaming"])
