"""The alert scenario corpus (bench/alert_corpus.py) and the report's promtool pipeline (bench/alert_quality.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import alert_corpus as corpus  # noqa: E402
import alert_quality as quality  # noqa: E402


def test_corpus_has_hours_of_benign_and_faulty_scenarios_at_15s() -> None:
    benign = [s for s in corpus.SCENARIOS if s.kind == "benign"]
    faulty = [s for s in corpus.SCENARIOS if s.kind == "fault"]
    assert len(benign) >= 6 and len(faulty) >= 6
    assert corpus.STEP == 15
    assert all(s.hours >= 2 for s in corpus.SCENARIOS)
    assert all(s.expected and s.fault_window for s in faulty)
    assert not [s.name for s in benign if s.expected]


def test_expanding_notation() -> None:
    assert corpus.expand([1.0, 1.0, 1.0, None, None, "stale", 2.5]) == "1x2 _x2 stale 2.5"
    assert corpus.expand([None, 7.0, "stale", None]) == "_ 7 stale _"


def test_series_follow_the_simulated_fault() -> None:
    lost = corpus.BY_NAME["gpu-lost"]
    series = corpus.build_series(lost, "bundled")
    assert lost.fault_window is not None
    fault_at = int(lost.fault_window[0] // corpus.STEP)
    gpu1 = [k for k in series if k.startswith("DCGM_FI_DEV_FB_USED") and 'gpu="1"' in k]
    (key,) = gpu1
    assert isinstance(series[key][fault_at - 1], float)
    assert series[key][fault_at] == "stale" and series[key][fault_at + 1] is None
    (up,) = [k for k in series if k.startswith("gpudash_gpu_up") and 'gpu="1"' in k]
    assert series[up][fault_at] == 0.0
    dcgm = corpus.build_series(lost, "dcgm")
    assert not [k for k in dcgm if k.startswith("gpudash_")]  # dcgm-exporter's default counters only


@pytest.mark.e2e
def test_report_pipeline_finds_the_xid_alert(tmp_path: Path) -> None:
    scenario = corpus.BY_NAME["xid-79"]
    ours, naive = quality.evaluate([scenario], "bundled", None, tmp_path, jobs=2)
    (outcome,) = ours
    assert [(f.alertname, f.severity, f.gpu) for f in outcome.fired] == [("GPUXidError", "critical", "6")]
    assert scenario.fault_window is not None
    assert outcome.first_catch() == scenario.fault_window[0]  # no for: on XID, caught at the first evaluation
    assert not outcome.false_alerts()
    assert naive[0].catches() == []  # the naive set has no XID rule
