"""The job dashboard, the fleet's job panels and one-series-per-GPU, against a real Prometheus.

Two 4-GPU nodes, served as static /metrics in dcgm-exporter's shape with `hpc_job` labels (and who holds
job 48213 as the bundled exporter's `gpudash_job_info` says), are scraped
every second by a real Prometheus running the rules `gpudash rules` renders. Job 48213 holds all eight
GPUs; node B's GPU 3 runs a slower SM clock (the straggler), node B's GPU 1 is throttled (the bundled
exporter's flag) and then reports an XID, node A's GPU 2 is throttled as dcgm-exporter's clock-event count
says, and a process of another job (999) sits on node B's GPU 2. Halfway through, node A's GPU 0 moves
to job 50000: its `hpc_job` label changes, and every node panel must still draw it as one GPU.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.e2e import StaticMetrics, gpudash_rules, site_yaml
from support.paths import ROOT
from support.site_query import site_promql
from support.slack import budget

from gpudash.catalog import DCGM, JOB_INFO
from gpudash.check.judge import GroupResult, Result, Status, run_check
from gpudash.check.prometheus_api import PrometheusClient, TimeRange
from gpudash.check.queries import PANEL, VARIABLE, dashboard_groups, load_dashboards
from gpudash.config.loading import load_settings
from gpudash.panels.build import build_all
from gpudash.promql.fabric_recordings import GPU_CONGESTION, GPU_RX, GPU_TX
from gpudash.promql.scanner import metric_names
from gpudash.stack.process import PrometheusProcess
from gpudash.stack.servers import prometheus_config, rule_files, scrape_jobs

JOB, OTHER_JOB, FOREIGN_JOB, FOREIGN_PID = "48213", "50000", "999", "4242"
STRAGGLER, THROTTLED, SHARED = ("B", 3), ("B", 1), ("B", 2)
HOLDER = {"user": "alice", "account": "physics", "partition": "h200", "job_name": "pretrain-7b"}
THROTTLED_DCGM = ("A", 2)  # throttled as only dcgm-exporter's clock-event count says
RANGE_S = 600
JSON = ROOT / "dashboards" / "json"


def _name(key: str) -> str:
    return DCGM.ref(key).name


def exposition(node: str, jobs: dict[int, str], xid: int) -> bytes:
    """One node's /metrics: four GPUs, each with its job's label, dcgm-exporter's names."""
    lines = []
    for gpu in range(4):
        labels = f'gpu="{gpu}",UUID="GPU-{node}{gpu}",modelName="NVIDIA H200",Hostname="node-{node}",' \
                 f'hpc_job="{jobs[gpu]}"'
        slow = (node, gpu) == STRAGGLER
        readings = {"gpu_util": 95, "sm_active": 0.97 if slow else 0.6, "tensor_active": 0.4,
                    "sm_clock": 1500 if slow else 1980, "power": 600.0, "fb_used": 100000 + 1000 * gpu,
                    "fb_free": 40000, "xid_last": xid if (node, gpu) == THROTTLED else 0,
                    "energy": 10 ** 12}  # mJ since boot, a default counter of every dcgm-exporter
        lines += [f"{_name(key)}{{{labels}}} {value}" for key, value in readings.items()]
        lines.append(f'{_name("xid_total")}{{{labels},xid="13"}} {1 if xid and (node, gpu) == THROTTLED else 0}')
        if node == "B":  # the bundled exporter's flag
            throttled = 1 if (node, gpu) == THROTTLED else 0
            lines.append(f'{_name("clock_event_active")}{{{labels},clock_event="hw_slowdown"}} {throttled}')
        else:  # dcgm-exporter's count of events in its window, and no flag
            events = 3 if (node, gpu) == THROTTLED_DCGM else 0
            lines.append(f'{_name("clock_events_count")}{{{labels},clock_event="sw_thermal_slowdown",'
                         f'window_size_in_ms="300000"}} {events}')
        # A process series carries the GPU's labels and its own job, not the GPU's copies (bundled exporter).
        base = labels.rsplit(",hpc_job=", 1)[0]
        lines.append(f'{_name("process_fb_used")}{{{base},hpc_job="{jobs[gpu]}",pid="{1000 + gpu}",'
                     f'process_name="python"}} 90000')
        if (node, gpu) == SHARED:
            lines.append(f'{_name("process_fb_used")}{{{base},hpc_job="{FOREIGN_JOB}",pid="{FOREIGN_PID}",'
                         f'process_name="stray"}} 8000')
    # Who holds the job, as the bundled exporter publishes it on each of the job's nodes; job 50000 has no
    # such series (a dcgm-exporter site's every job): its holder is unknown.
    if JOB in jobs.values():
        info = ",".join(f'{key}="{value}"' for key, value in HOLDER.items())
        lines.append(f'{JOB_INFO}{{hpc_job="{JOB}",{info}}} 1')
    return ("\n".join(lines) + "\n").encode()


