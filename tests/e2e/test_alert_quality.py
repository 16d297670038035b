"""The alert-quality report's promtool pipeline (bench/alert_quality.py) on scenarios of the corpus.

Each gpudash run is seconds of promtool CPU (hours of series, every rule every 15 s): a test runs the naive set
only where it asserts on it, and its runs side by side, one per CPU.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from support.slack import cpus

from bench import alert_corpus as corpus
from bench import alert_quality as quality


def test_report_pipeline_finds_the_xid_alert(tmp_path: Path) -> None:
    scenario = corpus.BY_NAME["xid-79"]
    ours, naive = quality.evaluate([scenario], "bundled", None, tmp_path, jobs=cpus())
    (outcome,) = ours
    assert [(f.alertname, f.severity, f.gpu) for f in outcome.fired] == [("GPUXidError", "critical", "6")]
    assert scenario.fault_window is not None
    assert outcome.first_catch() == scenario.fault_window[0]  # no for: on XID, caught at the first evaluation
    assert not outcome.false_alerts()
    assert naive[0].catches() == []  # the naive set has no XID rule


def _hbm_while_training(scenario: corpus.Scenario, gpu: int, since: float, until: float) -> list[float]:
    series = corpus.build_series(scenario, "bundled")
    (hbm,) = [v for k, v in series.items() if k.startswith("DCGM_FI_DEV_MEMORY_TEMP{") and f'gpu="{gpu}"' in k]
    return [float(x) for i, x in enumerate(hbm) if isinstance(x, float) and since <= i * corpus.STEP < until]


def test_busy_h200_with_hbm_in_the_low_80s_stays_quiet_and_an_hbm_at_its_own_limit_fires(tmp_path: Path) -> None:
    busy, hot = corpus.BY_NAME["busy-training-hbm-82"], corpus.BY_NAME["hbm-overheat"]
    readings = sorted(_hbm_while_training(busy, 0, 1800, 3 * 3600))
    assert 80 <= readings[len(readings) // 2] <= 85 and readings[-1] < 90  # what the scenario claims
    assert max(_hbm_while_training(hot, 4, 4500, 6000)) >= 95  # the simulated H200's memory limit
    for flavour in ("bundled", "dcgm"):  # each GPU's own limit, and the fixed fallback without one
        ours, _ = quality.evaluate([busy, hot], flavour, None, tmp_path / flavour, jobs=cpus(), naive=False)
        assert ours[0].fired == [], flavour
        fired = {(f.alertname, f.severity, f.gpu) for f in ours[1].fired}
        assert fired == {("GPUHighTemperature", "warning", "4"), ("GPUHighTemperature", "critical", "4")}, flavour
        assert ours[1].catches() and not ours[1].false_alerts(), flavour


HEALTH_FAULTS = {  # scenario -> the alert (severity, GPU) it must fire, from the bundled exporter's series
    "dbe-burst": ("GPUEccUncorrectable", "warning", "1"),
    "remap-pending": ("GPURowRemapPending", "warning", "2"),
    "remap-failure": ("GPURowRemapFailure", "critical", "3"),
    "nvlink-crc-storm": ("GPUNVLinkErrors", "critical", "4"),
    "fell-off-bus": ("GPUFellOffBus", "critical", "5"),
}


def test_each_health_fault_fires_its_alert_on_its_gpu_and_nothing_on_the_others(tmp_path: Path) -> None:
    scenarios = [corpus.BY_NAME[name] for name in (*HEALTH_FAULTS, "xid-classes")]
    ours, _ = quality.evaluate(scenarios, "bundled", None, tmp_path, jobs=cpus(), naive=False)
    for outcome in ours[:-1]:
        name = outcome.scenario.name
        assert HEALTH_FAULTS[name] in {(f.alertname, f.severity, f.gpu) for f in outcome.fired}, name
        assert outcome.catches() and not outcome.false_alerts(), name
    xids = ours[-1]
    assert {(f.severity, f.gpu) for f in xids.fired if f.alertname == "GPUXidError"} == {
        ("warning", "0"), ("warning", "1"), ("critical", "2"), ("info", "3"), ("warning", "4")}
    assert not xids.false_alerts()


def test_a_gpu_that_needs_a_third_reset_is_an_rma_at_the_third_and_nothing_else_is(tmp_path: Path) -> None:
    scenario = corpus.BY_NAME["repeat-offender"]
    third = scenario.notes["third_reset"]
    for flavour in corpus.FLAVOURS:  # the bundled exporter's counter and gauge; dcgm-exporter's gauge alone
        ours, _ = quality.evaluate([scenario], flavour, None, tmp_path / flavour, jobs=cpus(), naive=False)
        (outcome,) = ours
        offender = [f for f in outcome.fired if f.alertname == "GPURepeatOffender"]
        assert [(f.severity, f.gpu, f.first, f.episodes) for f in offender] == [("warning", "6", third, 1)], flavour
        assert not outcome.false_alerts(), flavour


CORRECTED = ("replay-trickle", "crc-trickle", "ecc-correctable-trickle")


def test_corrected_errors_fire_nothing_and_wear_on_healthy_gpus_stays_off_a_storms_page(tmp_path: Path) -> None:
    storm = corpus.BY_NAME["nvlink-crc-storm"]
    # the storm among GPUs that count two CRC flit errors an hour each: only the storming GPU may fire
    worn = dataclasses.replace(storm, name="nvlink-crc-storm-among-wear", faults=(
        *storm.faults, *(f"{i}=nvlink-crc-trickle:2" for i in range(corpus.GPUS) if i != storm.fault_gpu)))
    scenarios = [corpus.BY_NAME[name] for name in CORRECTED]
    ours, _ = quality.evaluate([*scenarios, worn], "bundled", None, tmp_path / "bundled", jobs=cpus(), naive=False)
    for outcome in ours[:-1]:
        assert outcome.fired == [], outcome.scenario.name
    # (the warning may join the latched critical once the storm stops: its errors are still in the hour's count)
    fired = {(f.alertname, f.severity, f.gpu) for f in ours[-1].fired}
    assert ("GPUNVLinkErrors", "critical", "4") in fired
    assert fired <= {("GPUNVLinkErrors", "critical", "4"), ("GPUNVLinkErrors", "warning", "4")}
    assert ours[-1].catches() and not ours[-1].false_alerts()
    dcgm, _ = quality.evaluate(scenarios, "dcgm", None, tmp_path / "dcgm", jobs=cpus(), naive=False)
    assert [o.fired for o in dcgm] == [[], [], []]


def test_an_xid_79_nobody_resets_still_fires_hours_later_and_the_recovery_action_fires_until_the_reset(
        tmp_path: Path) -> None:
    latched, verdict = corpus.BY_NAME["xid-79-latched"], corpus.BY_NAME["recovery-action"]
    for flavour in corpus.FLAVOURS:
        ours, _ = quality.evaluate([latched, verdict], flavour, None, tmp_path / flavour, jobs=cpus(), naive=False)
        (xid,) = [f for f in ours[0].fired if f.alertname == "GPUXidError"]
        assert (xid.severity, xid.gpu, xid.episodes) == ("critical", "6", 1), flavour
        assert latched.fault_window is not None
        assert xid.seconds >= latched.hours * 3600 - latched.fault_window[0] - 120, flavour  # to the end, one page
        assert ours[0].catches() and not ours[0].false_alerts(), flavour
        asks = [f for f in ours[1].fired if f.alertname == "GPURecoveryAction"]
        if flavour == "bundled":
            assert [(f.severity, f.gpu, f.episodes) for f in asks] == [("critical", "2", 1)]
            assert 55 * 60 <= asks[0].seconds <= 62 * 60  # from 1h10m (+ its 1m for) to the reset at 2h10m
            assert ours[1].catches() and not ours[1].false_alerts()
        else:
            assert asks == []  # dcgm-exporter's default counters do not publish the field
            assert not ours[1].false_alerts()


def test_a_flapping_port_fires_on_its_port_and_a_planned_port_reset_fires_nothing(tmp_path: Path) -> None:
    flapping, reset = corpus.BY_NAME["ib-flapping"], corpus.BY_NAME["ib-planned-reset"]
    ours, _ = quality.evaluate([flapping, reset], "bundled", None, tmp_path, jobs=cpus(), naive=False)
    # a port alert names the port (node_exporter's instance, device, port), no GPU
    assert [(f.alertname, f.severity, f.gpu, f.episodes) for f in ours[0].fired] == [
        ("GPUFabricPortFlapping", "critical", "", 1)]
    assert flapping.fault_window is not None
    caught = ours[0].first_catch()
    assert caught is not None and caught - flapping.fault_window[0] <= 5 * 60  # the third drop is 4 min in
    assert not ours[0].false_alerts()
    assert ours[1].fired == []
