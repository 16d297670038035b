"""A node whose GPUs lack a field (an H200 without NVLink) and a Prometheus younger than a subquery's step, live.

A real Prometheus runs the rules `gpudash rules` renders and scrapes a simulated node whose GPUs answer
NotSupported for NVLink bandwidth, as an H200 on PCIe does. `gpudash check` then calls "NVLink traffic by
cluster" *not supported on this GPU*, from the exporter's `gpudash_exporter_field_unsupported`, and "Energy in
range" (a subquery at the site's 15 s scrape interval) *needs history* until the recording it sums is older than
one step, and data after.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from support.e2e import gpudash_rules, site_yaml
from support.paths import ROOT
from support.site_query import site_promql
from support.slack import budget
from support.waiting import eventually

from gpudash.catalog import EXPORTER_UNSUPPORTED
from gpudash.check.judge import Checker, Status, run_check
from gpudash.check.prometheus_api import PrometheusClient, TimeRange
from gpudash.check.queries import CheckQuery, dashboard_groups, load_dashboards
from gpudash.exporter.service import Exporter
from gpudash.exporter.sim.fleet import Fleet
from gpudash.exporter.sim.simulated import SimulatedSource
from gpudash.stack.process import PrometheusProcess
from gpudash.stack.servers import prometheus_config, rule_files, scrape_jobs

STEP_S = 15  # the committed dashboards' subquery step: the default site's scrape interval
POWER = "cluster:gpu_power_watts:sum"


@dataclass
class Stack:
    prometheus: PrometheusProcess
    first_power: float  # time of the first recorded sample of POWER


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("unsupported")
    fleet = Fleet(2, seed=5, epoch=time.time() - 3600, unsupported=frozenset({"nvlink_bandwidth"}))
    with Exporter(SimulatedSource(fleet), interval=0.5, slow_interval=1.0) as exporter:
        files = gpudash_rules(tmp / "generated", site_yaml(tmp / "site.yml", "e2e", [f"127.0.0.1:{exporter.port}"]))
        rules = rule_files(files)
        config = prometheus_config(scrape_jobs(files), rule_files=list(rules), interval="1s")
        with PrometheusProcess(config, rules) as prometheus:
            (first,) = prometheus.wait_for(f"min_over_time(timestamp({POWER})[10m:1s])", timeout=budget(60))
            yield Stack(prometheus, float(first["value"][1]))


def _fleet_query(title: str) -> CheckQuery:
    groups = dashboard_groups(load_dashboards([ROOT / "dashboards" / "json" / "gpudash-fleet.json"]),
                              scrape_interval_s=1, range_s=1800)
    (query,) = [q for g in groups for q in g.queries if q.item == title]
    return query


def test_the_exporter_names_the_field_its_gpus_cannot_give(stack: Stack) -> None:
    said = stack.prometheus.wait_for(EXPORTER_UNSUPPORTED, timeout=budget(30))
    fields = {(s["metric"]["gpu"], s["metric"]["field"]) for s in said}
    assert {("0", "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"), ("1", "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL")} <= fields
    assert not stack.prometheus.query("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL")


def test_nvlink_traffic_is_not_supported_on_this_gpu_rather_than_a_failure(stack: Stack) -> None:
    stack.prometheus.wait_for(EXPORTER_UNSUPPORTED, timeout=budget(30))
    groups = dashboard_groups(load_dashboards([ROOT / "dashboards" / "json" / "gpudash-fleet.json"]),
                              scrape_interval_s=1, range_s=1800)
    results = run_check(stack.prometheus.url, groups, site_promql("dcgm", 1))
    (nvlink,) = [r for g in results for r in g.results if r.query.item == "NVLink traffic by cluster"]
    assert nvlink.status is Status.NOT_SUPPORTED and not nvlink.status.failed
    assert "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL" in nvlink.detail and EXPORTER_UNSUPPORTED in nvlink.detail


def test_a_subquery_of_a_young_recording_needs_history_before_one_step_then_answers(stack: Stack) -> None:
    # energy from recorded power, as the fleet's "Energy in range" reads it where a GPU has no energy counter
    fleet = _fleet_query("Energy in range")
    expr = f"sum(sum_over_time(({POWER}{{cluster=~\".*\"}})[1800s:{STEP_S}s]) * {STEP_S} / 3600) / 1000"
    query = CheckQuery(fleet.source, fleet.item, fleet.kind, expr, fleet.instant, fleet.ref)
    first = stack.first_power
    # the moment the recording began, before the next multiple of the step: the subquery samples nothing yet
    early = first + 0.001
    assert math.floor(early / STEP_S) * STEP_S < first
    client = PrometheusClient(stack.prometheus.url)
    try:
        checker = Checker(client, site_promql("dcgm", 1), TimeRange(early, 1800, 1))
        young = checker.run(query)
        assert young.status is Status.NEEDS_HISTORY, young
        assert POWER in young.detail and f"({STEP_S}s)" in young.detail
        # once a multiple of the step has passed since, it answers
        later = (math.floor(first / STEP_S) + 1) * STEP_S + 1
        eventually(lambda: time.time() > later, timeout=STEP_S + 5, what="a step after the recording began")
        answered = Checker(client, site_promql("dcgm", 1), TimeRange(later, 1800, 1)).run(query)
        assert answered.status is Status.OK and answered.series == 1, answered
    finally:
        client.close()
