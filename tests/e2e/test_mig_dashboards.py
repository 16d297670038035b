"""MIG instances on the node and job dashboards, live: a real Prometheus scrapes a simulated node whose GPU 0 is
partitioned (`--sim-mig`), with one instance attributed to a job by a `<gpu>.<gi>` job-mapping file.

The node dashboard's "MIG instances" lists each instance with its id and profile, the job dashboard's lists the
job's instance; a node without MIG answers those tables with nothing, which `gpudash check` calls *nothing
matches*, never a failure, and every other panel reads as it did.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.paths import ROOT
from support.site_query import site_promql
from support.slack import budget

from gpudash.check.judge import Result, Status, run_check
from gpudash.check.queries import dashboard_groups, load_dashboards
from gpudash.exporter.attribution.hpc import HpcJobMapping
from gpudash.exporter.service import Exporter
from gpudash.exporter.sim.fleet import Fleet
from gpudash.exporter.sim.mig_layout import parse_mig
from gpudash.exporter.sim.simulated import SimulatedSource
from gpudash.stack.process import PrometheusProcess

JSON = ROOT / "dashboards" / "json"
JOB = "48213"
JOB_TABLE = "The job's MIG instances (top 10 by memory)"


def _config(ports: list[int]) -> str:
    targets = ", ".join(f"'127.0.0.1:{port}'" for port in ports)
    return ("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: gpu\n"
            f"    static_configs:\n      - targets: [{targets}]\n        labels: {{cluster: e2e}}\n")


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusProcess]:
    mapping = tmp_path_factory.mktemp("job-mapping")
    (mapping / "0.7").write_text(f"{JOB}\n")  # the prolog's file for GPU 0's instance 7
    partitioned = Fleet(2, seed=4, workloads={0: "train"}, epoch=time.time() - 3600,
                        mig=parse_mig(["0=3g.71gb,1g.18gb,1g.18gb"]))
    plain = Fleet(2, seed=4, epoch=time.time() - 3600)
    attributor = HpcJobMapping(Path(mapping))
    with Exporter(SimulatedSource(partitioned), interval=0.5, slow_interval=1.0, hostname="mig-node",
                  attributor=attributor) as mig, \
            Exporter(SimulatedSource(plain), interval=0.5, slow_interval=1.0, hostname="plain-node") as whole, \
            PrometheusProcess(_config([mig.port, whole.port])) as server:
        server.wait_for('DCGM_FI_DEV_FB_USED{GPU_I_ID="7",hpc_job="48213"}', timeout=budget(60))
        server.wait_for('DCGM_FI_DEV_FB_USED{hostname="plain-node"}', timeout=budget(60))
        yield server


def _results(prometheus: PrometheusProcess, dashboard: str, title: str, **variables: str) -> list[Result]:
    groups = dashboard_groups(load_dashboards([JSON / dashboard]), 1, variables=variables, range_s=600)
    results = run_check(prometheus.url, groups, site_promql("dcgm", 1))
    return [r for g in results for r in g.results if r.query.item == title]


def _rows(prometheus: PrometheusProcess, expr: str) -> list[dict[str, str]]:
    return [s["metric"] for s in prometheus.query(expr)]


def test_the_node_dashboard_lists_each_instance_of_a_partitioned_node(prometheus: PrometheusProcess) -> None:
    node = prometheus.query('count by (instance) (DCGM_FI_DEV_FB_USED{GPU_I_ID!=""})')[0]["metric"]["instance"]
    found = _results(prometheus, "gpudash-node.json", "MIG instances", instance=node)
    assert found and all(r.status is Status.OK for r in found), found
    assert {r.series for r in found} == {3}  # one row per instance, in every column
    (table,) = [p for p in load_dashboards([JSON / "gpudash-node.json"])[0][0]["panels"]
                if p.get("title") == "MIG instances"]
    rows = _rows(prometheus, table["targets"][0]["expr"].replace("$instance", node).replace("$gpu", ".*")
                 .replace("$cluster", ".*"))
    assert sorted((r["GPU_I_ID"], r["GPU_I_PROFILE"]) for r in rows) == [("1", "3g.71gb"), ("7", "1g.18gb"),
                                                                          ("8", "1g.18gb")]


def test_a_node_without_mig_shows_no_instance_and_fails_nothing(prometheus: PrometheusProcess) -> None:
    plain = prometheus.query('count by (instance) (DCGM_FI_DEV_FB_USED{hostname="plain-node"})')
    node = plain[0]["metric"]["instance"]
    found = _results(prometheus, "gpudash-node.json", "MIG instances", instance=node)
    assert found and all(r.status is Status.NOTHING_MATCHES for r in found), found
    memory = _results(prometheus, "gpudash-node.json", "Memory used", instance=node)
    assert memory and all(r.status is Status.OK for r in memory)


def test_the_job_dashboard_lists_the_instance_its_mapping_file_gives_it(prometheus: PrometheusProcess) -> None:
    found = _results(prometheus, "gpudash-job.json", JOB_TABLE, job=JOB)
    assert found and all(r.status is Status.OK and r.series == 1 for r in found), found
    other = _results(prometheus, "gpudash-job.json", JOB_TABLE, job="99999")
    assert other and all(not r.status.failed and r.series == 0 for r in other), other
