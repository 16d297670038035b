"""Backfilled recordings that read other recordings hold what a live Prometheus records: promtool's rule backfill
(gpudash.stack.history) and the report's range-query backfill (bench/report_history.py) each evaluate a rule
against a Prometheus holding only the raw samples, so a recording read by another one must be inlined there.

The raw series rise one step per sample, so each recording's value at each evaluation is known: a sum now, the same
doubled, its largest value over the last minute, its value a minute ago.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from bench.report_history import backfilled
from gpudash.check.prometheus_api import PrometheusClient
from gpudash.stack.history import OpenMetricsHistory, SeededPrometheus, yesterday_blocks

STEP = 15
SAMPLES = 80  # 20 minutes
RULES = (
    ("chain:g:sum", "sum without (instance) (g)"),
    ("chain:g:doubled", "chain:g:sum * 2"),
    ("chain:g:max1m", "max_over_time(chain:g:sum[1m])"),
    ("chain:g:ago1m", "chain:g:sum offset 1m"),
)


def expected(record: str, k: int) -> float | None:
    """A recording's value at sample k: the raw series are k and 2k, so their sum is 3k."""
    return {"chain:g:sum": 3.0 * k, "chain:g:doubled": 6.0 * k, "chain:g:max1m": 3.0 * k,
            "chain:g:ago1m": 3.0 * (k - 4) if k >= 4 else None}[record]


@pytest.fixture(scope="module")
def base() -> int:
    return (int(time.time()) - 86400) // 3600 * 3600


def raw_history(base: int) -> str:
    history = OpenMetricsHistory()
    for k in range(SAMPLES + 1):
        history.add("g", 'instance="a"', float(k), float(base + k * STEP))
        history.add("g", 'instance="b"', float(2 * k), float(base + k * STEP))
    return history.text()


def found(url: str, base: int) -> dict[str, dict[int, float]]:
    """Each recording's samples as written, by the raw sample each evaluation saw last (an evaluation runs a fixed
    part of the interval after the step it belongs to)."""
    client = PrometheusClient(url)
    out: dict[str, dict[int, float]] = {}
    for record, _ in RULES:
        answer = client.instant(f"{record}[{SAMPLES * STEP + 60}s]", float(base + SAMPLES * STEP + 30))
        assert len(answer) <= 1, (record, answer)
        values = answer[0]["values"] if answer else []
        out[record] = {int((float(ts) - base) // STEP): float(v) for ts, v in values}
    return out


def assert_exact(recorded: dict[str, dict[int, float]]) -> None:
    for record, _ in RULES:
        want = {k: expected(record, k) for k in range(SAMPLES) if expected(record, k) is not None}
        assert {k: v for k, v in recorded[record].items() if k < SAMPLES} == want, record


def test_promtools_backfill_of_a_rule_file_holds_the_recordings_read_by_others(base: int) -> None:
    rule_file = yaml.safe_dump({"groups": [{"name": "chain", "interval": f"{STEP}s",
                                            "rules": [{"record": r, "expr": e} for r, e in RULES]}]}, sort_keys=False)
    with yesterday_blocks(raw_history(base), rule_file, base, base + SAMPLES * STEP, f"{STEP}s") as blocks, \
            SeededPrometheus("global: {}\n", blocks=blocks) as prometheus:
        assert_exact(found(prometheus.url, base))


def test_the_reports_backfill_holds_the_recordings_read_by_others(base: int, tmp_path: Path) -> None:
    with backfilled(raw_history(base), RULES, base, base + SAMPLES * STEP, STEP, tmp_path) as prometheus:
        assert_exact(found(prometheus.url, base))
