"""Many clusters: one Prometheus per cluster remote-writes into one VictoriaMetrics, and the dashboards read
the global store.

Each cluster's Prometheus scrapes its own simulated node with the scrape config `gpudash rules` renders for
that cluster (which attaches `cluster` as a target label), evaluates the generated recording rules there,
and carries `cluster` as an external label too, which is what labels the series that do not come from the
GPU job (its own metrics here). The dashboards' $cluster variable must list both clusters, and every fleet
panel must return data per cluster from the global store.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass

import pytest
from support.e2e import gpudash_rules, site_yaml, unexplained
from support.paths import ROOT
from support.site_query import site_promql
from support.waiting import eventually

from gpudash.catalog import PROMETHEUS_ALERTS
from gpudash.check.judge import Status, run_check
from gpudash.check.prometheus_api import PrometheusClient as Client
from gpudash.check.prometheus_api import TimeRange
from gpudash.check.queries import PANEL, VARIABLE, Interpolation, dashboard_groups, load_dashboards
from gpudash.stack.process import PrometheusProcess
from gpudash.stack.servers import ExporterProcess, VictoriaMetrics, prometheus_config, rule_files, scrape_jobs

CLUSTERS = {"east": 6, "west": 4}  # name -> simulated GPUs
RANGE_S = 600  # a 10-minute dashboard range: VictoriaMetrics aligns range queries to the step


@dataclass
class Fleet:
    store: VictoriaMetrics
    prometheus: dict[str, PrometheusProcess]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    tmp = tmp_path_factory.mktemp("multicluster-e2e")
    with ExitStack() as stack:
        store = stack.enter_context(VictoriaMetrics())
        servers = {}
        for seed, (name, gpus) in enumerate(CLUSTERS.items()):
            exporter = stack.enter_context(ExporterProcess(
                ["--simulate", str(gpus), "--seed", str(seed), "--fault", "1=xid:31@4s+10m", "--hostname", name]))
            files = gpudash_rules(tmp / name, site_yaml(tmp / f"{name}.yml", name, [exporter.address]))
            jobs = scrape_jobs(files)
            # Prometheus' own metrics carry no cluster target label: the external label gives them one.
            jobs.append({"job_name": "prometheus", "static_configs": [{"targets": ["PLACEHOLDER"]}]})
            config = prometheus_config(jobs, rule_files=list(rule_files(files)), interval="1s",
                                       external_labels={"cluster": name}, remote_write=store.remote_write_url)
            server = stack.enter_context(PrometheusProcess(config, rule_files(files)))
            (server.dir / server.config_name).write_text(config.replace("PLACEHOLDER", server.address))
            server.reload()
            servers[name] = server
        client = Client(store.url)
        for name, gpus in CLUSTERS.items():
            _until(client, f'cluster:gpu_count:count{{cluster="{name}"}}', gpus)
            _until(client, f'count(prometheus_build_info{{cluster="{name}"}})', 1)
            _until(client, f'count(gpudash_xid_errors_total{{cluster="{name}"}})', 1)
            # four samples of the new XID counter (one a second) in the store, so every rate window holds two
            _until(client, f'min(count_over_time(gpudash_xid_errors_total{{cluster="{name}"}}[1m])) >= bool 4', 1)
            # and the recorded series the fleet panels read, in a range query at the step the tests use
            recorded = f'cluster_instance:gpu_utilization:avg{{cluster="{name}"}}'
            eventually(lambda r=recorded: client.range(r, TimeRange(client.now(), RANGE_S, 5)), timeout=60,
                       interval=0.5, what=f"{recorded} in a range query of the global store")
            # without an energy counter, energy adds the recorded power up over a subquery at the site's scrape
            # interval (15 s): it answers once the recording spans two steps
            _until(client, f'count_over_time(cluster:gpu_power_watts:sum{{cluster="{name}"}}[1m]) > bool 30', 1)
        yield Fleet(store, servers)


CONDITIONAL = ("Exporters and GPUs that stopped reporting", "Memory pressure", "Throttled GPUs now",
               "MIG instances", "The job's MIG instances")  # no GPU of these clusters is partitioned


def _value(client: Client, expr: str) -> float | None:
    result = client.instant(expr)
    return float(result[0]["value"][1]) if result else None


def _until(client: Client, expr: str, value: float) -> None:
    eventually(lambda: _value(client, expr) == value, timeout=60, interval=0.5,
               what=f"{expr} == {value:g} in the global store")


def test_cluster_variable_lists_both_clusters_from_the_global_store(fleet: Fleet) -> None:
    groups = dashboard_groups(load_dashboards([ROOT / "dashboards" / "json"]), 1, range_s=RANGE_S)
    results = run_check(fleet.store.url, groups, site_promql("dcgm", 1))
    variables = {(g.group.title, r.query.item): r for g in results for r in g.results if r.query.kind == VARIABLE}
    cluster = variables[("GPU fleet", "$cluster")]
    assert cluster.status is Status.OK and cluster.series == 2
    assert cluster.detail == "cluster: east, west"
    assert variables[("GPU node", "$instance")].series == 2
    assert variables[("GPU node", "$gpu")].series == max(CLUSTERS.values())  # gpu numbers 0..5 across nodes


@pytest.mark.parametrize("cluster", sorted(CLUSTERS))
def test_every_panel_returns_that_clusters_data_from_the_global_store(fleet: Fleet, cluster: str) -> None:
    groups = dashboard_groups(load_dashboards([ROOT / "dashboards" / "json"]), 1, {"cluster": cluster}, RANGE_S)
    results = run_check(fleet.store.url, groups, site_promql("dcgm", 1))
    assert unexplained(results) == []
    panels = [r for g in results for r in g.results if r.query.kind == PANEL]
    # everything has data but the comparison with yesterday, which this store has no history for; the lists
    # of GPUs that pass a test these healthy clusters pass by none of (stopped reporting, memory pressure, throttled;
    # memory pressure compares with 15 minutes ago: these clusters are younger); and the health dashboard, rightly
    # empty where nothing is unhealthy (no alert fires, no ECC error, no XID of a class), as are the fleet's
    # counts per action read from ALERTS: `unexplained` above holds them to the accepted reasons
    passed_by_none = (Status.NOTHING_MATCHES, Status.OPTIONAL, Status.NEEDS_HISTORY)
    assert [f"{r.query.item}: {r.status.value} {r.detail}" for r in panels
            if r.status not in (Status.OK, Status.NO_JOBS) and "offset 1d" not in r.query.expr
            and r.query.source not in ("GPU health", "GPU fabric")  # rightly empty where no GPU or port fails
            and not (r.status is Status.NOT_FIRING and PROMETHEUS_ALERTS in r.query.expr)
            and not (r.status in passed_by_none and r.query.item.startswith(CONDITIONAL))] == []

    # and the data is that cluster's: every series that names a cluster names this one
    client = Client(fleet.store.url)
    now = client.now()
    for r in panels:
        if r.status is not Status.OK:
            continue
        # at the check's step, as Grafana sends a range query (step = $__interval: per-step counts line up)
        window = TimeRange(now, RANGE_S, Interpolation(RANGE_S, 1).interval_s)
        series = client.instant(r.query.expr) if r.query.instant else client.range(r.query.expr, window)
        assert series, r.query.item
        assert {s["metric"]["cluster"] for s in series if "cluster" in s["metric"]} <= {cluster}, r.query.item


def test_per_cluster_panels_split_the_fleet_by_cluster(fleet: Fleet) -> None:
    fleet_dash = load_dashboards([ROOT / "dashboards" / "json" / "gpudash-fleet.json"])
    (group,) = dashboard_groups(fleet_dash, 1, range_s=RANGE_S)
    client = Client(fleet.store.url)
    by_cluster = [q for q in group.queries if q.kind == PANEL and q.item.endswith("by cluster")]
    assert len(by_cluster) >= 4
    for query in by_cluster:
        series = client.range(query.expr, TimeRange(client.now(), RANGE_S, 5))
        assert sorted(s["metric"]["cluster"] for s in series) == sorted(CLUSTERS), query.item
    reporting = next(q for q in group.queries if q.item == "GPUs reporting")
    assert float(client.instant(reporting.expr)[0]["value"][1]) == sum(CLUSTERS.values())


def test_external_label_names_the_cluster_of_series_without_a_target_label(fleet: Fleet) -> None:
    client = Client(fleet.store.url)
    build_info = client.instant("prometheus_build_info")
    assert sorted(s["metric"]["cluster"] for s in build_info) == sorted(CLUSTERS)
    # while each cluster's own Prometheus holds them without it: the label is added on the way out
    for server in fleet.prometheus.values():
        (local,) = server.query("prometheus_build_info")
        assert "cluster" not in local["metric"]
