"""Each link of `gpudash doctor` judged from canned answers: exporter pages, Prometheus' targets, labels, rules
and Alertmanagers, Alertmanager's loaded config and metrics, Grafana's data sources and plan, and the data.
No server: the answers are the shapes Prometheus 2.42, Alertmanager 0.25 and Grafana give (as the
end-to-end tests in tests/e2e/test_doctor.py see them).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

import pytest
import yaml
from support.paths import ROOT

from gpudash.catalog import DCGM
from gpudash.check.targets import load_dashboards
from gpudash.config.loading import load_settings
from gpudash.doctor.alerting import alertmanager_findings, config_differences, prometheus_alerting
from gpudash.doctor.expect import Expectations, build
from gpudash.doctor.exporter import exporter_findings
from gpudash.doctor.fetch import (
    AlertmanagerView,
    ExporterPage,
    PrometheusView,
    metrics_url,
    notification_counts,
    parse_exposition,
)
from gpudash.doctor.findings import Finding, Link, Verdict
from gpudash.doctor.grafana import GrafanaView, grafana_findings
from gpudash.doctor.labels import GPU_SERIES, WITH_CLUSTER, WITH_JOB, label_findings, nearest
from gpudash.doctor.physics import CLOCK, GPUS_NOW, GPUS_PEAK, HOT, MAX_CLOCK, REASONS, physics_findings
from gpudash.doctor.rules import rule_findings
from gpudash.doctor.run import exporters_findings
from gpudash.doctor.targets import target_findings
from gpudash.sync.plan import Action

NOW = 1_800_000_000.0


@pytest.fixture(scope="module")
def expect() -> Expectations:
    settings = load_settings(ROOT / "thresholds.yaml")
    dashboards = [data for data, _ in load_dashboards([ROOT / "dashboards" / "json"])]
    return build(settings, DCGM, dashboards)


def verdicts(findings: list[Finding]) -> list[tuple[str, str]]:
    return [(f.verdict.value, f.subject) for f in findings]


def failed(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.verdict is Verdict.FAIL]


# ------------------------------------------------------------------------------------------------ exporter

GPU_LABELS = 'gpu="{n}",UUID="GPU-{n}",hostname="node-1"'


def exposition(expect: Expectations, gpus: int = 2, *, drop: tuple[str, ...] = (), extra: str = "",
               self_metrics: bool = True, up: tuple[int, ...] = (), sweep_age: float = 0.5, pending: int = 0) -> str:
    lines = []
    for key in expect.used_by:
        name = expect.profile.ref(key).name
        if name in drop or key in ("xid_total", "process_fb_used"):
            continue
        lines += [f"{name}{{{GPU_LABELS.format(n=n)}}} {0 if key == 'gpu_up' and n in up else 1}" for n in range(gpus)]
    if self_metrics:
        lines += ['gpudash_exporter_collection_errors_total{field="pcie_tx"} 0',
                  f"gpudash_exporter_last_sweep_timestamp_seconds {NOW - sweep_age}",
                  f"gpudash_exporter_fields_pending {pending}"]
    return "\n".join(lines) + "\n" + extra


def page(text: str, **kw: Any) -> ExporterPage:
    return ExporterPage("http://node-1:9400/metrics", parse_exposition(text), fetched_at=NOW, **kw)


def test_a_healthy_exporter_serves_gpus_nvml_and_every_field(expect: Expectations) -> None:
    found = exporter_findings(page(exposition(expect, 3)), expect)
    assert [(f.verdict, f.what) for f in found] == [
        (Verdict.OK, "gpudash exporter: 3 GPUs (0, 1, 2)"),
        (Verdict.OK, "NVML healthy: last sweep 0.5 s ago, no failed reads"),
        (Verdict.OK, f"every field the dashboards and rules read ({len(expect.used_by)})"),
    ]


def test_an_exporter_that_does_not_answer_is_the_broken_link(expect: Expectations) -> None:
    (finding,) = exporter_findings(ExporterPage("http://node-1:9400/metrics", error="connection refused"), expect)
    assert (finding.verdict, finding.subject, finding.what) == (
        Verdict.FAIL, "node-1:9400", "cannot read /metrics: connection refused")
    assert "curl http://node-1:9400/metrics" in finding.fix


def test_a_discovered_exporter_out_of_reach_from_here_but_scraped_is_only_a_hint(expect: Expectations) -> None:
    down = ExporterPage("http://node-1:9400/metrics", error="no route to host", discovered=True)
    assert exporter_findings(down, expect, scraped_up=True)[0].verdict is Verdict.HINT
    assert exporter_findings(down, expect, scraped_up=False)[0].verdict is Verdict.FAIL


def test_no_gpu_series_names_nvml_and_the_container_toolkit(expect: Expectations) -> None:
    text = "gpudash_exporter_collection_errors_total{field=\"gpu_util\"} 3\nDCGM_FI_DEV_SM_CLOCK 0\n"
    (finding,) = exporter_findings(page(text), expect)
    assert finding.verdict is Verdict.FAIL
    assert finding.what == "gpudash exporter answers with no GPU series (DCGM_FI_DEV_GPU_UTIL)"
    assert "NVIDIA Container Toolkit" in finding.why and "nvidia-smi" in finding.fix


def test_another_exporter_on_the_port_is_named(expect: Expectations) -> None:
    (finding,) = exporter_findings(page("node_load1 0.5\n"), expect)
    assert finding.what == "answers, but with no GPU metric at all"


def test_a_lost_gpu_and_a_stale_sweep_fail_nvml(expect: Expectations) -> None:
    lost = exporter_findings(page(exposition(expect, 4, up=(2,))), expect)
    assert failed(lost)[0].what == "NVML cannot read GPU 2 (gpudash_gpu_up 0)"
    stale = exporter_findings(page(exposition(expect, sweep_age=300)), expect)
    assert failed(stale)[0].what == "last clean NVML sweep 300 s ago"


def test_failed_reads_are_a_hint_naming_the_fields(expect: Expectations) -> None:
    text = exposition(expect).replace('errors_total{field="pcie_tx"} 0', 'errors_total{field="pcie_tx"} 4')
    nvml = exporter_findings(page(text), expect)[1]
    assert nvml.verdict is Verdict.HINT and nvml.what.endswith("failed reads since start: pcie_tx (4)")


def test_missing_fields_fail_when_default_and_wait_while_pending(expect: Expectations) -> None:
    text = exposition(expect, drop=("DCGM_FI_DEV_FB_FREE",))
    (missing,) = failed(exporter_findings(page(text), expect))
    assert missing.what == "missing 1 fields the dashboards read: DCGM_FI_DEV_FB_FREE"
    assert "GPU fleet /" in missing.why
    waiting = exporter_findings(page(exposition(expect, drop=("DCGM_FI_DEV_FB_FREE",), pending=3)), expect)[-1]
    assert waiting.verdict is Verdict.HINT and waiting.what.endswith("3 fields still pending")


def test_dcgm_exporter_gets_no_nvml_line_and_a_counters_fix(expect: Expectations) -> None:
    text = exposition(expect, self_metrics=False, drop=("DCGM_FI_DEV_MAX_SM_CLOCK",))
    found = exporter_findings(page(text), expect)
    assert [f.what.split(":")[0] for f in found] == [
        "dcgm-exporter", "missing optional fields DCGM_FI_DEV_MAX_SM_CLOCK"]
    assert found[1].verdict is Verdict.HINT and "counters file" in found[1].fix
    assert "GPU node / SM clock" in found[1].why


def test_many_exporters_without_news_are_one_line(expect: Expectations) -> None:
    pages = [page(exposition(expect)) for _ in range(5)]
    pages.append(ExporterPage("http://node-9:9400/metrics", error="connection refused"))
    found = exporters_findings(pages, expect, {})
    assert [(f.verdict.value, f.subject) for f in found] == [("ok", "5 of 6 exporters"), ("FAIL", "node-9:9400")]
    assert len(exporters_findings(pages[:2], expect, {})) == 6  # a few: every line


def test_metrics_url_accepts_an_address() -> None:
    assert metrics_url("node-1:9400") == "http://node-1:9400/metrics"
    assert metrics_url("https://node-1:9400") == "https://node-1:9400/metrics"
    assert metrics_url("http://node-1:9400/custom") == "http://node-1:9400/custom"


# ------------------------------------------------------------------------------------------------ targets


def target(address: str, health: str = "up", *, job: str = "gpu-exporter", interval: str = "15s",
           timeout: str = "10s", error: str = "", took: float = 0.01) -> dict[str, Any]:
    return {"scrapePool": job, "labels": {"job": job, "instance": address, "cluster": "demo"},
            "scrapeUrl": f"http://{address}/metrics", "health": health, "lastError": error,
            "scrapeInterval": interval, "scrapeTimeout": timeout, "lastScrapeDuration": took}


def view(**kw: Any) -> PrometheusView:
    return PrometheusView("http://prom:9090", **{"now": NOW, **kw})


def test_targets_up_and_timing_that_fits_the_rules(expect: Expectations) -> None:
    found = target_findings(view(targets=(target("a:9400"), target("b:9400"))), expect)
    assert [f.what for f in found] == [
        "2 of 2 targets up", "scraped every 15s, timeout 10s; the rules' shortest window (2m) holds 8 scrapes"]


def test_a_down_target_carries_prometheus_last_error(expect: Expectations) -> None:
    error = 'Get "http://b:9400/metrics": dial tcp 10.0.0.2:9400: connect: connection refused'
    found = target_findings(view(targets=(target("a:9400"), target("b:9400", "down", error=error))), expect)
    assert (found[0].verdict, found[0].subject, found[0].what) == (Verdict.FAIL, "b:9400", f"target DOWN: {error}")


def test_a_job_under_another_name_is_found(expect: Expectations) -> None:
    (finding,) = target_findings(view(targets=(target("a:9400", job="gpu-exporters"),)), expect)
    assert finding.what == "Prometheus has no scrape job 'gpu-exporter'; its jobs: gpu-exporters"
    assert "scrape.job: gpu-exporters" in finding.fix


def test_a_scrape_interval_too_long_for_the_windows_fails(expect: Expectations) -> None:
    found = target_findings(view(targets=(target("a:9400", interval="2m", timeout="1m"),)), expect)
    assert found[-1].verdict is Verdict.FAIL and found[-1].what.startswith("scraped every 2m, but the rules' shortest")
    other = target_findings(view(targets=(target("a:9400", interval="30s"),)), expect)
    assert other[-1].verdict is Verdict.HINT and other[-1].what == "scraped every 30s; gpudash.yaml says 15s"


def test_a_scrape_near_its_timeout_is_a_hint(expect: Expectations) -> None:
    found = target_findings(view(targets=(target("a:9400", took=9.5),)), expect)
    assert found[-1].what == "scrapes near their timeout: a:9400"


def test_prometheus_out_of_reach_is_one_line(expect: Expectations) -> None:
    (finding,) = target_findings(PrometheusView("http://prom:9090", error="cannot reach Prometheus"), expect)
    assert finding.verdict is Verdict.FAIL and finding.what == "cannot ask Prometheus: cannot reach Prometheus"


# ------------------------------------------------------------------------------------------------ labels


def counts(total: int, with_cluster: int, with_job: int = 0) -> dict[str, tuple[dict[str, Any], ...]]:
    def vector(n: int) -> tuple[dict[str, Any], ...]:
        return ({"metric": {}, "value": [NOW, str(n)]},) if n else ()

    return {GPU_SERIES: vector(total), WITH_CLUSTER: vector(with_cluster), WITH_JOB: vector(with_job)}


def test_labels_present_and_identity(expect: Expectations) -> None:
    labels = {"DCGM_FI_DEV_GPU_UTIL": ("UUID", "cluster", "gpu", "hostname", "instance", "job")}
    found = label_findings(view(labels=labels, results=counts(8, 8, 8)), expect)
    assert [(f.verdict.value, f.what) for f in found] == [
        ("ok", "8 GPU series carry cluster, gpu, instance"),
        ("ok", "GPU identity labels: UUID, hostname"),
        ("ok", "job label 'hpc_job' on 8 of 8 GPU series"),
    ]


def test_a_missing_label_names_the_nearest_one(expect: Expectations) -> None:
    labels = {"DCGM_FI_DEV_GPU_UTIL": ("Hostname", "UUID", "cluster", "gpu_id", "instance")}
    found = label_findings(view(labels=labels, results=counts(8, 8)), expect)
    (gpu,) = failed(found)
    assert gpu.what == "label 'gpu' is on no series; nearest: gpu_id"
    assert "source_labels: [gpu_id], target_label: gpu" in gpu.fix
    assert any(f.what == "GPU identity labels: UUID, Hostname (dcgm-exporter before 3.3)" for f in found)
    assert found[-1].verdict is Verdict.HINT and "hpc_job" in found[-1].what


def test_nearest_prefers_another_case_then_similar_names() -> None:
    assert nearest("hostname", ["Hostname", "host"]) == "Hostname"
    assert nearest("gpu", ["gpu_id", "instance"]) == "gpu_id"
    assert nearest("cluster", ["instance", "job"]) is None


def test_some_series_without_cluster_fail(expect: Expectations) -> None:
    labels = {"DCGM_FI_DEV_GPU_UTIL": ("UUID", "cluster", "gpu", "hostname", "instance")}
    found = label_findings(view(labels=labels, results=counts(8, 6)), expect)
    assert failed(found)[0].what == "2 of 8 GPU series have no 'cluster'"


def test_no_gpu_series_at_all(expect: Expectations) -> None:
    (finding,) = label_findings(view(results=counts(0, 0)), expect)
    assert finding.what == "no DCGM_FI_DEV_GPU_UTIL series in Prometheus"


# ------------------------------------------------------------------------------------------------ rules


def loaded_groups(expect: Expectations, change: Any = None, **group: Any) -> tuple[dict[str, Any], ...]:
    """/api/v1/rules' groups as Prometheus answers for the generated rules (`change` edits each rule)."""
    groups: dict[str, dict[str, Any]] = {}
    for rule in expect.rules:
        entry = {"name": rule.name, "query": rule.expr, "duration": rule.for_s, "labels": dict(rule.labels),
                 "health": "ok", "type": "alerting" if rule.kind == "alert" else "recording", "alerts": []}
        if change:
            change(entry)
        groups.setdefault(rule.group, {"name": rule.group, "interval": 15, "evaluationTime": 0.01,
                                       "rules": [], **group})["rules"].append(entry)
    return tuple(groups.values())


