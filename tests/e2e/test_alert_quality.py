"""The alert-quality report's promtool pipeline (bench/alert_quality.py) on one scenario of the corpus."""

from __future__ import annotations

from pathlib import Path

from bench import alert_corpus as corpus
from bench import alert_quality as quality


def test_report_pipeline_finds_the_xid_alert(tmp_path: Path) -> None:
    scenario = corpus.BY_NAME["xid-79"]
    ours, naive = quality.evaluate([scenario], "bundled", None, tmp_path, jobs=2)
    (outcome,) = ours
    assert [(f.alertname, f.severity, f.gpu) for f in outcome.fired] == [("GPUXidError", "critical", "6")]
    assert scenario.fault_window is not None
    assert outcome.first_catch() == scenario.fault_window[0]  # no for: on XID, caught at the first evaluation
    assert not outcome.false_alerts()
    assert naive[0].catches() == []  # the naive set has no XID rule
