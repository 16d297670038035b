"""The simulated GPU's health: flat when healthy, and each health fault moves the series its alert reads."""

from __future__ import annotations

import pytest

from gpudash.catalog import NVLINK_ERROR_KINDS
from gpudash.errors import UsageError
from gpudash.exporter.collectors import all_signals
from gpudash.exporter.poller import Poller
from gpudash.exporter.sim.faults_health import NVLINK_LINKS, storm_link
from gpudash.exporter.sim.fleet import fleet_from_specs
from gpudash.exporter.sim.simulated import SimulatedSource
from gpudash.exporter.sim.spec import parse_fault
from gpudash.exporter.source import GpuReading

ERROR_COUNTERS = ("ecc_dbe_vol", "ecc_dbe_agg", "remapped_rows_unc", "remapped_rows_cor", "row_remap_pending",
                  "row_remap_failure", "recovery_action", *(key for _, key in NVLINK_ERROR_KINDS))


def _at(spec: list[str], t: float, gpus: int = 2, index: int = 0) -> GpuReading:
    return fleet_from_specs(gpus, seed=3, faults=spec, epoch=0).sample_gpu(index, t)


def test_a_healthy_gpu_keeps_every_error_counter_flat_for_a_day() -> None:
    fleet = fleet_from_specs(8, seed=3, epoch=0)
    for i in range(8):
        first, last = fleet.sample_gpu(i, 0.0), fleet.sample_gpu(i, 86400.0)
        for key in ERROR_COUNTERS:
            assert first.values[key] == last.values[key] == 0, (i, key)
        assert last.values["ecc_sbe_vol"] <= 8  # a corrected error every 3 h at most
        assert last.links is not None and len(last.links) == NVLINK_LINKS and all(link.up for link in last.links)
        assert last.xid.counts == {}


def test_h200_limits_and_the_margin_follow_the_temperature() -> None:
    reading = _at([], 1800.0)
    v = reading.values
    assert (v["gpu_max_op_temp"], v["mem_max_op_temp"], v["slowdown_temp"], v["shutdown_temp"]) == (87, 95, 89, 95)
    assert v["temp_margin"] == 87 - v["gpu_temp"]
    assert {"retired_sbe", "retired_dbe", "retired_pending"} <= reading.unsupported  # Hopper remaps rows instead


def test_dbe_burst_jumps_the_counters_sets_pending_and_raises_48_and_63() -> None:
    spec = ["0=dbe-burst:6@10m+20m"]
    before, during, after = _at(spec, 599.0), _at(spec, 700.0), _at(spec, 1900.0)
    assert before.values["ecc_dbe_vol"] == before.values["ecc_dbe_agg"] == 0
    assert during.values["ecc_dbe_vol"] == during.values["ecc_dbe_agg"] == 6
    assert during.values["row_remap_pending"] == 1 and during.values["remapped_rows_unc"] == 1
    assert during.values["recovery_action"] == 4  # drain and reset
    assert during.xid.counts == {48: 1, 63: 1}
    # after the reset: volatile counters and pending clear, the aggregate and the remapped row stay
    assert after.values["ecc_dbe_vol"] == 0 and after.values["ecc_dbe_agg"] == 6
    assert after.values["row_remap_pending"] == 0 and after.values["remapped_rows_unc"] == 1
    assert _at(spec, 700.0, index=1).values["ecc_dbe_agg"] == 0  # the neighbour is untouched


def test_remap_pending_adds_a_correctable_row_and_xid_63() -> None:
    reading = _at(["0=remap-pending@1m"], 120.0)
    assert reading.values["row_remap_pending"] == 1 and reading.values["remapped_rows_cor"] == 1
    assert reading.values["row_remap_failure"] == 0 and reading.xid.counts == {63: 1}


def test_remap_failure_sets_the_flag_for_good_and_xid_64() -> None:
    spec = ["0=remap-failure@1m+5m"]
    assert _at(spec, 30.0).values["row_remap_failure"] == 0
    late = _at(spec, 7200.0)
    assert late.values["row_remap_failure"] == 1 and late.xid.counts == {64: 1}


def test_nvlink_crc_storm_rises_by_hundreds_a_second_on_one_link() -> None:
    fleet = fleet_from_specs(2, seed=3, faults=["1=nvlink-crc-storm:400@1m+10m"], epoch=0)
    a, b = fleet.sample_gpu(1, 120.0), fleet.sample_gpu(1, 130.0)
    assert (b.values["nvlink_crc_flit"] - a.values["nvlink_crc_flit"]) / 10 == pytest.approx(400, abs=1)
    assert b.values["nvlink_replay"] > a.values["nvlink_replay"] > 0
    assert a.links is not None and b.links is not None
    hit = storm_link(3, 1)
    rising = [k for k in range(NVLINK_LINKS) if b.links[k].errors["crc_flit"] > a.links[k].errors["crc_flit"]]
    assert rising == [hit]
    over = fleet.sample_gpu(1, 4000.0).values["nvlink_crc_flit"]
    assert over == fleet.sample_gpu(1, 5000.0).values["nvlink_crc_flit"] == 400 * 600  # flat after the storm


