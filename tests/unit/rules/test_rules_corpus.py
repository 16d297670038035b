"""The alert scenario corpus (bench/alert_corpus.py): hours of benign and faulty scenarios, simulated series."""

from __future__ import annotations

from bench import alert_corpus as corpus


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
