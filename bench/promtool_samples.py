"""What `promtool test rules` printed for a test file's queries, read back as samples.

promtool has no machine-readable output: a failing `promql_expr_test` prints what its query returned on a
`got:` line. The alert-quality and backtest-quality reports write tests that are meant to fail that way, so
every sample their queries return is printed, and read here.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

_SAMPLE = re.compile(r'\{((?:[a-zA-Z_]\w*="(?:[^"\\]|\\.)*"(?:, )?)*)\} ([-+0-9.eE]+|NaN|[+-]Inf)')
_LABEL = re.compile(r'([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"')


def run_promtool(path: Path) -> list[dict[str, str]]:
    """Run one test file; return every sample the queries returned, as labels plus `value`."""
    proc = subprocess.run(["promtool", "test", "rules", str(path)], capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    samples = []
    for line in out.splitlines():
        line = line.strip()
        if not line.startswith("got:"):
            continue
        for match in _SAMPLE.finditer(line):
            labels = dict(_LABEL.findall(match.group(1)))
            labels["value"] = match.group(2)
            samples.append(labels)
    if proc.returncode not in (0, 1) or (proc.returncode == 1 and not samples):
        raise RuntimeError(f"promtool failed on {path}:\n{out[-3000:]}")
    return samples
