"""The links after Prometheus, from canned answers: alerting (Prometheus' Alertmanagers, Alertmanager's loaded
config and notification metrics as 0.25 prints them), Grafana (data sources, the sync's plan) and what the data
shows (throttling, lost GPUs).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import yaml

from gpudash.catalog import DCGM
from gpudash.doctor.alerting import alertmanager_findings, config_differences, prometheus_alerting, routes
from gpudash.doctor.diagnose import unanswered
from gpudash.doctor.expect import Expectations, build
from gpudash.doctor.findings import Finding, Link, Verdict, listed
from gpudash.doctor.grafana import GrafanaView, grafana_findings
from gpudash.doctor.observed import (
    AlertmanagerView,
    PrometheusView,
    notification_counts,
    parse_exposition,
)
from gpudash.doctor.physics import CLOCK, GPUS_NOW, GPUS_PEAK, HOT, MAX_CLOCK, REASONS, physics_findings
from gpudash.sync.plan import Action

NOW = 1_800_000_000.0


def failed(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.verdict is Verdict.FAIL]


def view(**kw: Any) -> PrometheusView:
    return PrometheusView("http://prom:9090", **{"now": NOW, **kw})


# ------------------------------------------------------------------------------------------------ alerting


def test_prometheus_without_alertmanager_fails_with_the_config_line(expect: Expectations) -> None:
    (finding,) = prometheus_alerting(view(), "http://am:9093")
    assert finding.verdict is Verdict.FAIL
    assert "alerting: {alertmanagers: [{static_configs: [{targets: ['am:9093']}]}]}" in finding.fix
    other = prometheus_alerting(view(alertmanagers=("http://am-2:9093/api/v2/alerts",)), "http://am:9093")
    assert other[0].verdict is Verdict.HINT and other[0].what == "sends alerts to am-2:9093, not to am:9093"


def test_credentials_never_show_in_alerting_lines() -> None:
    (finding,) = prometheus_alerting(view(), "http://admin:s3cret@am:9093")
    assert "s3cret" not in finding.fix and "targets: ['am:9093']" in finding.fix


def test_notifications_are_counted_per_integration_or_receiver() -> None:
    samples = parse_exposition(
        'alertmanager_notifications_total{integration="webhook"} 10\n'
        'alertmanager_notifications_failed_total{integration="webhook",reason="other"} 2\n'
        'alertmanager_notifications_failed_total{integration="webhook",reason="clientError"} 1\n'
        'alertmanager_notifications_total{integration="email",receiver_name="gpudash-critical"} 4\n')
    assert notification_counts(samples) == {"webhook": (10.0, 3.0), "gpudash-critical/email": (4.0, 0.0)}


def as_loaded(config: dict[str, Any]) -> dict[str, Any]:
    """The generated config as Alertmanager's status API prints it: defaults filled, 24h written 1d."""
    text = yaml.safe_dump(config).replace("24h", "1d")
    loaded: dict[str, Any] = yaml.safe_load(text)
    loaded["route"]["continue"] = False
    return loaded


def test_alertmanager_config_as_generated(expect: Expectations) -> None:
    am = AlertmanagerView("http://am:9093", config=as_loaded(dict(expect.alertmanager)),
                          notifications={"webhook": (12.0, 0.0), "email": (0.0, 0.0)})
    found = alertmanager_findings(am, expect)
    assert [(f.verdict.value, f.what) for f in found] == [
        ("ok", f"config as generated: {len(routes(expect.alertmanager['route']))} routes, "
               f"{len(expect.alertmanager['receivers'])} receivers, "
               f"{len(expect.alertmanager['inhibit_rules'])} inhibitions"),
        ("ok", "no failed notification (12 sent since it started)"),
    ]


def test_alertmanager_config_differences_are_named(expect: Expectations) -> None:
    loaded = as_loaded(dict(expect.alertmanager))
    loaded["route"]["routes"][1]["group_wait"] = "1m"
    loaded["receivers"] = loaded["receivers"][:1]
    loaded["inhibit_rules"] = []
    notes = config_differences(loaded, expect.alertmanager)
    dropped = sorted(r["name"] for r in expect.alertmanager["receivers"][1:])
    assert notes == ["routes differ at route.routes[1]", f"receivers not loaded: {listed(dropped)}",
                     f"0 inhibitions loaded, {len(expect.alertmanager['inhibit_rules'])} generated, or other matchers"]


def test_failed_notifications_fail_the_link(expect: Expectations) -> None:
    am = AlertmanagerView("http://am:9093", config=as_loaded(dict(expect.alertmanager)),
                          notifications={"webhook": (10.0, 3.0)})
    (finding,) = failed(alertmanager_findings(am, expect))
    assert finding.what == "notifications failed since it started: webhook: 3 of 10"


# ------------------------------------------------------------------------------------------------ Grafana


def grafana(**kw: Any) -> GrafanaView:
    steps = tuple((uid, title, Action.UNCHANGED, "") for uid, title in (
        ("gpudash-fleet", "GPU fleet"), ("gpudash-health", "GPU health"), ("gpudash-job", "GPU job"),
        ("gpudash-node", "GPU node")))
    return GrafanaView("http://grafana:3000", version="11.6.0", dashboards=kw.pop("dashboards", steps), **kw)


def test_grafana_data_source_and_dashboards_as_generated(expect: Expectations) -> None:
    source = {"uid": "gpudash-prometheus", "type": "prometheus", "url": "http://prom:9090/"}
    found = grafana_findings(grafana(datasources={"gpudash-prometheus": source}), expect, "http://prom:9090")
    assert [(f.verdict.value, f.what) for f in found] == [
        ("ok", "prometheus at http://prom:9090/"), ("ok", "5 of 5 dashboards as generated")]


