"""Prometheus' links of `gpudash doctor` from canned API answers (the shapes Prometheus 2.42 gives): targets
and scrape timing, the labels on the GPU series, the rules loaded, their health and pending alerts.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from gpudash.doctor.expect import Expectations
from gpudash.doctor.findings import Finding, Verdict
from gpudash.doctor.labels import GPU_SERIES, WITH_CLUSTER, WITH_JOB, label_findings, nearest
from gpudash.doctor.loaded_rules import rule_findings
from gpudash.doctor.observed import (
    PrometheusView,
)
from gpudash.doctor.scrape_targets import target_findings

NOW = 1_800_000_000.0


def failed(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.verdict is Verdict.FAIL]


def view(**kw: Any) -> PrometheusView:
    return PrometheusView("http://prom:9090", **{"now": NOW, **kw})


# ------------------------------------------------------------------------------------------------ targets


def target(address: str, health: str = "up", *, job: str = "gpu-exporter", interval: str = "15s",
           timeout: str = "10s", error: str = "", took: float = 0.01) -> dict[str, Any]:
    return {"scrapePool": job, "labels": {"job": job, "instance": address, "cluster": "demo"},
            "scrapeUrl": f"http://{address}/metrics", "health": health, "lastError": error,
            "scrapeInterval": interval, "scrapeTimeout": timeout, "lastScrapeDuration": took}


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


def test_the_mig_instance_labels_are_no_failure_on_a_node_without_mig(expect: Expectations) -> None:
    # the MIG instances tables select on GPU_I_ID; a node without MIG has it on no series, and rightly so
    assert "GPU_I_ID" in expect.selector_labels["DCGM_FI_DEV_FB_FREE"]
    plain = ("UUID", "cluster", "gpu", "hostname", "instance", "job", "hpc_job")
    labels = {"DCGM_FI_DEV_GPU_UTIL": plain, "DCGM_FI_DEV_FB_FREE": plain, "DCGM_FI_DEV_FB_USED": plain}
    found = label_findings(view(labels=labels, results=counts(8, 8, 8)), expect)
    assert not failed(found) and not any("GPU_I" in f.what for f in found)


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
        interval = expect.group_intervals.get(rule.group, 15)  # as generated, else Prometheus's own
        groups.setdefault(rule.group, {"name": rule.group, "interval": interval, "evaluationTime": 0.01,
                                       "rules": [], **group})["rules"].append(entry)
    return tuple(groups.values())


def test_rules_loaded_as_generated(expect: Expectations) -> None:
    found = rule_findings(view(rule_groups=loaded_groups(expect)), expect)
    assert [f.verdict for f in found] == [Verdict.OK] * 7
    alerts = sum(1 for rule in expect.rules if rule.kind == "alert")
    hourly = sum(1 for rule in expect.rules if rule.group == "gpudash-gpu-ledger")
    assert sum(int(f.what.split()[0]) for f in found[:2]) == alerts
    assert [f.subject for f in found] == ["gpudash-gpu-alerts", "gpudash-gpu-health-alerts", "gpudash-gpu-recording",
                                          "gpudash-gpu-job-states", "gpudash-gpu-health-states",
                                          "gpudash-fabric-recording", "gpudash-gpu-ledger"]
    assert found[-1].what == f"{hourly} rules loaded as generated, evaluated in 10 ms every 3600 s"


def test_a_group_not_evaluated_yet_says_so(expect: Expectations) -> None:
    groups = loaded_groups(expect)
    groups[-1].update(lastEvaluation="0001-01-01T00:00:00Z", evaluationTime=0)  # as /api/v1/rules says before it
    found = rule_findings(view(rule_groups=groups), expect)
    assert not failed(found)
    hourly = sum(1 for rule in expect.rules if rule.group == "gpudash-gpu-ledger")
    assert found[-1].what == (f"{hourly} rules loaded as generated, evaluated every 3600 s: not yet since "
                             "Prometheus started")


def test_a_recording_group_loaded_at_another_interval_fails(expect: Expectations) -> None:
    # the alerts' group takes Prometheus's own
    assert expect.group_intervals == {"gpudash-gpu-recording": 15, "gpudash-gpu-job-states": 15,
                                      "gpudash-gpu-health-states": 15, "gpudash-fabric-recording": 15,
                                      "gpudash-gpu-ledger": 3600}
    found = rule_findings(view(rule_groups=loaded_groups(expect, interval=60)), expect)
    recording, jobs, health, fabric, ledger = failed(found)
    assert recording.subject == "gpudash-gpu-recording"
    assert recording.what.startswith("evaluated every 60 s, not every 15 s as generated: its GPU-seconds")
    assert jobs.what.endswith("the hang alerts count its recordings' points over their windows at that interval")
    assert health.what.endswith("its XID-event and reset recordings are built for that interval")
    assert fabric.what.endswith("the alerts and dashboards read its recordings at that interval")
    assert ledger.subject == "gpudash-gpu-ledger"
    assert ledger.what.startswith("evaluated every 60 s, not every 3600 s as generated: each of its recordings is "
                                  "the hour before")


def test_no_rules_loaded(expect: Expectations) -> None:
    (finding,) = rule_findings(view(), expect)
    assert finding.what == ("none of gpudash's rule groups is loaded (gpudash-gpu-alerts, gpudash-gpu-health-alerts, "
                            "gpudash-gpu-recording, gpudash-gpu-job-states and 3 more); it has no rules at all")
    assert "rule_files: [gpu-alerts.rules.yml, gpu-recording.rules.yml]" in finding.fix


def test_rules_from_other_thresholds_name_the_expression_and_for(expect: Expectations) -> None:
    def older(entry: dict[str, Any]) -> None:
        if entry["name"] == "GPUXidError" and entry["labels"]["action"] == "reboot_node":
            entry["duration"] = 60
        if entry["name"] == "cluster:gpu_count:count":
            entry["query"] = entry["query"].replace("count", "sum", 1)

    found = failed(rule_findings(view(rule_groups=loaded_groups(expect, older)), expect))
    assert [f.subject for f in found] == ["gpudash-gpu-health-alerts", "gpudash-gpu-recording"]
    assert "GPUXidError (reboot_node, critical): for 1m loaded, 0s generated" in found[0].what
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
    assert ("GPUJobStalled: labels {severity=critical} loaded, {action=restart_job, severity=warning} generated"
            in found[0].what)


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


def test_the_errors_prometheus_reports_are_masked_before_a_judge_cuts_them() -> None:
    import base64

    from gpudash.check.prometheus_api import PrometheusClient
    from gpudash.doctor.observed import ERROR_TEXT, _printable_error

    client = PrometheusClient("http://admin:lastError-s3cret@prometheus:9090")  # no request is made
    basic = base64.b64encode(b"admin:lastError-s3cret").decode()
    target = {"health": "down", "lastError": f"server returned 401: Authorization: Basic {basic} " * 40}
    shown = str(_printable_error(client, target)["lastError"])
    assert len(shown) <= ERROR_TEXT and shown.startswith("server returned 401: Authorization: Basic *** ")
    assert not any(basic[i:i + 6] in shown for i in range(len(basic) - 5)) and "s3cret" not in shown
    assert _printable_error(client, {"health": "up", "lastError": ""}) == {"health": "up", "lastError": ""}
