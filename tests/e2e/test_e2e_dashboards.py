"""Every panel of every dashboard returns data from a real Prometheus scraping the bundled exporter.

One simulated 8-GPU node (training, inference and idle GPUs, an XID that repeats every minute and a
thermal fault) is scraped every second by a real Prometheus running the rules `gpudash rules` renders.
Yesterday's history of the same node is written as TSDB blocks before Prometheus starts, so the "now
against yesterday" panels have data too. Then `gpudash check` runs every panel, variable and rule.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import pytest
from support.cli import gpudash
from support.e2e import gpudash_rules, panel_results, site_yaml, unexplained
from support.paths import ROOT
from support.ports import on_free_ports
from support.site_query import site_promql
from support.slack import budget

from gpudash.catalog import BY_KEY, PROMETHEUS_ALERTS
from gpudash.check.judge import GroupResult, Status, run_check
from gpudash.check.queries import ALERT, PANEL, RECORDING, dashboard_groups, load_dashboards, rule_groups
from gpudash.config.durations import parse_seconds
from gpudash.promql.recordings import RECORDINGS
from gpudash.repository import RECORDING_FILE
from gpudash.stack.history import DAY, SeededPrometheus, moments, simulated_openmetrics, yesterday_blocks
from gpudash.stack.process import PrometheusProcess
from gpudash.stack.servers import ExporterProcess, prometheus_config, rule_files, scrape_jobs

GPUS, SEED = 8, 11
WORKLOADS = ("3=idle", "7=inference")
# The simulated node's clock starts an hour before the fixture (its jobs are running), so fault times count
# from there. The XID comes 25 s into the fixture, after Prometheus has scraped a clean reading, so "XID
# errors in range" sees it change.
AGE_S = 3600
# GPU 5 has been overheating (throttled) for 10 minutes; GPU 4 carries another job's process.
FAULTS = (f"6=xid:13@{AGE_S + 25}s+10m", f"5=thermal:93@{AGE_S - 600}s", f"4=foreign@{AGE_S - 600}s")
# Today the node's GPUs are held by jobs, started an hour ago (the job-level recordings and panels need one):
# a training job on six GPUs, an inference job on GPU 7 (WORKLOADS' inference GPU), and a job that holds GPU 3
# idle (WORKLOADS' idle GPU).
NODE, JOB = "gpu-node", "4242"
JOB_ARGS = ("--hostname", NODE, "--sim-nodes", NODE, "--sim-job", f"{JOB}={NODE}:0-2,4-6",
            "--sim-job", f"4300/inference={NODE}:7", "--sim-job", f"4310/idle={NODE}:3")


class Stack:
    def __init__(self, prometheus: PrometheusProcess, exporter: ExporterProcess, rules_dir: Path) -> None:
        self.prometheus = prometheus
        self.exporter = exporter
        self.rules_dir = rules_dir


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with on_free_ports(1, partial(_stack, tmp_path_factory.mktemp("dashboards-e2e"))) as built:
        yield built


@contextmanager
def _stack(tmp: Path, port: int) -> Iterator[Stack]:
    args = ["--simulate", str(GPUS), "--seed", str(SEED)]
    args += [p for f in FAULTS for p in ("--fault", f)] + list(JOB_ARGS)
    # Yesterday first, for the address the exporter is about to get; then Prometheus, then the exporter, so
    # Prometheus reads a clean XID gauge before the XID fault fires.
    address = f"127.0.0.1:{port}"
    files = gpudash_rules(tmp / "generated", site_yaml(tmp / "site.yml", "e2e", [address]))
    rules = rule_files(files)
    config = prometheus_config(scrape_jobs(files), rule_files=list(rules), interval="1s")
    times = moments(time.time() - DAY, 600, 600, 15.0)
    target = {"job": "gpu-exporter", "instance": address, "cluster": "e2e", "rack": "rack-1"}
    history = simulated_openmetrics(GPUS, SEED, times, target, workloads=WORKLOADS)
    # The exporter's clock is set once Prometheus is up (the with-items enter in order), so its XID comes 25 s
    # after its first scrape however long Prometheus took to start on a busy machine.
    with yesterday_blocks(history, rules[Path(RECORDING_FILE).name], times[0], times[-1]) as blocks, \
            SeededPrometheus(config, rules, blocks=blocks) as prometheus, \
            ExporterProcess([*args, "--sim-epoch", str(time.time() - AGE_S)],  # fault times count from now on,
                            port=int(address.rsplit(":", 1)[1])) as exporter:  # however long the history took
        prometheus.wait_for("cluster:gpu_count:count", timeout=budget(30))
        prometheus.wait_for("changes(DCGM_FI_DEV_XID_ERRORS[1m]) > 0", timeout=budget(90))
        # five samples of the new XID counter (one a second), so a panel's rate window holds two
        prometheus.wait_for("min(count_over_time(gpudash_xid_errors_total[1m])) >= 5", timeout=budget(30))
        # GPU-hours (and energy, where no energy counter is published) add a recording up over a subquery at
        # the site's scrape interval (15 s): they answer once it spans two steps (recorded every second here).
        for record in ("cluster_job:gpu_count:count", "cluster_job:gpu_idle:count", "cluster:gpu_power_watts:sum"):
            prometheus.wait_for(f"min(count_over_time({record}[10m])) > 30", timeout=budget(90))
        yield Stack(prometheus, exporter, tmp / "generated" / "prometheus")


def _check(stack: Stack, dashboards: list[Path], rules: list[Path] | None = None) -> list[GroupResult]:
    # A 30-minute range, as a person would pick for a node that started a minute ago: at the default 6 h a
    # panel's $__rate_interval is longer than the XID counter has existed.
    groups = dashboard_groups(load_dashboards(dashboards), scrape_interval_s=1, range_s=1800)
    groups += rule_groups(rules or [])
    return run_check(stack.prometheus.url, groups, site_promql("dcgm", 1))


# Panels whose answer on a healthy node is empty: every series they read exists, none passes their filter. This
# node has no GPU partitioned with MIG, so its MIG instance tables are empty too.
HEALTHY_EMPTY = {"Exporters and GPUs that stopped reporting", "MIG instances",
                 "The job's MIG instances (top 10 by memory)"}
# Memory pressure compares used memory with 15 minutes ago: this node is younger (yesterday is backfilled, the
# last 15 minutes are not).
YOUNG = {"Memory pressure: over 90% and growing (top 10)"}
# The simulated node's jobs come with no Slurm prolog: who holds them is unknown, which the check calls optional.
NO_METADATA = {"Who holds the job"}


def test_every_panel_and_variable_of_every_dashboard_returns_data(stack: Stack) -> None:
    results = _check(stack, [ROOT / "dashboards" / "json"])
    rows = panel_results(results)
    assert len(rows) > 60  # both dashboards, every target and variable
    healthy = [r for r in rows if r.query.item in HEALTHY_EMPTY]
    assert healthy and all(r.status is Status.NOTHING_MATCHES for r in healthy), healthy
    young = [r for r in rows if r.query.item in YOUNG]
    unknown = [r for r in rows if r.query.item in NO_METADATA]
    assert unknown and all(r.status is Status.OPTIONAL for r in unknown), unknown
    assert young and all(r.status in (Status.NEEDS_HISTORY, Status.OK, Status.NOTHING_MATCHES) for r in young)
    # The health dashboard is rightly empty where nothing is unhealthy (no alert fires, no ECC error, no XID of a
    # class): it is held to the reasons `unexplained` accepts; every other panel must show data.
    health = [g for g in results if g.group.title == "GPU health"]
    assert health and unexplained(health) == []
    # so is the fabric dashboard where no port is down, flapping, slow or counting errors
    fabric = [g for g in results if g.group.title == "GPU fabric"]
    assert fabric and unexplained(fabric) == []
    # The fleet's counts per action read Prometheus' ALERTS: an action no alert asks for now is rightly empty
    # (shown as 0). The XID 13 asks restart_job, so that count and "Needing any action" have data.
    actions = {r.query.item: r for r in rows if r.query.source == "GPU fleet" and PROMETHEUS_ALERTS in r.query.expr}
    assert {"Restart job", "Needing any action", "Drain"} <= actions.keys()
    assert all(actions[item].series == 1 for item in ("Restart job", "Needing any action")), actions
    assert all(r.status in (Status.OK, Status.NOT_FIRING) for r in actions.values()), actions
    missing = [f"{r.query.source} / {r.query.item} [{r.query.ref}]: {r.status.value} {r.detail}"
               for r in rows if r.status is not Status.NO_JOBS
               and r.query.item not in HEALTHY_EMPTY | YOUNG | NO_METADATA
               and r.query.source not in ("GPU health", "GPU fabric") and r.query.item not in actions
               and (r.status is not Status.OK or r.series == 0)]
    assert missing == [], "\n".join(missing)
    # the comparison row read yesterday's blocks, not just today's samples
    assert any("offset 1d" in r.query.expr and r.series for r in rows)


def test_dcgm_exporter_dashboard_12239_returns_data_from_the_bundled_exporter(stack: Stack, reference: Path) -> None:
    results = _check(stack, [reference / "dcgm-exporter" / "dashboard-12239.json"])
    rows = panel_results(results)
    assert {r.query.item for r in rows} >= {"$instance", "$gpu", "GPU Temperature", "Tensor Core Utilization"}
    assert [f"{r.query.item}: {r.status.value} {r.detail}" for r in rows if r.status is not Status.OK] == []


def test_every_committed_rule_parses_and_recording_rules_return_data(stack: Stack) -> None:
    results = _check(stack, [], [ROOT / "generated" / "prometheus"])
    rows = [r for g in results for r in g.results]
    assert {r.query.kind for r in rows} == {ALERT, RECORDING}
    assert [f"{r.query.item}: {r.detail}" for r in rows if r.status.failed] == []
    # the simulated node runs no Slurm job: the job-level recordings are rightly empty, reported as such; a
    # recorded list (GPUs throttled now, ...) is empty where no GPU passes its test (or, for memory growth over
    # 15 minutes, while the stack is younger than that), and only a list may be
    recorded = {r.query.item: r.status for r in rows if r.query.kind == RECORDING}
    lists = {rec.record for rec in RECORDINGS if rec.filtered}  # the fleet's lists, the GPUs' reset events
    assert {item for item, status in recorded.items()
            if status in (Status.NOTHING_MATCHES, Status.NEEDS_HISTORY)} <= lists
    # ... and a recording of a signal the exporter need not publish (per-link NVLink errors), or a list that
    # reads a series only node_exporter publishes, is optional
    assert [f"{item}: {status.value}" for item, status in recorded.items()
            if status not in (Status.OK, Status.NO_JOBS, Status.NOTHING_MATCHES, Status.NEEDS_HISTORY,
                              Status.OPTIONAL)] == []
    assert [rec.record for rec in RECORDINGS if recorded.get(rec.record) is Status.OPTIONAL
            and not rec.filtered and not any(BY_KEY[k].optional for k in rec.needs)] == []
    assert recorded["cluster:gpu_count:count"] is Status.OK
    # the XID fault is firing right now, and the check counts its series
    assert any(r.query.item == "GPUXidError" and r.series for r in rows)


def test_the_same_through_the_command_line(stack: Stack) -> None:
    done = gpudash("check", "--prometheus", stack.prometheus.url, "--rules", str(stack.rules_dir), cwd=ROOT)
    assert done.code == 0, done.out[-3000:] + done.err
    assert "GPU fleet  (dashboards/json/gpudash-fleet.json" in done.out
    assert "PANEL" in done.out and "RULE" in done.out
    assert done.out.rstrip().splitlines()[-1].endswith("; 0 failed")


def test_check_fails_when_a_query_breaks_or_loses_its_data(stack: Stack, tmp_path: Path) -> None:
    broken = {
        "title": "Broken", "uid": "broken", "time": {"from": "now-1h"},
        "templating": {"list": [{"type": "query", "name": "host",
                                 "query": "label_values(DCGM_FI_DEV_GPU_UTIL, nohost)"}]},
        "panels": [
            {"title": "Typo", "targets": [{"refId": "A", "expr": "DCGM_FI_DEV_GPU_UTILL"}]},
            {"title": "Parse error", "targets": [{"refId": "A", "expr": "sum(DCGM_FI_DEV_GPU_UTIL"}]},
            {"title": "Unknown variable", "targets": [{"refId": "A", "expr": "DCGM_FI_DEV_GPU_UTIL{x=~\"$nosuch\"}"}]},
            {"title": "Join mismatch", "targets": [{"refId": "A", "expr":
                'DCGM_FI_DEV_GPU_UTIL{gpu="0"} / on(gpu) DCGM_FI_DEV_GPU_TEMP{gpu="1"}'}]},
            {"title": "Many to many", "targets": [{"refId": "A", "expr":
                "DCGM_FI_DEV_GPU_UTIL / on(cluster) DCGM_FI_DEV_GPU_TEMP"}]},
            {"title": "Fine", "targets": [{"refId": "A", "expr": "count(DCGM_FI_DEV_GPU_UTIL)", "instant": True}]},
        ],
    }
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(broken))
    (results,) = _check(stack, [path])
    by_item = {r.query.item: r for r in results.results}
    assert by_item["$host"].status is Status.EMPTY and "'nohost'" in by_item["$host"].detail
    assert by_item["Typo"].status is Status.EMPTY and "DCGM_FI_DEV_GPU_UTILL" in by_item["Typo"].detail
    assert by_item["Parse error"].status is Status.ERROR and "parse error" in by_item["Parse error"].detail
    assert by_item["Unknown variable"].status is Status.ERROR and "$nosuch" in by_item["Unknown variable"].detail
    assert by_item["Join mismatch"].status is Status.EMPTY and "line up" in by_item["Join mismatch"].detail
    assert by_item["Many to many"].status is Status.ERROR and "many-to-many" in by_item["Many to many"].detail
    assert by_item["Fine"].status is Status.OK and by_item["Fine"].series == 1

    done = gpudash("check", "--prometheus", stack.prometheus.url, "--dashboards", str(path), "--no-rules", cwd=ROOT)
    assert done.code == 1
    assert done.err.strip().splitlines() == [
        "gpudash: 6 queries failed: Broken / $host, Broken / Typo, Broken / Parse error, "
        "Broken / Unknown variable, Broken / Join mismatch and 1 more"
    ]
    assert "NO DATA: no series DCGM_FI_DEV_GPU_UTILL" in done.out


def test_check_without_recording_rules_names_them(stack: Stack, tmp_path: Path) -> None:
    """A Prometheus that scrapes the exporter but has no gpudash rules: the fleet panels say why they are empty."""
    config = prometheus_config(
        [{"job_name": "gpu-exporter", "static_configs": [{"targets": [stack.exporter.address],
                                                           "labels": {"cluster": "bare"}}]}], interval="1s")
    with PrometheusProcess(config) as bare:
        bare.wait_for("DCGM_FI_DEV_GPU_UTIL")
        groups = dashboard_groups(load_dashboards([ROOT / "dashboards" / "json" / "gpudash-fleet.json"]), 1)
        (result,) = run_check(bare.url, groups, site_promql("dcgm", 1))
    failed = {r.query.item: r.detail for r in result.failures}
    assert "GPUs reporting" in failed
    assert "recording rules are not loaded" in failed["GPUs reporting"]
    assert "Hottest GPUs (top 10)" not in failed  # raw series still work
    assert unexplained([result]) != []



def test_the_fleets_goodput_and_interruption_rate_count_the_xid_episode(stack: Stack) -> None:
    (group,) = dashboard_groups(load_dashboards([ROOT / "dashboards" / "json" / "gpudash-fleet.json"]),
                                scrape_interval_s=1, range_s=1800)
    exprs = {q.item: q.expr for q in group.queries if q.kind == PANEL}
    (goodput,) = stack.prometheus.query(exprs["Goodput (proxy) in range"])
    (rate,) = stack.prometheus.query(exprs["Interruptions per 1,000 GPU-days in range"])
    # The same range, step and recording the stats read: the GPU-hours reported, unweighted.
    step = re.search(r"\[1800s:(\w+)\]", exprs["Goodput (proxy) in range"])
    assert step is not None
    (hours,) = stack.prometheus.query(f"sum(sum_over_time(cluster:gpu_count:count[1800s:{step.group(1)}])) * "
                                      f"{parse_seconds(step.group(1)):g} / 3600")
    assert 0 < float(goodput["value"][1]) < float(hours["value"][1])
    # XID 13 fires GPUXidError (restart_job) on GPU 6 once: one episode over the GPU-days reported.
    episodes = float(rate["value"][1]) * float(hours["value"][1]) / 24 / 1000
    assert episodes == pytest.approx(1)