def test_a_missing_data_source_names_a_near_uid(expect: Expectations) -> None:
    view_ = grafana(datasources={"gpudash-prometheus": None},
                    prometheus_sources=(("gpudash-prom", "Prometheus", "http://prom:9090"),))
    finding = grafana_findings(view_, expect, "http://prom:9090")[0]
    assert finding.what == ("Grafana has no data source with uid 'gpudash-prometheus'; its Prometheus data sources: "
                            "gpudash-prom (Prometheus)")
    assert finding.fix.endswith("or set grafana.datasource_uid: gpudash-prom in gpudash.yaml")


def test_a_data_source_of_another_kind_or_elsewhere(expect: Expectations) -> None:
    loki = grafana(datasources={"gpudash-prometheus": {"type": "loki", "url": "http://loki"}})
    assert grafana_findings(loki, expect, None)[0].what == "is of type 'loki', not prometheus"
    elsewhere = grafana(datasources={"gpudash-prometheus": {"type": "prometheus", "url": "http://other:9090"}})
    hint = grafana_findings(elsewhere, expect, "http://prom:9090")[0]
    assert hint.verdict is Verdict.HINT and hint.what == "Grafana queries http://other:9090; doctor checked http://prom:9090"


def test_dashboards_that_differ_in_one_line(expect: Expectations) -> None:
    steps = (("gpudash-fleet", "GPU fleet", Action.DRIFTED, "edited"), ("gpudash-node", "GPU node", Action.CREATE, ""))
    finding = grafana_findings(grafana(dashboards=steps), expect, None)[-1]
    assert finding.what == ("2 of 5 dashboards differ: gpudash-fleet: changed in Grafana since gpudash pushed it, "
                            "gpudash-node: not in Grafana")
    assert "gpudash diff" in finding.fix


def test_grafana_out_of_reach(expect: Expectations) -> None:
    (finding,) = grafana_findings(GrafanaView("http://grafana:3000", error="connection refused"), expect, None)
    assert finding.link is Link.GRAFANA and finding.verdict is Verdict.FAIL


def test_grafana_holding_what_may_be_the_sites_from_before_is_the_one_finding(expect: Expectations) -> None:
    line = "gpudash.yaml: no site_id yet, and what gpudash wrote before may be this repository's: site 'demo-48e2e2'"
    (finding,) = grafana_findings(grafana(unsettled=line), expect, None)
    assert finding.verdict is Verdict.FAIL and finding.what == line and "site_id" in finding.fix


# ------------------------------------------------------------------------------------------------ physics


def sample(value: float, **labels: str) -> dict[str, Any]:
    return {"metric": {"cluster": "demo", "instance": "node-1:9400", **labels}, "value": [NOW, str(value)]}


def test_a_hot_slowed_gpu_with_a_reason_is_throttling(expect: Expectations) -> None:
    results = {HOT: (sample(88, gpu="5"), sample(83, gpu="6")),
               CLOCK: (sample(1200, gpu="5"), sample(1950, gpu="6")),
               MAX_CLOCK: (sample(1980, gpu="5"), sample(1980, gpu="6")),
               REASONS: (sample(1, gpu="5", clock_event="sw_thermal_slowdown"),),
               GPUS_NOW: (sample(8),), GPUS_PEAK: (sample(8),)}
    (finding,) = physics_findings(view(results=results), expect)
    assert (finding.verdict, finding.subject, finding.what) == (
        Verdict.HINT, "GPU 5 on node-1:9400 (demo)", "throttling: 88 C, SM clock 1200 of 1980 MHz, sw_thermal_slowdown")


def test_a_node_that_lost_a_gpu_fails(expect: Expectations) -> None:
    results = {GPUS_NOW: (sample(7),), GPUS_PEAK: (sample(8), replace_instance(sample(4), "node-2:9400"))}
    found = physics_findings(view(results=results), expect)
    assert [(f.verdict.value, f.subject, f.what) for f in found] == [
        ("FAIL", "node-1:9400 (demo)", "7 GPUs reporting now, 8 within the last 1h"),
        ("FAIL", "node-2:9400 (demo)", "0 GPUs reporting now, 4 within the last 1h")]
    assert "XID 79" in found[0].why and "stopped reporting" in found[1].why


def replace_instance(row: dict[str, Any], instance: str) -> dict[str, Any]:
    return {**row, "metric": {**row["metric"], "instance": instance}}


def test_quiet_data_is_ok(expect: Expectations) -> None:
    (finding,) = physics_findings(view(results={GPUS_NOW: (sample(8),), GPUS_PEAK: (sample(8),)}), expect)
    assert finding.verdict is Verdict.OK


def test_expectations_follow_the_site(expect: Expectations) -> None:
    site = replace(expect.settings.site, datasource_uid="team-prom")
    other = build(replace(expect.settings, site=site), DCGM, list(expect.dashboards))
    assert other.datasource_uids == ("team-prom",)
    assert other.selector_labels["gpudash_clock_event_active"] == ("clock_event", "cluster", "gpu", "instance")
    assert other.shortest_window_s == 120


def test_queries_prometheus_refused_are_named() -> None:
    refused = view(failed_queries={"gpus per node peak": "subqueries are not supported"})
    (finding,) = unanswered(refused)
    assert finding.what == "Prometheus did not answer 1 query: gpus per node peak (subqueries are not supported)"
    assert unanswered(view()) == []
