"""A job across two simulated nodes with one straggler, end to end: two `gpudash exporter` processes -> a real
Prometheus with the generated rules -> `GPUJobStraggler` fires on the straggler and on no other GPU. The
straggler's InfiniBand port is congested too (the simulator serves each GPU's port under node_exporter's
names): the straggler tables say so on its row, and the node and job dashboards draw the ports.

The rules come from `gpudash rules` with the committed thresholds.yaml, only the straggler's window and
`for:` shortened so the test takes seconds; every level (job size, busy median, clock ratio, activity points)
stays as committed. Each node's exporter evaluates the same job and fault options for its own --hostname.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.e2e import gpudash_rules, panel_results, site_yaml, unexplained
from support.paths import ROOT
from support.site_query import site_promql
from support.slack import budget

from gpudash.check.judge import Status, run_check
from gpudash.check.queries import dashboard_groups, interpolate, load_dashboards
from gpudash.config.loading import load_settings
from gpudash.promql.fabric_recordings import GPU_CONGESTION, GPU_TX
from gpudash.repository import JOB_UID, NODE_UID
from gpudash.stack.process import PrometheusProcess
from gpudash.stack.servers import ExporterProcess, prometheus_config, rule_files, scrape_jobs

JOB, STRAGGLER_NODE, STRAGGLER_GPU = "48213", "node-02", "5"
# The job started 650 s before the test: ramped up, and no job-wide dip falls in the next minutes (stalls
# start 200 s or more into a 10-minute slot; the first checkpoint is 20 minutes in). The straggler began at 5m.
AGE_S = 650
CONGESTED = 0.6  # the straggler's port waits in this share of its transmit slots: above the alert's level
NODES = ("node-01", "node-02")


def short_thresholds(path: Path) -> Path:
    data = yaml.safe_load((ROOT / "thresholds.yaml").read_text())
    data["alerts"]["job_straggler"].update({"window": "10s", "for": "5s"})
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@dataclass
class JobStack:
    prometheus: PrometheusProcess
    instance: dict[str, str]  # node name -> its instance label


def named_by_node(jobs: list[dict[str, Any]], address: dict[str, str]) -> list[dict[str, Any]]:
    """Each exporter's series under `<node>:9400`, as on a cluster: both listen on 127.0.0.1, and the fabric
    recordings tie a port to its GPUs by host (node_exporter's series are this exporter's own here)."""
    relabel = [{"source_labels": ["__address__"], "regex": re.escape(target), "target_label": "instance",
                "replacement": f"{node}:9400"} for node, target in address.items()]
    return [{**job, "relabel_configs": [*job.get("relabel_configs", []), *relabel]} for job in jobs]


@pytest.fixture(scope="module")
def job_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JobStack]:
    tmp = tmp_path_factory.mktemp("job-straggler")
    common = ["--simulate", "8", "--seed", "11", "--sim-nodes", ",".join(NODES),
              "--sim-job", f"{JOB}=node-01:0-7,node-02:0-7",
              "--fault", f"{STRAGGLER_NODE}/{STRAGGLER_GPU}=straggler:30@5m",
              "--fault", f"{STRAGGLER_NODE}/{STRAGGLER_GPU}=ib-congested:{CONGESTED}@5m",
              "--sim-epoch", str(time.time() - AGE_S), "--interval", "250ms", "--slow-interval", "500ms"]
    # The exporters first, each on a port it binds itself; then the site that names them and Prometheus.
    with ExitStack() as stack:
        address = {node: stack.enter_context(ExporterProcess([*common, "--hostname", node])).address
                   for node in NODES}
        site = site_yaml(tmp / "site.yml", "jobs", list(address.values()))
        files = gpudash_rules(tmp / "generated", site, short_thresholds(tmp / "thresholds.yaml"))
        rules = rule_files(files)
        config = prometheus_config(named_by_node(scrape_jobs(files), address), rule_files=list(rules), interval="1s")
        prometheus = stack.enter_context(PrometheusProcess(config, rules))
        yield JobStack(prometheus, {node: f"{node}:9400" for node in NODES})


def test_the_straggler_fires_and_no_other_gpu_does(job_stack: JobStack) -> None:
    prom = job_stack.prometheus
    firing = 'ALERTS{alertname="GPUJobStraggler",alertstate="firing"}'
    prom.wait_for(firing, timeout=budget(90))
    # Let every other GPU have its chance to go pending too: a window and a `for:` more.
    prom.wait_for(f"count_over_time({firing}[1m]) >= 6", timeout=budget(60))
    # pending or firing at any moment of the run, any GPU (a pending and a firing series per GPU: one GPU)
    ever = prom.query('max by (instance, gpu, hpc_job) (max_over_time(ALERTS{alertname="GPUJobStraggler"}[5m]))')
    seen = sorted((s["metric"]["instance"], s["metric"]["gpu"], s["metric"]["hpc_job"]) for s in ever)
    assert seen == [(job_stack.instance[STRAGGLER_NODE], STRAGGLER_GPU, JOB)]
    (alert,) = prom.query(firing)
    assert alert["metric"]["severity"] == "warning" and alert["metric"]["cluster"] == "jobs"


def test_the_job_recordings_see_the_whole_job(job_stack: JobStack) -> None:
    prom = job_stack.prometheus
    prom.wait_for(f'cluster_job:gpu_count:count{{hpc_job="{JOB}"}} == 16', timeout=budget(60))
    (median,) = prom.query(f'cluster_job:gpu_sm_clock_mhz:median{{hpc_job="{JOB}"}}')
    (straggler,) = prom.query(f'DCGM_FI_DEV_SM_CLOCK{{instance="{job_stack.instance[STRAGGLER_NODE]}",'
                              f'gpu="{STRAGGLER_GPU}"}}')
    assert float(straggler["value"][1]) < 0.9 * float(median["value"][1])


def test_every_panel_of_the_job_dashboard_answers_for_this_job(job_stack: JobStack) -> None:
    dashboards = load_dashboards([ROOT / "dashboards" / "json" / f"{JOB_UID}.json"])
    groups = dashboard_groups(dashboards, scrape_interval_s=1, variables={"job": JOB}, range_s=600)
    results = run_check(job_stack.prometheus.url, groups, site_promql("dcgm", 1))
    rows = panel_results(results)
    assert len(rows) > 20
    # data, or rightly nothing: no GPU of this job is idle, throttled or shared with another job's process
    assert unexplained(results) == []
    assert not [r for r in rows if r.status is Status.NO_JOBS]
    tables = [r for r in rows if "against the job's median" in r.query.item or "from the job's median" in r.query.item]
    # each table's GPUs and their ports' congestion
    assert len(tables) == 4 and all(r.status is Status.OK and r.series for r in tables)
    # and the straggler leads the slow-clock table
    (panel,) = [p for p in dashboards[0][0]["panels"] if p.get("title", "").startswith("Slowest SM clocks")]
    expr = panel["targets"][0]["expr"].replace("$cluster", ".*").replace("$job", JOB)
    top = max(job_stack.prometheus.query(expr), key=lambda s: float(s["value"][1]))
    assert (top["metric"]["instance"], top["metric"]["gpu"]) == (job_stack.instance[STRAGGLER_NODE], STRAGGLER_GPU)


def _panel(dashboard: dict[str, Any], prefix: str) -> dict[str, Any]:
    (panel,) = [p for p in dashboard["panels"] if p.get("title", "").startswith(prefix)]
    return panel


def _rows(stack: JobStack, expr: str, **chosen: str) -> list[dict[str, Any]]:
    chosen = {"cluster": ".*", "job": JOB, "gpu": ".*", "__range": "1h", **chosen}
    return stack.prometheus.query(interpolate(expr, chosen))


def _labels(series: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in series["metric"].items() if k != "__name__"))


def test_the_straggler_tables_say_its_port_is_congested_on_its_own_row(job_stack: JobStack) -> None:
    level = load_settings(ROOT / "thresholds.yaml").thresholds.alerts.fabric.congestion_ratio
    assert level < CONGESTED
    straggler = (job_stack.instance[STRAGGLER_NODE], STRAGGLER_GPU)
    job_stack.prometheus.wait_for(f'{GPU_CONGESTION}{{instance="{straggler[0]}",gpu="{STRAGGLER_GPU}"}} > {level}',
                                  timeout=budget(60))
    (job,) = load_dashboards([ROOT / "dashboards" / "json" / f"{JOB_UID}.json"])
    for prefix in ("Slowest SM clocks", "Activity furthest"):
        gpus, ports = (t["expr"] for t in _panel(job[0], prefix)["targets"])
        listed = {_labels(s): s for s in _rows(job_stack, gpus)}
        congestion = {_labels(s): float(s["value"][1]) for s in _rows(job_stack, ports)}
        # every port value sits on a row of the table, labels and all, and the straggler's is above the level
        assert congestion and set(congestion) <= set(listed), prefix
        (row,) = [key for key in congestion if (dict(key)["instance"], dict(key)["gpu"]) == straggler]
        assert congestion[row] > level, prefix
        assert all(value < level for key, value in congestion.items() if key != row), (prefix, congestion)


def test_the_node_panels_draw_the_nodes_8_ports(job_stack: JobStack) -> None:
    address = job_stack.instance[STRAGGLER_NODE]
    job_stack.prometheus.wait_for(f'count({GPU_TX}{{instance="{address}"}}) == 8', timeout=budget(60))
    (node,) = load_dashboards([ROOT / "dashboards" / "json" / f"{NODE_UID}.json"])
    for prefix in ("Network transmit per GPU", "Network receive per GPU", "Port congestion per GPU"):
        (target,) = _panel(node[0], prefix)["targets"]
        series = _rows(job_stack, target["expr"], instance=address)
        ports = sorted((s["metric"]["gpu"], s["metric"]["device"], s["metric"]["port"]) for s in series)
        # the node's own 8 ports, each on its GPU, and none of the other node's
        assert ports == [(f"0{i}", f"mlx5_{i}", "1") for i in range(8)], prefix
        assert {s["metric"]["instance"] for s in series} == {address}
        if prefix.startswith("Port congestion"):
            worst = max(series, key=lambda s: float(s["value"][1]))
            assert worst["metric"]["gpu"] == f"0{STRAGGLER_GPU}"


def test_the_job_panels_draw_the_jobs_nodes_and_its_most_congested(job_stack: JobStack) -> None:
    job_stack.prometheus.wait_for(f"count(count by (instance) ({GPU_TX})) == 2", timeout=budget(60))
    (job,) = load_dashboards([ROOT / "dashboards" / "json" / f"{JOB_UID}.json"])
    for prefix in ("Network transmit: the job's", "Network receive: the job's"):
        (target,) = _panel(job[0], prefix)["targets"]
        series = _rows(job_stack, target["expr"])
        assert sorted(s["metric"]["instance"] for s in series) == sorted(job_stack.instance.values()), prefix
        assert all(float(s["value"][1]) > 0 for s in series)
    (target,) = _panel(job[0], "Port congestion: the job's")["targets"]
    worst = max(_rows(job_stack, target["expr"]), key=lambda s: float(s["value"][1]))
    assert worst["metric"]["instance"] == job_stack.instance[STRAGGLER_NODE]
