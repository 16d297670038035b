"""`gpudash report` on a real Prometheus holding a backfilled day with known answers (bench/report_history.py):
16 GPUs on two nodes, jobs of three teams and one without job info, idle stretches, outages, health faults.

The raw samples are one a minute, the recording rules the report reads are backfilled with promtool at the
same interval, and Prometheus looks back 30 s, so each evaluation sees exactly the sample of its minute (a live
Prometheus gets the same from its staleness markers, which a backfill cannot write).
"""

from __future__ import annotations

import csv
import io
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.paths import ROOT

from bench.report_history import Fault, Fleet, Job, Truth, backfilled, openmetrics, truth
from gpudash.config.loading import load_settings
from gpudash.promql.for_settings import recording_rules
from gpudash.report.cli import report
from gpudash.report.range_queries import GPU_COUNT, HELD, IDLE, SM, TENSOR, UTILIZATION_SUM

SAMPLE_S = 60
LOOKBACK = ("--query.lookback-delta=30s",)
ALL = tuple(range(16))
FLEET = Fleet(
    nodes=2, gpus_per_node=8, samples=1440, sample_s=SAMPLE_S,
    jobs=(
        Job("101", "ml", "alice", tuple(range(8)), 60, 780, idle=(((0, 1, 2, 3), 300, 420),)),
        Job("102", "vision", "bob", (8, 9, 10, 11), 120, 1200, util=80, tensor=0.3, idle=(((8, 9, 10, 11), 600, 840),)),
        Job("103", "ml", "carol", (12, 13, 14, 15), 0, 360, idle=(((12, 13, 14, 15), 0, 360),)),
        Job("104", "ghost", "eve", (12, 13), 480, 600, published=False),
        Job("105", "nlp", "dan", (0, 1, 2, 3), 900, 1460, util=95, tensor=0.7),
    ),
    outages=(((14, 15), 960, 1200), ((4, 5, 6, 7), 1300, 1340)),
    faults=(
        Fault(5, "GPUXidError", "reboot_node", 180, 240, xid="79"),  # held by job 101: charged to it
        Fault(6, "GPUEccUncorrectable", "reset_gpu", 840, 900),  # no job: down
        Fault(6, "GPUEccUncorrectable", "reset_gpu", 1000, 1030),  # a second episode on the same GPU
        Fault(9, "GPUNVLinkErrors", "none", 300, 400),  # no action: no interruption
        Fault(3, "GPUFellOffBus", "reboot_node", 1250, 1280),  # held by job 105
        Fault(13, "GPURowRemapFailure", "rma", 1300, 1400),  # no job: down
    ),
)
READ = (GPU_COUNT, UTILIZATION_SUM, TENSOR, SM, HELD, IDLE)


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, int, int]]:
    work = tmp_path_factory.mktemp("report")
    site = work / "gpudash.yaml"
    site.write_text("scrape:\n  interval: 60s\n  timeout: 10s\njobs:\n  label: hpc_job\n  team: account\n")
    settings = load_settings(ROOT / "thresholds.yaml", site)
    every = {r.record: e for r, e in recording_rules(settings)}
    rules = [(record, e) for record, e in every.items() if record in READ]
    base = (int(time.time()) - 3 * 86400) // 3600 * 3600
    end = base + FLEET.samples * SAMPLE_S
    with backfilled(openmetrics(FLEET, base), rules, base, end + 5 * SAMPLE_S, SAMPLE_S, work,
                    LOOKBACK, recordings=every) as prometheus:
        yield prometheus.url, site, base, end


def _run(history: tuple[str, Path, int, int], *extra: str) -> str:
    url, site, base, end = history
    done = CliRunner().invoke(report, ["--prometheus", url, "--site", str(site), "--thresholds",
                                       str(ROOT / "thresholds.yaml"), "--start", str(base), "--end", str(end), *extra])
    assert done.exit_code == 0, done.output
    return done.stdout


def _close(found: float, expected: float, what: str) -> None:
    assert found == pytest.approx(expected, rel=0.01, abs=0.01), what


@pytest.fixture(scope="module")
def csv_rows(history: tuple[str, Path, int, int]) -> dict[tuple[str, str, str], str]:
    rows = list(csv.reader(io.StringIO(_run(history, "--format", "csv"))))
    assert rows[0] == ["section", "name", "category", "value"]
    return {(s, n, c): v for s, n, c, v in rows[1:]}


