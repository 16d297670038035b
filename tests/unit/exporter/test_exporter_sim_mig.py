"""`--sim-mig`: a simulated GPU partitioned with MIG publishes its instances as a real one does."""

from __future__ import annotations

from dataclasses import replace

import pytest
from support.cli import gpudash

from gpudash.doctor.observed import parse_exposition
from gpudash.errors import UsageError
from gpudash.exporter.poller import Poller
from gpudash.exporter.sim.fleet import fleet_from_specs
from gpudash.exporter.sim.mig_layout import parse_mig
from gpudash.exporter.sim.simulated import SimulatedSource


def test_profiles_get_the_instance_ids_nvml_places_them_at() -> None:
    layout = parse_mig(["0=3g.71gb,1g.18gb,1g.18gb", "2=7g.141gb"])
    fleet = replace(fleet_from_specs(4, seed=3, workloads=["0=train"], epoch=0.0), mig=layout)
    poller = Poller(SimulatedSource(fleet), ["fb_used", "fb_total", "sm_active"], slow_keys={"mig_instances"})
    for loop in ("static", "slow", "fast"):
        poller.sweep(loop, now=600.0)
    samples = parse_exposition(poller.exposition.body.decode())
    total = {(s.labels["gpu"], s.labels.get("GPU_I_ID"), s.labels.get("GPU_I_PROFILE")): s.value
             for s in samples["DCGM_FI_DEV_FB_TOTAL"]}
    assert total[("0", "1", "3g.71gb")] == 71 * 1024 and total[("0", "7", "1g.18gb")] == 18 * 1024
    assert ("0", "8", "1g.18gb") in total and ("2", "0", "7g.141gb") in total
    assert {gpu for gpu, gi, _ in total if gi is None} == {"0", "1", "2", "3"}  # every GPU's own series stays
    assert not any(gpu in ("1", "3") and gi is not None for gpu, gi, _ in total)  # unpartitioned: nothing more
    used = {s.labels.get("GPU_I_ID"): s.value for s in samples["DCGM_FI_DEV_FB_USED"] if s.labels["gpu"] == "0"}
    assert 0 < used["1"] <= used[None] and used["7"] <= 18 * 1024  # the training GPU's memory, shared by slices
    active = [s for s in samples["DCGM_FI_PROF_SM_ACTIVE"] if s.labels.get("GPU_I_ID") == "1"]
    assert active and 0 < active[0].value <= 1


@pytest.mark.parametrize(("spec", "why"), [
    ("0=2g", "expected IDX=PROFILE"),
    ("x=1g.18gb", "expected IDX=PROFILE"),
    ("0=4g.71gb,4g.71gb", "8 slices; a GPU has 7"),
    ("0=3g.71gb,3g.71gb,3g.71gb", "9 slices"),
])
def test_a_layout_that_cannot_be_is_refused_naming_the_flag(spec: str, why: str) -> None:
    with pytest.raises(UsageError, match=rf"--sim-mig '{spec}'.*{why}"):
        parse_mig([spec])


def test_the_cli_refuses_sim_mig_on_real_gpus_and_a_gpu_out_of_range() -> None:
    done = gpudash("exporter", "--sim-mig", "0=1g.18gb")
    assert done.code == 2 and done.err.startswith("gpudash: --sim-mig needs --simulate N"), done.err
    done = gpudash("exporter", "--simulate", "2", "--sim-mig", "5=1g.18gb", "--listen", "127.0.0.1:0")
    assert done.code == 2 and "GPU index 5 out of range" in done.err and done.err.count("\n") == 1, done.err
