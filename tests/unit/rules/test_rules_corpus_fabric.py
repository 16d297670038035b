"""The corpus's fabric scenarios (bench/scenarios_fabric.py): the series the fabric rules read are written."""

from __future__ import annotations

from bench import alert_corpus as corpus
from gpudash import infiniband as ib

FABRIC = {  # scenario -> the alert meant to catch it (None: a benign one)
    "ib-flapping": "GPUFabricPortFlapping", "ib-congested-straggler": "GPUFabricStragglerCongestion",
    "ib-half-speed": "GPUFabricPortDegraded", "fabric-manager-failure": "GPUFabricState",
    "ib-traffic-burst": None, "ib-rare-symbol-error": None, "ib-planned-reset": None,
}


def _one(series: dict[str, list[corpus.Sample]], name: str, *parts: str) -> list[corpus.Sample]:
    (key,) = [k for k in series if k.startswith(name + "{") and all(p in k for p in parts)]
    return series[key]


def test_the_fabric_scenarios_are_in_the_corpus_with_the_alert_each_must_raise() -> None:
    for name, alert in FABRIC.items():
        scenario = corpus.BY_NAME[name]
        assert scenario.fabric, name
        assert scenario.expected == ((alert,) if alert else ()), name
        assert scenario.kind == ("fault" if alert else "benign"), name
    assert not corpus.BY_NAME["straggler"].fabric  # no port series where no fault reaches the fabric


def test_ports_come_from_node_exporter_in_both_flavours_and_the_gpu_port_map_from_the_bundled_exporter() -> None:
    scenario = corpus.BY_NAME["ib-planned-reset"]
    bundled, dcgm = corpus.build_series(scenario, "bundled"), corpus.build_series(scenario, "dcgm")
    for series in (bundled, dcgm):
        state = _one(series, ib.STATE, 'device="mlx5_4"', 'instance="gpu-node-01:9100"')
        down = [i * corpus.STEP for i, v in enumerate(state) if v != ib.ACTIVE]
        assert down[0] == 4200 and down[-1] < 4200 + 120  # down for the reset's 2 minutes only
        assert _one(series, ib.LINK_DOWNED, 'device="mlx5_4"')[-1] == 1.0
        assert set(_one(series, ib.STATE, 'device="mlx5_3"')) == {float(ib.ACTIVE)}
    info = _one(bundled, ib.NIC_INFO, 'gpu="4"')
    assert set(info) == {1.0}
    (key,) = [k for k in bundled if k.startswith(ib.NIC_INFO) and 'gpu="4"' in k]
    assert 'device="mlx5_4"' in key and 'instance="gpu-node-01:9400"' in key
    assert not [k for k in dcgm if k.startswith(ib.NIC_INFO)]
    assert [v for v in _one(bundled, "DCGM_FI_DEV_FABRIC_MANAGER_STATUS", 'gpu="0"') if v != 3.0] == []


def test_the_sixteen_gpu_job_spans_two_nodes_and_only_the_straggler_port_congests() -> None:
    scenario = corpus.BY_NAME["ib-congested-straggler"]
    series = corpus.build_series(scenario, "bundled")
    held = {(k.split('instance="')[1].split('"')[0], k.split('gpu="')[1].split('"')[0])
            for k in series if k.startswith("DCGM_FI_DEV_GPU_UTIL{") and 'hpc_job="48213"' in k}
    assert len(held) == 16 and {host for host, _ in held} == {"gpu-node-01:9400", "gpu-node-02:9400"}
    at = int(7000 // corpus.STEP)  # within the fault

    def wait_share(host: str, device: str) -> float:
        wait = _one(series, ib.TRANSMIT_WAIT, f'instance="{host}:9100"', f'device="{device}"')
        sent = _one(series, ib.TRANSMITTED_BYTES, f'instance="{host}:9100"', f'device="{device}"')
        dw = float(wait[at]) - float(wait[at - 20])  # type: ignore[arg-type]
        ds = (float(sent[at]) - float(sent[at - 20])) / 4  # type: ignore[arg-type]
        return dw / (dw + ds)

    assert wait_share("gpu-node-01", "mlx5_5") >= 0.5
    assert wait_share("gpu-node-01", "mlx5_4") < 0.05 and wait_share("gpu-node-02", "mlx5_5") < 0.05


def test_a_fabric_manager_failure_reads_state_4_on_every_gpu_while_it_lasts() -> None:
    scenario = corpus.BY_NAME["fabric-manager-failure"]
    series = corpus.build_series(scenario, "bundled")
    assert scenario.fault_window == (4200.0, 7800.0)
    for gpu in range(corpus.GPUS):
        status = _one(series, "DCGM_FI_DEV_FABRIC_MANAGER_STATUS", f'gpu="{gpu}"')
        failed = [i * corpus.STEP for i, v in enumerate(status) if v == 4.0]
        assert failed[0] == 4200 and failed[-1] == 7800 - corpus.STEP