def test_fell_off_bus_is_down_with_xid_79_and_its_identity_kept() -> None:
    fleet = fleet_from_specs(3, seed=3, faults=["2=fell-off-bus@1m"], epoch=1_700_000_000)
    source = SimulatedSource(fleet)
    poller = Poller(source, all_signals().keys, slow_keys=source.costly_keys(), hostname="node")
    for t in (30.0, 90.0):
        for loop in ("static", "slow", "fast"):
            poller.sweep(loop, now=fleet.epoch + t)
    text = poller.exposition.body.decode()
    gpu2 = [line for line in text.splitlines() if 'gpu="2"' in line]
    names = {line.split("{")[0] for line in gpu2}
    assert names == {"gpudash_gpu_up", "gpudash_xid_errors_total", "gpudash_xid_last_timestamp_seconds",
                     "DCGM_EXP_XID_ERRORS_COUNT", "DCGM_EXP_XID_ERRORS_TOTAL"}  # no peer_gpu="2": NVML cannot ask it
    up = next(line for line in gpu2 if line.startswith("gpudash_gpu_up"))
    identity = fleet.identities[2]
    assert up.endswith(" 0") and f'UUID="{identity.uuid}",pci_bus_id="{identity.pci_bus_id}"' in up
    assert any('xid="79",window_size_in_ms="300000"} 1' in line for line in gpu2)
    assert 'gpudash_node_gpus_expected{hostname="node",' in text and text.count("gpudash_node_gpus_expected{") == 1


def test_xid_of_any_code_counts_in_the_window() -> None:
    fleet = fleet_from_specs(1, seed=3, faults=["0=xid:119@1m+3m"], epoch=0)
    reading = fleet.sample_gpu(0, 240.0)
    assert reading.xid.counts == {119: 3} and [code for _, code in reading.xid.recent] == [119, 119, 119]


def test_clock_event_activations_are_counted_once_per_rise() -> None:
    fleet = fleet_from_specs(1, seed=3, faults=["0=thermal:93@2m"], epoch=0)
    source = SimulatedSource(fleet)
    poller = Poller(source, ("clock_event_reasons", "clock_events_count"), hostname="n")
    for t in range(200, 600, 5):
        poller.sweep("fast", now=float(t))
    text = poller.exposition.body.decode()
    lines = [line for line in text.splitlines() if line.startswith("DCGM_EXP_CLOCK_EVENTS_COUNT{")]
    counts = {line.split('clock_event="')[1].split('"')[0]: float(line.rsplit(" ", 1)[1])
              for line in lines if "clock_event=" in line}
    assert counts.get("sw_thermal", 0) >= 1 and counts.get("hw_thermal", 0) >= 1
    assert counts["sw_thermal"] < 80 / 2  # counted when it starts, not every sweep it stays on


@pytest.mark.parametrize(("fault", "key", "per_hour"), [
    ("nvlink-crc-trickle", "nvlink_crc_flit", 2), ("nvlink-replay-trickle", "nvlink_replay", 6),
    ("nvlink-replay-trickle", "nvlink_crc_flit", 6), ("sbe-trickle", "ecc_sbe_vol", 30)])
def test_a_trickle_counts_its_corrected_errors_at_its_rate_an_hour(fault: str, key: str, per_hour: int) -> None:
    before, after = _at([f"1={fault}@1h+4h"], 3600.0, index=1), _at([f"1={fault}@1h+4h"], 4 * 3600.0, index=1)
    assert after.values[key] - before.values[key] == 3 * per_hour
    assert _at([f"1={fault}:12@1h+4h"], 6 * 3600.0, index=1).values[key] - before.values[key] == 4 * 12  # stops
    if key.startswith("nvlink"):  # on one link, the storm's
        assert after.links is not None
        kind = next(k for k, total in NVLINK_ERROR_KINDS if total == key)
        assert [link.link for link in after.links if link.errors[kind]] == [storm_link(3, 1)]
    healthy = _at([f"1={fault}@1h+4h"], 4 * 3600.0, index=0)
    assert all(healthy.values[k] == 0 for k in ERROR_COUNTERS)


def test_health_fault_arguments_are_checked() -> None:
    assert parse_fault("3=nvlink-crc-storm:250@5m")[1].arg == 250
    with pytest.raises(UsageError, match="dbe-burst's argument must be a positive integer"):
        parse_fault("1=dbe-burst:0.5")
    with pytest.raises(UsageError, match="nvlink-crc-trickle's argument is errors an hour, more than 0"):
        parse_fault("1=nvlink-crc-trickle:0")
    with pytest.raises(UsageError, match="unknown fault 'fell-off'"):
        parse_fault("1=fell-off")


def test_same_seed_same_health_series() -> None:
    spec = ["0=nvlink-crc-storm@1m", "1=dbe-burst@2m"]
    a = fleet_from_specs(2, seed=9, faults=spec, epoch=0).sample(3600.0)
    b = fleet_from_specs(2, seed=9, faults=spec, epoch=0).sample(3600.0)
    assert a == b


def test_violation_time_grows_only_while_throttled() -> None:
    fleet = fleet_from_specs(2, seed=3, faults=["0=thermal:93@2m+10m"], epoch=0)
    thermal = [fleet.sample_gpu(0, float(t)).values["thermal_violation"] for t in (100, 400, 700, 2000, 3000)]
    assert thermal[0] == 0 < thermal[1] < thermal[2] < thermal[3] == thermal[4]  # ns, flat once it cooled
    assert thermal[2] - thermal[1] == pytest.approx(300e9)
    assert fleet.sample_gpu(1, 3000.0).values["thermal_violation"] == 0
    assert fleet.sample_gpu(0, 3000.0).values["power_violation"] == 0


def test_recovery_action_reads_its_value_with_xid_154_until_the_reset() -> None:
    spec = ["0=recovery-action:2@10m+1h"]
    assert _at(spec, 500.0).values["recovery_action"] == 0
    during = _at(spec, 1800.0)
    assert during.values["recovery_action"] == 2 and during.xid.counts == {154: 1}
    assert _at(spec, 4300.0).values["recovery_action"] == 0  # the reset at 1h10m cleared it
    assert _at(["0=recovery-action@10m"], 1800.0).values["recovery_action"] == 1  # default: a GPU reset