@dataclass
class Stack:
    prometheus: PrometheusProcess
    nodes: dict[str, str]  # node name -> instance (address)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("job-dashboard-e2e")
    everyone = dict.fromkeys(range(4), JOB)
    with StaticMetrics(exposition("A", everyone, 0)) as a, StaticMetrics(exposition("B", everyone, 0)) as b:
        files = gpudash_rules(tmp / "generated", site_yaml(tmp / "site.yml", "e2e", [a.address, b.address]))
        rules = rule_files(files)
        config = prometheus_config(scrape_jobs(files), rule_files=list(rules), interval="1s")
        with PrometheusProcess(config, rules) as prometheus:
            prometheus.wait_for(f'cluster_job:gpu_count:count{{hpc_job="{JOB}"}} == 8', timeout=budget(30))
            prometheus.wait_for(f'count_over_time(cluster_job:gpu_count:count{{hpc_job="{JOB}"}}[1m]) >= 3',
                                timeout=budget(30))
            # Halfway: node A's GPU 0 goes to another job; node B's GPU 1 reports XID 13.
            a.body = exposition("A", {**everyone, 0: OTHER_JOB}, 0)
            b.body = exposition("B", everyone, 13)
            prometheus.wait_for(f'cluster_job:gpu_count:count{{hpc_job="{OTHER_JOB}"}} == 1', timeout=budget(30))
            prometheus.wait_for(f'changes({_name("xid_last")}[1m]) > 0', timeout=budget(30))
            # Two 15 s steps of the GPU-hours subqueries (the committed dashboards' scrape interval) in the job.
            prometheus.wait_for(f'count_over_time(cluster_job:gpu_count:count{{hpc_job="{OTHER_JOB}"}}[1m]) >= 31',
                                timeout=budget(60))
            yield Stack(prometheus, {"A": a.address, "B": b.address})


def _check(stack: Stack, dashboards: list[tuple[dict[str, Any], str]], variables: dict[str, str] | None = None,
           job_label: str = "hpc_job") -> list[GroupResult]:
    groups = dashboard_groups(dashboards, scrape_interval_s=1, variables=variables, range_s=RANGE_S)
    return run_check(stack.prometheus.url, groups, site_promql("dcgm", 1, job_label))


# No GPU of this stack is partitioned with MIG: the job's MIG instances are rightly none.
NO_MIG = "The job's MIG instances (top 10 by memory)"


# No node of this stack has an RDMA port: the network panels and the straggler tables' port column rightly none.
PORTS = frozenset({GPU_CONGESTION, GPU_TX, GPU_RX})


def _rightly_empty(r: Result) -> bool:
    reads_ports = bool(PORTS & set(metric_names(r.query.expr)))
    return r.status is Status.NOTHING_MATCHES and (r.query.item == NO_MIG or reads_ports)


def _not_ok(results: list[GroupResult]) -> list[str]:
    return [f"{r.query.item} [{r.query.ref}]: {r.status.value} {r.detail} -- {r.query.expr}"
            for g in results for r in g.results if (r.status is not Status.OK or r.series == 0)
            and not _rightly_empty(r)]


