"""The simulated node's /metrics through `promtool check metrics`."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from support.dcgm_types import declared_types
from support.exposition import full_simulated_output


def test_promtool_check_metrics_finds_only_dcgm_exporter_naming(reference: Path) -> None:
    """promtool lints two things dcgm-exporter compatibility requires, and nothing else.

    dcgm-exporter names counters without `_total` (one even ends in `_COUNTER`) and spells a label
    `modelName`; renaming either would break its dashboards. With that label renamed, the only findings
    left are the names of the fields dcgm-exporter itself declares counters (its 2026 counters file: the
    windowed DCGM_EXP_*_COUNT are gauges there, and so here); every gpudash_* family is clean.
    """
    promtool = shutil.which("promtool")
    assert promtool, "promtool not on PATH (apt install prometheus)"
    text = full_simulated_output().replace('modelName="', 'model_name="')
    done = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, check=False)
    findings = sorted(set(done.stdout.splitlines() + done.stderr.splitlines()))
    dcgm_counters = {name for name, kind in declared_types(reference).items() if kind == "counter"}
    allowed = {f'{name} counter metrics should have "_total" suffix' for name in dcgm_counters}
    allowed.add("DCGM_FI_DEV_PCIE_REPLAY_COUNTER metric name should not include type 'counter'")
    assert findings and set(findings) <= allowed, set(findings) - allowed
    assert 'DCGM_EXP_CLOCK_EVENTS_TOTAL counter metrics should have "_total" suffix' in findings  # a counter
    assert not any(line.startswith(("DCGM_EXP_CLOCK_EVENTS_COUNT ", "DCGM_EXP_XID_ERRORS_COUNT ")) for line in findings)
    assert "parsing" not in done.stderr  # the escaped labels parse