def test_rules_loaded_as_generated(expect: Expectations) -> None:
    found = rule_findings(view(rule_groups=loaded_groups(expect)), expect)
    assert [f.verdict for f in found] == [Verdict.OK, Verdict.OK]
    assert found[0].what == "13 rules loaded as generated, evaluated in 10 ms every 15 s"


def test_no_rules_loaded(expect: Expectations) -> None:
    (finding,) = rule_findings(view(), expect)
    assert finding.what == ("none of gpudash's rule groups is loaded (gpudash-gpu-alerts, gpudash-gpu-recording); "
                            "it has no rules at all")
    assert "rule_files: [gpu-alerts.rules.yml, gpu-recording.rules.yml]" in finding.fix


def test_rules_from_other_thresholds_name_the_expression_and_for(expect: Expectations) -> None:
    def older(entry: dict[str, Any]) -> None:
        if entry["name"] == "GPUXidError":
            entry["duration"] = 60
        if entry["name"] == "cluster:gpu_count:count":
            entry["query"] = entry["query"].replace("count", "sum", 1)

    found = failed(rule_findings(view(rule_groups=loaded_groups(expect, older)), expect))
    assert [f.subject for f in found] == ["gpudash-gpu-alerts", "gpudash-gpu-recording"]
    assert "GPUXidError (critical): for 1m loaded, 0s generated" in found[0].what
    assert found[1].what.startswith("differs from `gpudash rules` in 1 rule: cluster:gpu_count:count: expr `sum")