@pytest.mark.parametrize("job", [JOB, None], ids=["one job", "all jobs"])
def test_every_panel_and_variable_of_the_job_dashboard_returns_data(stack: Stack, job: str | None) -> None:
    results = _check(stack, load_dashboards([JSON / "gpudash-job.json"]), {"job": job} if job else None)
    assert len(results[0].results) > 25
    assert _not_ok(results) == []
    variable = next(r for r in results[0].results if r.query.kind == VARIABLE and r.query.item == "$job")
    assert variable.detail == f"hpc_job: {JOB}, {OTHER_JOB}"


def test_the_fleets_job_panels_return_data(stack: Stack) -> None:
    results = _check(stack, load_dashboards([JSON / "gpudash-fleet.json"]))
    jobs = [r for g in results for r in g.results if "GPU-hours" in r.query.item or "idle holders" in r.query.item]
    held = [r for r in jobs if r.query.item.startswith("GPU-hours held")]
    assert held and all(r.status is Status.OK for r in held), held
    # Nobody is idle here: the idle holders are rightly an empty list, reported as such, not failed.
    assert all(r.status in (Status.OK, Status.NOTHING_MATCHES) for r in jobs), jobs


def _instant(stack: Stack, panel: str, job: str = JOB, dashboard: str = "gpudash-job.json",
             ref: str = "A") -> list[dict[str, Any]]:
    (built, origin), = load_dashboards([JSON / dashboard])
    (group,) = dashboard_groups([(built, origin)], 1, {"job": job}, RANGE_S)
    (query,) = [q for q in group.queries if q.kind == PANEL and q.item == panel and q.ref == ref]
    return stack.prometheus.query(query.expr)


def _where(series: dict[str, Any], stack: Stack) -> tuple[str, int]:
    node = next(name for name, address in stack.nodes.items() if address == series["metric"]["instance"])
    return node, int(series["metric"]["gpu"])


def test_the_straggler_alone_fills_both_straggler_tables(stack: Stack) -> None:
    # The GPUs at their job's median are no rows: only the straggler, by how far it departs.
    for panel in ("Slowest SM clocks against the job's median (top 10)",
                  "Activity furthest from the job's median (top 10)"):
        series = _instant(stack, panel)
        assert [_where(s, stack) for s in series] == [STRAGGLER], panel
    # The alert's own value: SM activity 97 % against the job's 60 %, + as the GPU is busier than its peers.
    (activity,) = _instant(stack, "Activity furthest from the job's median (top 10)")
    assert float(activity["value"][1]) == pytest.approx(37, abs=0.5)
    (clock,) = _instant(stack, "Slowest SM clocks against the job's median (top 10)")
    assert float(clock["value"][1]) == pytest.approx(1 - 1500 / 1980, abs=0.01)


def test_xid_throttling_and_the_foreign_process_are_on_the_right_gpus(stack: Stack) -> None:
    xids = _instant(stack, "The job's GPUs with an XID error in range")
    assert [_where(s, stack) for s in xids] == [THROTTLED]
    throttled = _instant(stack, "Throttled GPUs now (top 10)")
    assert sorted(_where(s, stack) for s in throttled) == [THROTTLED_DCGM, THROTTLED]
    (count,) = _instant(stack, "The job's GPUs throttled now")
    assert float(count["value"][1]) == 2
    foreign = _instant(stack, "Processes on the job's GPUs that belong to another job (top 10 by memory)")
    assert [(s["metric"]["pid"], s["metric"]["hpc_job"]) for s in foreign] == [(FOREIGN_PID, FOREIGN_JOB)]
    # Job 50000's one GPU runs only its own process: nothing foreign there.
    assert _instant(stack, "Processes on the job's GPUs that belong to another job (top 10 by memory)",
                    OTHER_JOB) == []


def test_gpu_hours_and_size_follow_the_job(stack: Stack) -> None:
    (size,) = _instant(stack, "GPUs")
    assert float(size["value"][1]) == 7  # node A's GPU 0 left for job 50000
    (nodes,) = _instant(stack, "Nodes")
    assert float(nodes["value"][1]) == 2
    (hours,) = _instant(stack, "GPU-hours in range")
    # The recorded size added up at every rule evaluation (1 s here): what the 15 s subquery approximates,
    # to within one subquery step of the job's eight GPUs.
    (exact,) = stack.prometheus.query(f'sum_over_time(cluster_job:gpu_count:count{{hpc_job="{JOB}"}}[{RANGE_S}s])'
                                      " / 3600")
    assert float(exact["value"][1]) > 0
    assert abs(float(hours["value"][1]) - float(exact["value"][1])) <= 8 * 15 / 3600


