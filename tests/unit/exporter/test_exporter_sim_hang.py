"""The simulated `hang` fault: a hung collective's GPUs spin at ~100 % utilization doing no work."""

from __future__ import annotations

from gpudash.exporter.sim.fleet import fleet_from_specs


def test_a_hung_gpu_reads_busy_while_tensor_dram_and_power_sit_near_idle() -> None:
    hung = fleet_from_specs(2, seed=3, faults=["0=hang@10m"], epoch=0.0)
    for t in (900.0, 1800.0, 3600.0):
        before, now = hung.sample_gpu(0, 300.0), hung.sample_gpu(0, t)
        v = now.values
        assert v["gpu_util"] >= 97
        assert v["tensor_active"] < 0.01 and v["dram_active"] < 0.01
        assert v["power"] < 0.25 * v["power_limit"] and v["power"] < 175
        assert v["fb_used"] >= 0.9 * before.values["fb_used"]  # the job still holds its memory
    # the GPU beside it, without the fault, trains: tensor work and power well up, on average
    peer = [hung.sample_gpu(1, 900.0 + 15.0 * k).values for k in range(240)]
    assert sum(p["tensor_active"] for p in peer) / len(peer) > 0.2
    assert sum(p["power"] for p in peer) / len(peer) > 0.5 * peer[0]["power_limit"]
