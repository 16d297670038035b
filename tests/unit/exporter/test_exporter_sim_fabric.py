"""The simulated node's InfiniBand ports (node_exporter's names) and fabric state, healthy and faulty."""

from __future__ import annotations

import pytest

from gpudash import infiniband as ib
from gpudash.errors import UsageError
from gpudash.exporter.sim.fabric import FLAP_DOWN_SECONDS, NDR_BYTES_PER_SECOND, port_values
from gpudash.exporter.sim.fleet import fleet_from_specs
from gpudash.exporter.sim.simulated import SimulatedSource
from gpudash.exporter.sim.spec import Fault, parse_fault


def _rate(name: str, faults: list[Fault], a: float, b: float, busy: bool = True) -> float:
    return (port_values(1, 0, b, faults, busy)[name] - port_values(1, 0, a, faults, busy)[name]) / (b - a)


def _congestion(faults: list[Fault], a: float, b: float) -> float:
    wait, words = _rate(ib.TRANSMIT_WAIT, faults, a, b), _rate(ib.TRANSMITTED_BYTES, faults, a, b) / 4
    return wait / (wait + words)


def test_a_healthy_training_port_carries_traffic_and_counts_no_error() -> None:
    values = port_values(1, 0, 3600, [], True)
    assert values[ib.STATE] == ib.ACTIVE and values[ib.PHYSICAL_STATE] == ib.LINK_UP
    assert values[ib.RATE] == NDR_BYTES_PER_SECOND
    assert 0.3 < _rate(ib.TRANSMITTED_BYTES, [], 100, 200) / NDR_BYTES_PER_SECOND < 0.5
    assert _congestion([], 100, 200) == pytest.approx(0.02, abs=0.005)
    for name in (ib.LINK_DOWNED, ib.SYMBOL_ERRORS, ib.LINK_INTEGRITY_ERRORS, ib.RECEIVE_ERRORS):
        assert values[name] == 0
    assert _rate(ib.TRANSMITTED_BYTES, [], 100, 200, busy=False) < 0.01 * NDR_BYTES_PER_SECOND


def test_a_down_port_reads_down_then_back_with_one_event() -> None:
    down = [Fault("ib-down", 60, 120)]
    assert port_values(1, 0, 100, down, True)[ib.STATE] == ib.DOWN
    assert port_values(1, 0, 100, down, True)[ib.PHYSICAL_STATE] == ib.POLLING
    after = port_values(1, 0, 400, down, True)
    assert after[ib.STATE] == ib.ACTIVE and after[ib.LINK_DOWNED] == 1
    assert _rate(ib.TRANSMITTED_BYTES, down, 70, 170) == 0


def test_a_flapping_port_counts_a_downed_link_each_period() -> None:
    flap = [Fault("ib-flap", 0, None, 60)]
    assert port_values(1, 0, 600, flap, True)[ib.LINK_DOWNED] == 10
    assert port_values(1, 0, 5, flap, True)[ib.STATE] == ib.DOWN
    assert port_values(1, 0, FLAP_DOWN_SECONDS + 5, flap, True)[ib.STATE] == ib.ACTIVE


def test_a_congested_port_waits_and_sends_less() -> None:
    congested = [Fault("ib-congested", 100, None, 0.6)]
    assert _congestion(congested, 200, 300) == pytest.approx(0.6, abs=0.01)
    assert _rate(ib.TRANSMITTED_BYTES, congested, 200, 300) < 0.5 * _rate(ib.TRANSMITTED_BYTES, [], 200, 300)


def test_degraded_speed_and_symbol_bursts() -> None:
    assert port_values(1, 0, 200, [Fault("ib-degraded", 100)], True)[ib.RATE] == NDR_BYTES_PER_SECOND / 2
    burst = [Fault("ib-symbol-burst", 100, 60, 20)]
    assert port_values(1, 0, 1000, burst, True)[ib.SYMBOL_ERRORS] == 1200
    assert port_values(1, 0, 1000, burst, True)[ib.LINK_INTEGRITY_ERRORS] == 12


def test_the_simulated_endpoint_serves_every_infiniband_family_per_port() -> None:
    source = SimulatedSource(fleet_from_specs(8, 0, [], ["4=fabric-failure@0"]))
    text = source.node_series(source.fleet.epoch + 300)
    for name, kind, _ in ib.SERIES:
        assert f"# TYPE {name} {kind}\n" in text
        assert text.count(f"\n{name}{{") == 8
    assert 'node_infiniband_state_id{device="mlx5_7",port="1"} 4' in text
    assert [(p.gpu.index, p.nic.device) for p in source.nics()] == [(i, f"mlx5_{i}") for i in range(8)]
    status = [source.read(i, frozenset({"fabric_status"}), source.fleet.epoch + 300).values["fabric_status"]
              for i in range(8)]
    assert status == [3, 3, 3, 3, 4, 3, 3, 3]


@pytest.mark.parametrize("spec", ["1=ib-congested:1.5", "1=ib-degraded:0", "1=ib-flap:-3"])
def test_bad_fabric_fault_arguments_are_one_line_errors(spec: str) -> None:
    with pytest.raises(UsageError, match=r"^--fault '1=ib-"):
        parse_fault(spec)