def test_who_holds_the_job_is_on_its_dashboard_and_unknown_without_its_info_series(stack: Stack) -> None:
    (holder,) = _instant(stack, "Who holds the job")
    assert {key: holder["metric"].get(key) for key in HOLDER} == HOLDER
    assert holder["metric"]["hpc_job"] == JOB  # one row, though both of its nodes publish the series
    # No series for job 50000: no row, and the table says "unknown" (its noValue).
    assert _instant(stack, "Who holds the job", OTHER_JOB) == []


def test_the_fleets_gpu_hours_tables_name_each_jobs_user_and_account(stack: Stack) -> None:
    held = _instant(stack, "GPU-hours held per job (top 10)", dashboard="gpudash-fleet.json")
    rows = {series["metric"]["hpc_job"]: series for series in held}
    assert set(rows) == {JOB, OTHER_JOB} and len(held) == 2  # a job without metadata keeps its row, once
    assert {key: rows[JOB]["metric"].get(key) for key in ("user", "account")} == \
        {"user": HOLDER["user"], "account": HOLDER["account"]}
    assert "user" not in rows[OTHER_JOB]["metric"] and "account" not in rows[OTHER_JOB]["metric"]
    assert "partition" not in rows[JOB]["metric"]  # the columns asked for, no more
    # The hours are the recorded ones, unchanged by the join.
    (hours,) = stack.prometheus.query(f'sum_over_time(cluster_job:gpu_held_seconds:interval{{hpc_job="{JOB}"}}'
                                      f'[{RANGE_S}s]) / 3600')
    assert float(rows[JOB]["value"][1]) == pytest.approx(float(hours["value"][1]), rel=0.05)


def test_node_panels_draw_one_series_per_gpu_while_its_job_label_changes(stack: Stack) -> None:
    client = PrometheusClient(stack.prometheus.url)
    try:
        window = TimeRange(client.now(), RANGE_S, 1)
        raw = client.range(f'{_name("gpu_util")}{{instance="{stack.nodes["A"]}",gpu="0"}}', window)
        assert len(raw) == 2  # the label did change: the raw series split in two
        results = _check(stack, load_dashboards([JSON / "gpudash-node.json"]), {"instance": stack.nodes["A"]})
        per_gpu = [r for g in results for r in g.results
                   if r.query.kind == PANEL and r.status is Status.OK and "process" not in r.query.item.lower()]
        assert len(per_gpu) > 15
        for result in per_gpu:
            query = result.query
            answer = client.instant(query.expr) if query.instant else client.range(query.expr, window)
            identities = Counter(tuple(sorted((k, v) for k, v in s["metric"].items() if k != "hpc_job"))
                                 for s in answer)
            assert all(n == 1 for n in identities.values()), f"{query.item}: {query.expr}"
            assert not any("hpc_job" in s["metric"] for s in answer), f"{query.item}: {query.expr}"
            gpus = {s["metric"].get("gpu") for s in answer} - {None}
            # Per-GPU series are ordered by index: one-digit indexes padded ("03"), so Prometheus's order is 0-9.
            assert gpus <= {"00", "01", "02", "03"} or gpus <= {"0", "1", "2", "3"}, gpus
    finally:
        client.close()


def test_a_site_without_jobs_sees_its_job_dashboard_as_no_jobs_not_as_failures(stack: Stack,
                                                                                tmp_path: Path) -> None:
    site = tmp_path / "gpudash.yaml"
    site.write_text("jobs:\n  label: slurm_job_nobody_sets\n")
    built = build_all(load_settings(ROOT / "thresholds.yaml", site), ROOT / "dashboards")
    results = _check(stack, [(built["gpudash-job.json"], "built")], job_label="slurm_job_nobody_sets")
    statuses = Counter(r.status for g in results for r in g.results)
    assert statuses[Status.NO_JOBS] > 20
    assert not any(status.failed for status in statuses), statuses