def test_the_formatted_form_decides_when_prometheus_gives_one(expect: Expectations) -> None:
    def respaced(entry: dict[str, Any]) -> None:
        entry["query"] = entry["query"].replace(" ", "  ")

    groups = loaded_groups(expect, respaced)
    same = {r["query"]: "X" for g in groups for r in g["rules"]} | {r.expr: "X" for r in expect.rules}
    assert not failed(rule_findings(view(rule_groups=groups, formatted=same), expect))
    differ = {**same, expect.rules[0].expr: "Y"}
    assert failed(rule_findings(view(rule_groups=groups, formatted=differ), expect))


def test_rule_labels_changed_and_rules_missing(expect: Expectations) -> None:
    def relabel(entry: dict[str, Any]) -> None:
        if entry["name"] == "GPUJobStalled":
            entry["labels"] = {"severity": "critical"}

    found = failed(rule_findings(view(rule_groups=loaded_groups(expect, relabel)), expect))
    assert "GPUJobStalled: labels {severity=critical} loaded, {severity=warning} generated" in found[0].what


def test_evaluation_errors_and_slow_groups(expect: Expectations) -> None:
    def broken(entry: dict[str, Any]) -> None:
        if entry["name"] == "GPUXidError":
            entry.update(health="err", lastError="many-to-many matching not allowed")

    found = failed(rule_findings(view(rule_groups=loaded_groups(expect, broken, evaluationTime=20.0)), expect))
    whats = [f.what for f in found]
    assert "evaluation fails: many-to-many matching not allowed" in whats
    assert "evaluation takes 20.0 s, longer than its 15 s interval: evaluations are skipped" in whats


