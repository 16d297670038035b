"""Where the repository and the test material are, from any folder of the tests."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
# Public reference material kept as test fixtures: dcgm-exporter's default counters, dashboard 12239 and real
# /metrics samples, and nvidia_gpu_exporter's output from an H100 under load.
REFERENCE = TESTS / "fixtures"
