"""The simulated node's /metrics through `promtool check metrics`."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from support.exposition import full_simulated_output

from gpudash.catalog import SIGNALS


def test_promtool_check_metrics_finds_only_dcgm_exporter_naming(tmp_path: Path) -> None:
    """promtool lints two things dcgm-exporter compatibility requires, and nothing else.

    dcgm-exporter names counters without `_total` (one even ends in `_COUNTER`) and spells a label
    `modelName`; renaming either would break its dashboards. With that label renamed, the only findings
    left are those counter names; every gpudash_* family is clean.
    """
    promtool = shutil.which("promtool")
    assert promtool, "promtool not on PATH (apt install prometheus)"
    text = full_simulated_output().replace('modelName="', 'model_name="')
    done = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, check=False)
    findings = sorted(set(done.stdout.splitlines() + done.stderr.splitlines()))
    dcgm_counters = {s.dcgm_name for s in SIGNALS if s.type == "counter" and s.dcgm_name.startswith("DCGM_")}
    allowed = {f'{name} counter metrics should have "_total" suffix' for name in dcgm_counters}
    allowed.add("DCGM_FI_DEV_PCIE_REPLAY_COUNTER metric name should not include type 'counter'")
    assert findings and set(findings) <= allowed, set(findings) - allowed
    assert "parsing" not in done.stderr  # the escaped labels parse