def test_a_pending_alert_says_how_long_until_it_fires(expect: Expectations) -> None:
    def pending(entry: dict[str, Any]) -> None:
        if entry["name"] == "GPUExporterDown":
            entry["alerts"] = [{"state": "pending", "activeAt": "2027-01-15T08:00:00.123456789Z",
                                "labels": {"cluster": "demo", "instance": "b:9400"}}]

    start = datetime(2027, 1, 15, 8, tzinfo=timezone.utc).timestamp()
    found = rule_findings(view(rule_groups=loaded_groups(expect, pending), now=start + 90.12), expect)
    (hint,) = [f for f in found if f.verdict is Verdict.HINT]
    assert hint.what == "pending for 1m30s (cluster=demo, instance=b:9400): fires in 3m30s if it holds (for: 5m)"


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
        ("ok", "config as generated: 6 routes, 2 receivers, 2 inhibitions"),
        ("ok", "no failed notification (12 sent since it started)"),
    ]


def test_alertmanager_config_differences_are_named(expect: Expectations) -> None:
    loaded = as_loaded(dict(expect.alertmanager))
    loaded["route"]["routes"][1]["group_wait"] = "1m"
    loaded["receivers"] = loaded["receivers"][:1]
    loaded["inhibit_rules"] = []
    notes = config_differences(loaded, expect.alertmanager)
    assert notes == ["routes differ at route.routes[1]", "receivers not loaded: gpudash-warning-digest",
                     "0 inhibitions loaded, 2 generated, or other matchers"]