def test_gpu_hours_per_team_and_category_match_the_truth(csv_rows: dict[tuple[str, str, str], str]) -> None:
    known: Truth = truth(FLEET)
    teams = set(known.busy) | set(known.idle)
    assert teams == {"ml", "vision", "nlp", "(unknown)"}
    for team in teams:
        for category, hours in (("busy", known.busy), ("idle", known.idle)):
            _close(float(csv_rows[("gpu_hours", team, category)]), hours.get(team, 0.0) / 3600, f"{team} {category}")
    _close(float(csv_rows[("fleet", "down", "not_reporting")]), known.not_reporting / 3600, "not reporting")
    _close(float(csv_rows[("fleet", "down", "health_alert_unheld")]), known.alert_unheld / 3600, "alert, no job")
    _close(float(csv_rows[("gpu_hours", "(fleet)", "unallocated")]), known.unallocated / 3600, "unallocated")
    _close(float(csv_rows[("fleet", "capacity", "gpu_hours")]), known.capacity / 3600, "capacity")
    _close(float(csv_rows[("activity", "utilization", "gpu_hours")]), known.utilization / 3600, "utilization")
    _close(float(csv_rows[("activity", "goodput_proxy", "gpu_hours")]), known.goodput / 3600, "goodput")
    # the categories add up to the fleet's GPU-hours
    parts = sum(float(v) for (s, _, _), v in csv_rows.items() if s == "gpu_hours")
    _close(parts, known.capacity / 3600, "categories add up")


def test_interruptions_are_counted_exactly_by_class_and_gpu(csv_rows: dict[tuple[str, str, str], str]) -> None:
    known = truth(FLEET)
    found = {n: int(v) for (s, n, c), v in csv_rows.items() if s == "interruptions" and c == "count" and n != "total"}
    assert found == known.interruptions == {"XID pcie": 1, "GPUEccUncorrectable": 2, "GPUFellOffBus": 1,
                                            "GPURowRemapFailure": 1}
    assert int(csv_rows[("interruptions", "total", "count")]) == 5
    rate = 5 / (known.capacity / 86400) * 1000
    assert float(csv_rows[("interruptions", "rate", "per_1000_gpu_days")]) == pytest.approx(rate, abs=0.001)
    per_gpu = {n: int(v) for (s, n, _), v in csv_rows.items() if s == "gpu_interruptions"}
    assert per_gpu["GPU-00000006-0000-4000-8000-000000000000"] == 2 and sum(per_gpu.values()) == 5


def test_top_idle_holders_lead_with_the_idlest_job(csv_rows: dict[tuple[str, str, str], str]) -> None:
    idle = [(n, c, float(v)) for (s, n, c), v in csv_rows.items() if s == "top_idle"]
    assert [holder[:2] for holder in idle[:2]] == [("c1/103", "ml"), ("c1/102", "vision")]
    _close(idle[0][2], 24.0, "job 103 idle")  # 4 GPUs x 6 h
    _close(idle[1][2], 16.0, "job 102 idle")  # 4 GPUs x 4 h


def test_markdown_and_json_agree_with_csv(history: tuple[str, Path, int, int],
                                          csv_rows: dict[tuple[str, str, str], str]) -> None:
    markdown = _run(history, "--format", "markdown")
    table = markdown.split("## GPU-hours by account\n\n", 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    cells = {row.split(" | ")[0].lstrip("| "): row.strip("| ").split(" | ") for row in table}
    for team, row in cells.items():
        if team == "(fleet)":
            assert row[3] == csv_rows[("gpu_hours", "(fleet)", "down")]
            assert row[4] == csv_rows[("gpu_hours", "(fleet)", "unallocated")]
        else:
            assert (row[1], row[2]) == (csv_rows[("gpu_hours", team, "busy")], csv_rows[("gpu_hours", team, "idle")])
    assert len(cells) == 5
    assert f"{csv_rows[('interruptions', 'rate', 'per_1000_gpu_days')][:4]}" in markdown
    data = json.loads(_run(history, "--format", "json"))
    assert data["interruption_count"] == 5 and data["fleet_gpus"] == 16


def test_out_writes_dated_files_that_agree(history: tuple[str, Path, int, int], tmp_path: Path,
                                           csv_rows: dict[tuple[str, str, str], str]) -> None:
    shown = _run(history, "--out", str(tmp_path / "reports"), "--charts")
    written = sorted(p.name for p in (tmp_path / "reports").iterdir() if not p.name.startswith("."))
    day = time.strftime("%Y-%m-%d", time.gmtime(history[3]))
    assert written == [f"gpu-report-{day}.{ext}" for ext in ("csv", "json", "md", "png")]
    assert shown.split() == [str(tmp_path / "reports" / name) for name in written]
    rows = list(csv.reader(io.StringIO((tmp_path / "reports" / written[0]).read_text())))[1:]
    assert {(s, n, c): v for s, n, c, v in rows} == csv_rows


def test_a_range_without_recorded_series_is_one_line_and_exit_2(history: tuple[str, Path, int, int]) -> None:
    url, site, base, _ = history
    done = CliRunner().invoke(report, ["--prometheus", url, "--site", str(site), "--start", str(base - 30 * 86400),
                                       "--end", str(base - 29 * 86400)])
    assert done.exit_code == 2
    assert "holds no cluster:gpu_count:count" in done.stderr and len(done.stderr.strip().splitlines()) == 1
