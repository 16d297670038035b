"""A job across two simulated nodes with one straggler, end to end: two `gpudash exporter` processes -> a real
Prometheus with the generated rules -> `GPUJobStraggler` fires on the straggler and on no other GPU.

The rules come from `gpudash rules` with the committed thresholds.yaml, only the straggler's window and
`for:` shortened so the test takes seconds; every level (job size, busy median, clock ratio, activity points)
stays as committed. Each node's exporter evaluates the same job and fault options for its own --hostname.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from support.e2e import gpudash_rules, panel_results, site_yaml, unexplained
from support.paths import ROOT
from support.site_query import site_promql
from support.slack import budget

from gpudash.check.judge import Status, run_check
from gpudash.check.queries import dashboard_groups, load_dashboards
from gpudash.repository import JOB_UID
from gpudash.stack.process import PrometheusProcess
from gpudash.stack.servers import ExporterProcess, prometheus_config, rule_files, scrape_jobs

JOB, STRAGGLER_NODE, STRAGGLER_GPU = "48213", "node-02", "5"
# The job started 650 s before the test: ramped up, and no job-wide dip falls in the next minutes (stalls
# start 200 s or more into a 10-minute slot; the first checkpoint is 20 minutes in). The straggler began at 5m.
AGE_S = 650
NODES = ("node-01", "node-02")


def short_thresholds(path: Path) -> Path:
    data = yaml.safe_load((ROOT / "thresholds.yaml").read_text())
    data["alerts"]["job_straggler"].update({"window": "10s", "for": "5s"})
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@dataclass
class JobStack:
    prometheus: PrometheusProcess
    instance: dict[str, str]  # node name -> its scrape target


@pytest.fixture(scope="module")
def job_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JobStack]:
    tmp = tmp_path_factory.mktemp("job-straggler")
    common = ["--simulate", "8", "--seed", "11", "--sim-nodes", ",".join(NODES),
              "--sim-job", f"{JOB}=node-01:0-7,node-02:0-7",
              "--fault", f"{STRAGGLER_NODE}/{STRAGGLER_GPU}=straggler:30@5m",
              "--sim-epoch", str(time.time() - AGE_S), "--interval", "250ms", "--slow-interval", "500ms"]
    # The exporters first, each on a port it binds itself; then the site that names them and Prometheus.
    with ExitStack() as stack:
        instance = {node: stack.enter_context(ExporterProcess([*common, "--hostname", node])).address
                    for node in NODES}
        site = site_yaml(tmp / "site.yml", "jobs", list(instance.values()))
        files = gpudash_rules(tmp / "generated", site, short_thresholds(tmp / "thresholds.yaml"))
        rules = rule_files(files)
        config = prometheus_config(scrape_jobs(files), rule_files=list(rules), interval="1s")
        prometheus = stack.enter_context(PrometheusProcess(config, rules))
        yield JobStack(prometheus, instance)


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
    assert len(tables) == 2 and all(r.status is Status.OK and r.series for r in tables)
    # and the straggler leads the slow-clock table
    (panel,) = [p for p in dashboards[0][0]["panels"] if p.get("title", "").startswith("Slowest SM clocks")]
    expr = panel["targets"][0]["expr"].replace("$cluster", ".*").replace("$job", JOB)
    top = max(job_stack.prometheus.query(expr), key=lambda s: float(s["value"][1]))
    assert (top["metric"]["instance"], top["metric"]["gpu"]) == (job_stack.instance[STRAGGLER_NODE], STRAGGLER_GPU)
