"""`gpudash report` without a server: the queries, the adding up over chunks (a fake client), the figures, the
three renderings, and bad input as one line with exit code 2."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from support.paths import ROOT

from gpudash.check.prometheus_api import TimeRange
from gpudash.config.loading import load_settings
from gpudash.errors import ConfigError
from gpudash.report.cli import report
from gpudash.report.collect import Collector, Totals
from gpudash.report.figures import LLAMA3_RATE, build_report, interruption_class
from gpudash.report.range_queries import report_queries
from gpudash.report.render import as_csv, as_markdown

SETTINGS = load_settings(ROOT / "thresholds.yaml")
STEP = 300


class FakePrometheus:
    """Answers each report query with a fixed series per step; the interruption query from a firing table."""

    def __init__(self, firing: dict[int, list[dict[str, str]]]) -> None:
        self.firing = firing
        self.q = report_queries(SETTINGS, STEP)
        self.asked: list[tuple[float, int]] = []

    def range(self, expr: str, window: TimeRange) -> list[dict[str, Any]]:
        times = range(int(window.start), int(window.end) + 1, window.step_s)
        self.asked.append((window.end, window.range_s))

        def one(metric: dict[str, str], value: float) -> list[dict[str, Any]]:
            return [{"metric": metric, "values": [[t, str(value)] for t in times]}]

        job = {"cluster": "c1", "hpc_job": "7"}
        answers = {
            self.q.held_by_job: one(job, 4 * STEP),  # 4 GPUs held
            self.q.idle_by_job: one(job, 1 * STEP),  # 1 of them idle
            self.q.job_info: one({**job, "account": "ml", "user": "ann"}, 1),
            self.q.reporting: one({}, 7 * STEP),  # 7 of 8 GPUs reporting
            self.q.fleet_gpus: one({"cluster": "c1"}, 8),
            self.q.alert_unheld: one({}, 1 * STEP),  # 1 GPU down under an alert
            self.q.utilization: one({}, 2 * STEP),
            self.q.goodput: one({}, 1.5 * STEP),
        }
        if expr == self.q.interruptions:
            by_series: dict[tuple[tuple[str, str], ...], list[list[Any]]] = {}
            for t in times:
                for metric in self.firing.get(t, []):
                    by_series.setdefault(tuple(sorted(metric.items())), []).append([t, "1"])
            return [{"metric": dict(key), "values": values} for key, values in by_series.items()]
        return answers[expr]


XID = {"alertname": "GPUXidError", "xid": "79", "UUID": "GPU-a", "action": "reboot_node"}
ECC = {"alertname": "GPUEccUncorrectable", "UUID": "GPU-b", "action": "reset_gpu"}


def test_every_step_is_counted_once_across_chunks_and_episodes_span_them() -> None:
    start = 1_800_000_000
    # XID fires over the boundary of the first two chunks (one episode), ECC twice with a gap (two episodes)
    firing = {start + STEP * k: [XID] for k in range(3, 6)}
    for k in (2, 3, 6):
        firing.setdefault(start + STEP * k, []).append(ECC)
    fake = FakePrometheus(firing)
    totals = Collector(fake, fake.q, workers=2).run(start, start + 12 * STEP, chunk_steps=4)
    assert totals.steps == 12 and len({end for end, _ in fake.asked}) == 3  # three chunks of four steps
    assert totals.held == {("c1", "7"): 12 * 4 * STEP} and totals.idle == {("c1", "7"): 12 * STEP}
    r = build_report(totals, start=start, step_s=STEP, team_label="account", job_label="hpc_job")
    assert r.fleet_gpus == 8 and r.capacity_h == pytest.approx(8 * 12 * STEP / 3600)
    [team] = r.teams
    assert (team.team, team.busy_h, team.idle_h) == ("ml", pytest.approx(3 * 1.0), pytest.approx(1.0))
    assert r.not_reporting_h == pytest.approx(1.0) and r.alert_unheld_h == pytest.approx(1.0)
    assert r.unallocated_h == pytest.approx(2.0)  # 7 reporting - 4 held - 1 down
    assert sum(hours for _, _, hours in r.categories()) == pytest.approx(r.capacity_h)
    assert dict(r.interruptions) == {"XID pcie": 1, "GPUEccUncorrectable": 2}
    assert [(g.gpu, g.count) for g in r.top_gpus] == [("GPU-b", 2), ("GPU-a", 1)]
    assert r.interruption_rate == pytest.approx(3 / (8 * 12 * STEP / 86400) * 1000)


def test_a_job_without_info_is_unknown_and_the_job_label_can_be_the_team() -> None:
    totals = Totals(held={("c1", "9"): 3600.0}, idle={}, reporting=7200.0, fleet_gpus={"c1": 2}, steps=12)
    by_account = build_report(totals, start=0, step_s=STEP, team_label="account", job_label="hpc_job")
    assert [t.team for t in by_account.teams] == ["(unknown)"]
    by_job = build_report(totals, start=0, step_s=STEP, team_label="namespace", job_label="namespace")
    assert [t.team for t in by_job.teams] == ["9"]


def test_csv_and_markdown_carry_the_same_figures() -> None:
    totals = Totals(held={("c1", "1"): 7200.0, ("c1", "2"): 3600.0}, idle={("c1", "2"): 1800.0},
                    info={("c1", "1"): {"account": "a|b"}, ("c1", "2"): {"account": "vision", "user": "bo"}},
                    reporting=4 * 3600.0, fleet_gpus={"c1": 2}, steps=24,
                    episodes={(("alertname", "GPUFellOffBus"),): 1})
    r = build_report(totals, start=0, step_s=STEP, team_label="account", job_label="hpc_job")
    rows = {(s, n, c): v for s, n, c, v in list(csv.reader(io.StringIO(as_csv(r))))[1:]}
    markdown = as_markdown(r)
    assert rows[("gpu_hours", "a|b", "busy")] == "2.00" and "| a\\|b | 2.00 | 0.00 |" in markdown
    assert rows[("gpu_hours", "vision", "idle")] == "0.50" and "| vision | 0.50 | 0.50 |" in markdown
    assert rows[("interruptions", "llama3_reference", "per_1000_gpu_days")] == f"{LLAMA3_RATE:.3f}" == "0.474"


def test_xid_interruptions_are_classed_by_the_xid_table() -> None:
    assert interruption_class({"alertname": "GPUXidError", "xid": "48"}) == "XID memory"
    assert interruption_class({"alertname": "GPUXidError", "xid": "999999"}) == "XID unclassified"
    assert interruption_class({"alertname": "GPUFellOffBus"}) == "GPUFellOffBus"


def test_queries_read_recorded_series_over_windows_a_millisecond_short_of_the_step() -> None:
    q = report_queries(SETTINGS, STEP)
    assert q.held_by_job == "sum by (cluster, hpc_job) (sum_over_time(cluster_job:gpu_held_seconds:interval[299999ms]))"
    assert 'action!~"none|"' in q.interruptions and "GPUXidError" in q.interruptions
    assert "unless on (cluster, instance, gpu) DCGM_FI_DEV_GPU_UTIL{hpc_job!=\"\"}" in q.alert_unheld


@pytest.mark.parametrize(("args", "message"), [
    (["--start", "2026-11-01T00:00:00Z"], "--start and --end go together"),
    (["--start", "yesterday", "--end", "1"], "--start 'yesterday': expected Unix seconds"),
    (["--since", "7 days"], "--since '7 days'"),
    (["--step", "7s"], "--step '7s': must be a multiple of the rule interval (15s"),
    (["--format", "pdf"], "'pdf' is not one of"),
    (["--charts"], "--charts writes a PNG beside the other files: give --out DIR"),
])
def test_bad_input_is_one_line_and_exit_2_before_any_query(args: list[str], message: str) -> None:
    done = CliRunner().invoke(report, ["--prometheus", "http://127.0.0.1:9", *args])
    assert done.exit_code == 2, done.output
    assert message in done.stderr
    assert len([line for line in done.stderr.splitlines() if line.strip() and "Usage" not in line
                and "Try" not in line]) == 1


def test_the_team_label_comes_from_gpudash_yaml_and_must_be_a_label_name(tmp_path: Path) -> None:
    site = tmp_path / "gpudash.yaml"
    site.write_text("jobs:\n  label: hpc_job\n  team: user\n")
    assert report_queries(load_settings(ROOT / "thresholds.yaml", site), STEP).team_label == "user"
    site.write_text("jobs:\n  team: my-team\n")
    with pytest.raises(ConfigError, match=r"jobs\.team"):
        load_settings(ROOT / "thresholds.yaml", site)


def test_the_chart_is_a_png_of_the_figures_and_the_same_for_the_same_report() -> None:
    from gpudash.report.charts import png

    totals = Totals(held={("c1", "1"): 7200.0}, idle={("c1", "1"): 1800.0}, info={("c1", "1"): {"account": "ml"}},
                    reporting=4 * 3600.0, fleet_gpus={"c1": 2}, steps=24,
                    episodes={(("alertname", "GPUFellOffBus"),): 1})
    r = build_report(totals, start=0, step_s=STEP, team_label="account", job_label="hpc_job")
    first = png(r)
    assert first.startswith(b"\x89PNG\r\n\x1a\n") and first == png(r)
    other = build_report(Totals(held={("c1", "1"): 3600.0}, reporting=4 * 3600.0, fleet_gpus={"c1": 2}, steps=24),
                         start=0, step_s=STEP, team_label="account", job_label="hpc_job")
    assert png(other) != first