def test_failed_notifications_fail_the_link(expect: Expectations) -> None:
    am = AlertmanagerView("http://am:9093", config=as_loaded(dict(expect.alertmanager)),
                          notifications={"webhook": (10.0, 3.0)})
    (finding,) = failed(alertmanager_findings(am, expect))
    assert finding.what == "notifications failed since it started: webhook: 3 of 10"


# ------------------------------------------------------------------------------------------------ Grafana


def grafana(**kw: Any) -> GrafanaView:
    steps = (("gpudash-fleet", "GPU fleet", Action.UNCHANGED, ""), ("gpudash-node", "GPU node", Action.UNCHANGED, ""))
    return GrafanaView("http://grafana:3000", version="11.6.0", dashboards=kw.pop("dashboards", steps), **kw)


def test_grafana_data_source_and_dashboards_as_generated(expect: Expectations) -> None:
    source = {"uid": "gpudash-prometheus", "type": "prometheus", "url": "http://prom:9090/"}
    found = grafana_findings(grafana(datasources={"gpudash-prometheus": source}), expect, "http://prom:9090")
    assert [(f.verdict.value, f.what) for f in found] == [
        ("ok", "prometheus at http://prom:9090/"), ("ok", "2 of 2 dashboards as generated")]


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
    assert finding.what == ("2 of 2 dashboards differ: gpudash-fleet: changed in Grafana since gpudash pushed it, "
                            "gpudash-node: not in Grafana")
    assert "gpudash diff" in finding.fix


def test_grafana_out_of_reach(expect: Expectations) -> None:
    (finding,) = grafana_findings(GrafanaView("http://grafana:3000", error="connection refused"), expect, None)
    assert finding.link is Link.GRAFANA and finding.verdict is Verdict.FAIL


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
