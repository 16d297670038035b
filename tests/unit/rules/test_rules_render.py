"""`gpudash rules`: what the rule files, alertmanager.yml and the scrape config contain, and the CLI around them."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from support.languages import am_parse_matchers, is_string_action, promql_code, render_go_template, template_actions
from support.paths import ROOT

from gpudash.catalog import SIGNALS
from gpudash.cli import cli
from gpudash.config.loading import Settings, load_settings
from gpudash.escape import go_template_text, promql_string
from gpudash.files import write_text_tree as write_files
from gpudash.health.xid import ACTIONS
from gpudash.promql.recordings import RECORDINGS
from gpudash.repository import ALERTMANAGER_FILE, ALERTS_FILE, RECORDING_FILE, SCRAPE_FILE
from gpudash.rules.alertmanager import SECRETS_DIR, STRAGGLER_CAUSES
from gpudash.rules.alerts import ALERT_NAMES
from gpudash.rules.generated_files import MARK, render_all, stale_files

JOB_ALERTS = ("GPUJobStraggler", "GPUAllocatedIdle")
LEVELS = ("critical", "warning", "info")


def rules_of(files: dict[str, str], name: str = ALERTS_FILE) -> list[dict[str, Any]]:
    groups = yaml.safe_load(files[name])["groups"]
    return [rule for group in groups for rule in group["rules"]]


def alerts_named(files: dict[str, str], alert: str) -> list[dict[str, Any]]:
    return [r for r in rules_of(files) if r["alert"] == alert]


def site_file(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_committed_output_is_current_and_rendering_is_deterministic(settings: Settings) -> None:
    first, second = render_all(settings), render_all(settings)
    assert first == second
    assert stale_files(ROOT / "generated", first) == []


def test_every_alert_is_there_with_severity_labels_and_annotations(settings: Settings) -> None:
    files = render_all(settings)
    rules = rules_of(files)
    assert {r["alert"] for r in rules} == set(ALERT_NAMES)
    for rule in rules:
        per_job = rule["alert"] in JOB_ALERTS
        severity, action = rule["labels"]["severity"], rule["labels"]["action"]
        assert severity in LEVELS and action in ACTIONS, rule["alert"]
        # info never pages: an idle job, or an XID whose table action is none
        assert (severity == "info") == (rule["alert"] == "GPUAllocatedIdle" or
                                        (rule["alert"] == "GPUXidError" and action == "none")), rule["alert"]
        notes = rule["annotations"]
        assert set(notes) == {"summary", "description", "runbook"}  # no runbook_base_url: the repository's section
        assert notes["runbook"] == "docs/alerts.md#" + rule["alert"].lower()
        text = notes["summary"] + notes["description"]
        assert ("$labels.instance" in text) != (rule["alert"] == "GPUAllocatedIdle"), rule["alert"]
        assert ("$labels.hpc_job" in text) == per_job, rule["alert"]
        shown = "$value" in notes["description"] or "$labels.xid" in notes["description"]
        flags = ("GPUExporterDown", "GPURowRemapPending", "GPURowRemapFailure")  # the value is only 0/1
        assert shown or rule["alert"] in flags, f"{rule['alert']}: description shows no value"
        # one GPU's labels (one job's for a job alert), whatever else the exporter attaches (UUID, modelName, pod ...)
        outer = {"GPUJobStraggler": "max by (cluster, instance, gpu, hpc_job) (",
                 "GPUAllocatedIdle": "count by (cluster, hpc_job) ("}.get(rule["alert"])
        assert rule["expr"].startswith(outer) if outer else "by (cluster, instance" in rule["expr"], rule["alert"]
    severities = {(r["alert"], r["labels"]["severity"]) for r in rules}
    for alert in ("GPUHighTemperature", "GPUMemoryPressure", "GPUXidError"):
        assert {(alert, "warning"), (alert, "critical")} <= severities


def test_runbook_links_point_at_a_section_of_docs_alerts(settings: Settings) -> None:
    # GitHub's anchor for a heading: lower case, spaces to dashes, punctuation dropped
    headings = {re.sub(r"[^a-z0-9 _-]", "", line[3:].strip().lower()).replace(" ", "-")
                for line in (ROOT / "docs" / "alerts.md").read_text().splitlines() if line.startswith("## ")}
    assert {name.lower() for name in ALERT_NAMES} <= headings
    for rule in rules_of(render_all(settings)):
        page, anchor = rule["annotations"]["runbook"].split("#")
        assert (ROOT / page).is_file()
        assert anchor == rule["alert"].lower() and anchor in headings


def test_no_metric_name_is_typed_in_the_rules_package() -> None:
    names = {s.dcgm_name for s in SIGNALS}
    for path in (ROOT / "gpudash" / "rules").glob("*.py"):
        text = path.read_text()
        typed = [n for n in names if n in text]
        assert not typed, f"{path.name} types {typed}: read names from gpudash.catalog"


def test_recording_rules_come_from_the_shared_registry_and_alerts_use_them(settings: Settings) -> None:
    files = render_all(settings)
    recorded = [r["record"] for r in rules_of(files, RECORDING_FILE)]
    assert recorded == [r.record for r in RECORDINGS]
    for name in recorded:
        assert re.fullmatch(r"[a-z_]+:[a-z_]+:[a-z_]+", name), name
    memory = alerts_named(files, "GPUMemoryPressure") + alerts_named(files, "GPUMemoryLeakPredicted")
    assert all("cluster_instance_gpu:gpu_fb_used:ratio" in r["expr"] for r in memory)
    assert "DCGM_FI_DEV_FB_TOTAL" not in files[ALERTS_FILE] + files[RECORDING_FILE]


def test_memory_ratio_uses_used_plus_free(settings: Settings) -> None:
    expr = {r["record"]: r["expr"] for r in rules_of(render_all(settings), RECORDING_FILE)}
    assert expr["cluster_instance_gpu:gpu_fb_used:ratio"] == (
        "DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE)")


@pytest.mark.parametrize(("path", "value", "alert", "expected"), [
    (("memory", "warning_ratio"), 0.8, "GPUMemoryPressure", "> 0.8\n"),
    (("temperature", "hbm_critical_celsius"), 97, "GPUHighTemperature", "[2m])) > 97"),
    (("alerts", "temperature", "window"), "90s", "GPUHighTemperature", "DCGM_FI_DEV_GPU_TEMP[90s]"),
    (("alerts", "memory_leak", "horizon"), "6h", "GPUMemoryLeakPredicted", "[1h], 21600)"),
    (("alerts", "job_stalled", "util_below_percent"), 2, "GPUJobStalled", ")) < 2\n"),
    (("alerts", "data_loader", "cpu_load_ratio"), 0.75, "GPUDataLoaderBottleneck", "> 0.75,"),
    (("alerts", "xid", "overrides"), {777: "rma"}, "GPUXidError", 'xid=~"777"'),
    (("temperature", "gpu_margin_celsius"), 7, "GPUHighTemperature", "(DCGM_FI_DEV_GPU_MAX_OP_TEMP) - 7)"),
    (("temperature", "hbm_margin_celsius"), 3, "GPUHighTemperature", "(DCGM_FI_DEV_MEM_MAX_OP_TEMP) - 3)"),
    (("alerts", "nvlink", "crc_per_second_critical"), 50, "GPUNVLinkErrors", "[5m]) >= 50)"),
    (("alerts", "memory_errors", "window"), "30m", "GPUEccUncorrectable", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[30m]"),
    (("clocks", "throttle_drop_ratio"), 0.2, "GPUThermalThrottling", "< 0.8 *"),
    (("alerts", "exporter_down", "lookback"), "3h", "GPUExporterDown", "DCGM_FI_DEV_FB_USED[3h]"),
    (("alerts", "job_straggler", "min_gpus"), 8, "GPUJobStraggler", "cluster_job:gpu_count:count >= 8\n"),
    (("alerts", "job_straggler", "busy_above_percent"), 70, "GPUJobStraggler", "median[5m]) > 70\n"),
    (("alerts", "job_straggler", "clock_below_ratio"), 0.2, "GPUJobStraggler",
     "0.8 * avg_over_time(cluster_job:gpu_sm_clock_mhz:median[5m])"),
    (("alerts", "job_straggler", "activity_points"), 30, "GPUJobStraggler", ":points) > 30\n"),
    (("alerts", "job_straggler", "window"), "7m", "GPUJobStraggler", "cluster_job:gpu_count:count offset 7m"),
    (("alerts", "allocated_idle", "util_below_percent"), 2, "GPUAllocatedIdle", "[1h])) < 2\n"),
    (("alerts", "allocated_idle", "window"), "3h", "GPUAllocatedIdle", 'hpc_job!=""} offset 3h)'),
])
def test_a_threshold_change_changes_the_rules(thresholds_copy: Callable[..., Path], monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path, path: tuple[str, ...], value: object, alert: str,
                                              expected: str) -> None:
    monkeypatch.chdir(tmp_path)
    before = render_all(load_settings(ROOT / "thresholds.yaml"))
    after = render_all(load_settings(thresholds_copy((path, value))))
    exprs = "\n".join(r["expr"] + "\n" for r in alerts_named(after, alert))
    assert expected in exprs
    assert expected not in "\n".join(r["expr"] + "\n" for r in alerts_named(before, alert))


@pytest.mark.parametrize(("path", "value", "alert", "expected", "scale"), [
    (("memory", "warning_ratio"), 0.8, "GPUMemoryPressure", "> 0.8", (1, 100)),
    (("temperature", "gpu_warning_celsius"), 75, "GPUHighTemperature", "> 75", (1,)),
])
def test_a_threshold_change_moves_rules_and_dashboard_steps_together(
        thresholds_copy: Callable[..., Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        path: tuple[str, ...], value: float, alert: str, expected: str, scale: tuple[int, ...]) -> None:
    build_all = pytest.importorskip("gpudash.panels.build").build_all
    monkeypatch.chdir(tmp_path)

    def steps(settings: Settings) -> set[float]:
        text = json.dumps(build_all(settings, ROOT / "dashboards"))
        return {float(v) for v in re.findall(r'"color": "[a-z]+", "value": ([0-9.]+)', text)}

    changed = load_settings(thresholds_copy((path, value)))
    assert any(expected in r["expr"] for r in alerts_named(render_all(changed), alert))
    before, after = steps(load_settings(ROOT / "thresholds.yaml")), steps(changed)
    assert any(value * s in after and value * s not in before for s in scale), (sorted(before), sorted(after))


def test_alertmanager_routes_inhibitions_and_receivers(settings: Settings) -> None:
    am = yaml.safe_load(render_all(settings)[ALERTMANAGER_FILE])
    route = am["route"]
    assert route["group_by"] == ["cluster", "instance", "alertname"]
    cluster_route = route["routes"][0]
    assert cluster_route["matchers"] == ['cluster="demo"']
    critical, warning = cluster_route["routes"]
    assert critical["matchers"] == ['severity="critical"'] and critical["group_wait"] == "10s"
    assert warning["group_by"] == ["cluster"]
    assert warning["matchers"] == ['severity=~"warning|info"']  # info (an idle job) joins the digest
    down, off_bus, severity, straggler = am["inhibit_rules"]
    assert down["source_matchers"] == ['alertname="GPUExporterDown"', 'gpu=""']
    assert down["equal"] == ["cluster", "instance"]
    assert off_bus["source_matchers"] == ['alertname="GPUFellOffBus"', 'gpu=~".+"']
    assert off_bus["target_matchers"] == ['alertname!="GPUFellOffBus"']
    assert off_bus["equal"] == ["cluster", "instance", "gpu"]
    assert severity["equal"] == ["alertname", "cluster", "instance", "gpu"]
    assert [am_parse_matchers(m) for m in straggler["target_matchers"]] == [[("alertname", "=", "GPUJobStraggler")]]
    assert straggler["equal"] == ["cluster", "instance", "gpu"]
    (cause,) = straggler["source_matchers"]
    assert cause == 'alertname=~"' + "|".join(STRAGGLER_CAUSES) + '"'
    assert set(STRAGGLER_CAUSES) < set(ALERT_NAMES)
    assert [r["name"] for r in am["receivers"]] == ["gpudash-critical", "gpudash-warning-digest"]
    severities = {r["labels"]["severity"] for r in rules_of(render_all(settings))}
    routed = {m for r in cluster_route["routes"] for m in r["matchers"]}
    assert {"critical", "warning", "info"} == severities  # and each has a route: none falls to the root's page
    assert routed == {'severity="critical"', 'severity=~"warning|info"'}


def test_alertmanager_timing_comes_from_thresholds(thresholds_copy: Callable[..., Path],
                                                   monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    path = thresholds_copy((("alertmanager", "critical"), {"group_wait": "5s", "group_interval": "2m",
                                                           "repeat_interval": "3h"}),
                           (("alertmanager", "digest", "repeat_interval"), "12h"))
    am = yaml.safe_load(render_all(load_settings(path))[ALERTMANAGER_FILE])
    for routes in (am["route"]["routes"][0]["routes"], am["route"]["routes"][1:]):
        critical, digest = routes
        assert (critical["group_wait"], critical["group_interval"], critical["repeat_interval"]) == ("5s", "2m", "3h")
        assert (digest["group_wait"], digest["group_interval"], digest["repeat_interval"]) == ("10m", "1h", "12h")


def test_alertmanager_reads_secrets_from_files_and_never_writes_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "https://hooks.slack.com/services/T000/B000/not-for-the-repository"
    monkeypatch.setenv("TEAM_SLACK_URL", secret)
    monkeypatch.setenv("SMTP_PASSWORD", "hunter2-secret")
    site = site_file(tmp_path, {"receivers": [
        {"name": "pager", "type": "webhook", "url": "http://127.0.0.1:9099/page"},
        {"name": "team", "type": "slack", "api_url_env": "TEAM_SLACK_URL", "channel": "#gpu"},
        {"name": "ops", "type": "slack", "api_url_file": "/run/secrets/slack"},
        {"name": "mail", "type": "email", "to": "gpu@example.org", "from": "am@example.org",
         "smarthost": "smtp.example.org:587", "auth_username": "am", "auth_password_env": "SMTP_PASSWORD"},
    ]})
    text = render_all(load_settings(ROOT / "thresholds.yaml", site))[ALERTMANAGER_FILE]
    assert secret not in text and "hunter2-secret" not in text
    receiver = yaml.safe_load(text)["receivers"][0]
    assert [c["api_url_file"] for c in receiver["slack_configs"]] == [f"{SECRETS_DIR}/TEAM_SLACK_URL",
                                                                     "/run/secrets/slack"]
    assert receiver["email_configs"][0]["auth_password_file"] == f"{SECRETS_DIR}/SMTP_PASSWORD"
    assert receiver["webhook_configs"][0]["url"] == "http://127.0.0.1:9099/page"


def test_scrape_config_groups_targets_by_cluster_and_rack(tmp_path: Path) -> None:
    site = site_file(tmp_path, {
        "scrape": {"job": "gpus", "interval": "30s", "timeout": "20s"},
        "clusters": [
            {"name": "east", "targets": [{"address": "a:9400", "rack": "r1"}, {"address": "b:9400", "rack": "r1"},
                                         {"address": "c:9400", "rack": "r2"}]},
            {"name": "west", "targets": [{"address": "d:9400"}]},
        ],
    })
    job = yaml.safe_load(render_all(load_settings(ROOT / "thresholds.yaml", site))[SCRAPE_FILE])["scrape_configs"][0]
    assert (job["job_name"], job["scrape_interval"], job["scrape_timeout"]) == ("gpus", "30s", "20s")
    assert job["static_configs"] == [
        {"targets": ["a:9400", "b:9400"], "labels": {"cluster": "east", "rack": "r1"}},
        {"targets": ["c:9400"], "labels": {"cluster": "east", "rack": "r2"}},
        {"targets": ["d:9400"], "labels": {"cluster": "west", "rack": "rack-1"}},
    ]
    alerts = render_all(load_settings(ROOT / "thresholds.yaml", site))[ALERTS_FILE]
    assert 'up{job="gpus"}' in alerts


def test_nvidia_smi_profile_leaves_out_what_it_cannot_evaluate(tmp_path: Path) -> None:
    files = render_all(load_settings(ROOT / "thresholds.yaml", site_file(tmp_path, {"profile": "nvidia_smi"})))
    names = {r["alert"] for r in rules_of(files)}
    assert "GPUXidError" not in names  # nvidia_gpu_exporter publishes no XID series
    assert {"GPUHighTemperature", "GPUMemoryPressure", "GPUJobStalled"} <= names
    text = files[ALERTS_FILE] + files[RECORDING_FILE]
    assert "DCGM_FI_" not in text and "by (cluster, instance, uuid)" in text
    assert "(nvidia_smi_utilization_gpu_ratio[" in text  # ranges on the raw series, converted after


def test_job_alerts_read_the_sites_job_label(tmp_path: Path) -> None:
    label = "training_kubeflow_org_job_name"
    files = render_all(load_settings(ROOT / "thresholds.yaml", site_file(tmp_path, {"jobs": {"label": label}})))
    for alert in JOB_ALERTS:
        (rule,) = alerts_named(files, alert)
        assert "hpc_job" not in rule["expr"] + json.dumps(rule["annotations"]), alert
        assert f'{label}!=""' in rule["expr"] and f"$labels.{label}" in rule["annotations"]["summary"], alert
    straggler = alerts_named(files, "GPUJobStraggler")[0]["expr"]
    assert f"on (cluster, {label}) group_left ()" in straggler
    assert f"max by (cluster, instance, gpu, {label})" in straggler
    assert "cluster_instance_gpu_job:gpu_activity_departure:points" in straggler
    assert f"count by (cluster, {label})" in alerts_named(files, "GPUAllocatedIdle")[0]["expr"]
    recorded = {r["record"]: r["expr"] for r in rules_of(files, RECORDING_FILE)}
    expected = f'count by (cluster, {label}) (DCGM_FI_DEV_GPU_UTIL{{{label}!=""}})'
    assert recorded["cluster_job:gpu_count:count"] == expected


def test_straggler_judges_sm_activity_first_then_utilization_and_the_clock(settings: Settings) -> None:
    files = render_all(settings)
    recorded = {r["record"]: r["expr"] for r in rules_of(files, RECORDING_FILE)}
    departure = recorded["cluster_instance_gpu_job:gpu_activity_departure:points"]
    # SM activity on the left of `or`: a GPU that has it is never judged on utilization too
    assert departure.index("DCGM_FI_PROF_SM_ACTIVE") < departure.index("\nor\n") < departure.index("GPU_UTIL")
    records = [r["record"] for r in rules_of(files, RECORDING_FILE)]
    for median in ("cluster_job:gpu_sm_active:median", "cluster_job:gpu_utilization:median"):
        assert f"avg_over_time({median}[5m])" in departure
        assert records.index(median) < records.index("cluster_instance_gpu_job:gpu_activity_departure:points")
    (rule,) = alerts_named(files, "GPUJobStraggler")
    expr = rule["expr"]
    assert "abs(cluster_instance_gpu_job:gpu_activity_departure:points) > 20" in expr
    assert "DCGM_FI_DEV_SM_CLOCK" in expr and "0.9 * avg_over_time(cluster_job:gpu_sm_clock_mhz:median[5m])" in expr
    # the job must keep its size over the window and have existed a window ago
    assert "min_over_time(cluster_job:gpu_count:count[5m]) == max_over_time(cluster_job:gpu_count:count[5m])" in expr
    assert "cluster_job:gpu_count:count offset 5m" in expr
    assert rule["for"] == "10m" and rule["labels"] == {"severity": "warning", "action": "none"}


def test_nvidia_smi_profile_judges_stragglers_on_utilization_and_clock(tmp_path: Path) -> None:
    files = render_all(load_settings(ROOT / "thresholds.yaml", site_file(tmp_path, {"profile": "nvidia_smi"})))
    (rule,) = alerts_named(files, "GPUJobStraggler")
    departure = {r["record"]: r["expr"] for r in rules_of(files, RECORDING_FILE)}[
        "cluster_instance_gpu_job:gpu_activity_departure:points"]
    assert "sm_active" not in departure + rule["expr"] and "(nvidia_smi_utilization_gpu_ratio{hpc_job" in departure
    assert "nvidia_smi_clocks_current_sm_clock_hz{hpc_job" in rule["expr"]
    assert "its activity (utilization)" in rule["annotations"]["description"]
    assert alerts_named(files, "GPUAllocatedIdle")


def test_email_receiver_without_smarthost_is_one_clear_error(tmp_path: Path) -> None:
    site = site_file(tmp_path, {"receivers": [{"name": "mail", "type": "email", "to": "a@example.org"}]})
    runner = CliRunner()
    result = runner.invoke(cli, ["rules", "--out", str(tmp_path / "out"), "--thresholds",
                                 str(ROOT / "thresholds.yaml"), "--site", str(site)])
    assert result.exit_code != 0
    assert f"{site}: receivers[0]: an email receiver needs from, smarthost" in result.stderr
    assert not (tmp_path / "out").exists()


def test_cli_writes_then_checks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "thresholds.yaml").write_text((ROOT / "thresholds.yaml").read_text())
    runner = CliRunner()
    first = runner.invoke(cli, ["rules", "--out", "gen"])
    assert first.exit_code == 0, first.output
    assert "4 of 4 files changed" in first.output
    assert runner.invoke(cli, ["rules", "--out", "gen"]).output.strip().endswith("0 of 4 files changed in gen")
    assert runner.invoke(cli, ["rules", "--out", "gen", "--check"]).exit_code == 0
    (tmp_path / "gen" / SCRAPE_FILE).write_text("edited by hand\n")
    stale = runner.invoke(cli, ["rules", "--out", "gen", "--check"])
    assert stale.exit_code != 0
    assert "gen/prometheus/scrape-gpu.yml" in stale.stderr
    assert (tmp_path / "gen" / SCRAPE_FILE).read_text() == "edited by hand\n"  # --check writes nothing


def test_cli_bad_thresholds_writes_nothing(tmp_path: Path, thresholds_copy: Callable[..., Path]) -> None:
    bad = thresholds_copy((("alerts", "memory_leak", "horizon"), "soon"))
    result = CliRunner().invoke(cli, ["rules", "--out", str(tmp_path / "gen"), "--thresholds", str(bad)])
    assert result.exit_code != 0
    assert "alerts.memory_leak.horizon: expected a positive duration" in result.stderr
    assert not (tmp_path / "gen").exists()


def test_written_files_are_readable_by_everyone_and_rewritten_only_on_change(
        settings: Settings, tmp_path: Path) -> None:
    files = render_all(settings)
    written = write_files(tmp_path, files, MARK)
    assert sorted(written) == sorted(tmp_path / rel for rel in files)
    assert {oct(path.stat().st_mode & 0o777) for path in written} == {"0o644"}
    assert write_files(tmp_path, files, MARK) == []
    assert not [p for p in tmp_path.rglob(".*") if p.is_file()]  # no temp file left behind


def test_a_same_named_file_of_another_tool_is_never_replaced(settings: Settings, tmp_path: Path) -> None:
    theirs = tmp_path / "alertmanager" / "alertmanager.yml"  # a hand-written Alertmanager config in --out
    theirs.parent.mkdir()
    theirs.write_text("route: {receiver: ops}\n")
    beside = tmp_path / "prometheus" / "team-rules.yml"
    beside.parent.mkdir()
    beside.write_text("groups: []\n")
    result = CliRunner().invoke(cli, ["rules", "--out", str(tmp_path), "--thresholds", str(settings.thresholds_path)])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"gpudash: {theirs}: would be overwritten but was not written by gpudash")
    assert theirs.read_text() == "route: {receiver: ops}\n" and beside.read_text() == "groups: []\n"
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["alertmanager.yml", "team-rules.yml"]
    theirs.unlink()
    assert CliRunner().invoke(cli, ["rules", "--out", str(tmp_path), "--thresholds",
                                    str(settings.thresholds_path)]).exit_code == 0
    assert beside.read_text() == "groups: []\n"  # written beside it, never touched


# Site strings that would be syntax if written unescaped: a quote ends a PromQL or matcher string, `{{` starts
# a Go template action, `#` starts a PromQL comment, `,` splits an Alertmanager matcher list.
HOSTILE_SITE: dict[str, Any] = {
    "clusters": [{"name": 'x", severity="critical', "targets": [{"address": "a:9400", "rack": 'r"} #'}]},
                 {"name": 'a"b\\', "targets": [{"address": "b:9400", "rack": "{{ .Foo }}"}]},
                 {"name": "c,d{{", "targets": [{"address": "c:9400"}]}],
    "scrape": {"job": 'gpu-exporter"} or vector(1) #', "node_job": 'node"} or on() vector(1) # {{ .X }}'},
    "runbook_base_url": "https://runbooks.example/{{.Foo}}/gpu",
    "receivers": [
        {"name": "team", "type": "slack", "api_url_file": "/run/s", "channel": '#gpu {{ template "x" . }}'},
        {"name": "mail", "type": "email", "to": "{{ .Bad", "from": 'am@example.org"}}', "smarthost": "smtp:25"},
    ],
}


def hostile_files(tmp_path: Path) -> dict[str, str]:
    return render_all(load_settings(ROOT / "thresholds.yaml", site_file(tmp_path, HOSTILE_SITE)))


def test_site_strings_stay_data_in_every_expression(tmp_path: Path, settings: Settings) -> None:
    hostile, plain = hostile_files(tmp_path), render_all(settings)
    for name in (ALERTS_FILE, RECORDING_FILE):
        shapes = [(r.get("alert") or r["record"], promql_code(r["expr"])) for r in rules_of(hostile, name)]
        assert shapes == [(r.get("alert") or r["record"], promql_code(r["expr"])) for r in rules_of(plain, name)]
    down = alerts_named(hostile, "GPUExporterDown")[0]["expr"]
    assert f'up{{job={promql_string(HOSTILE_SITE["scrape"]["job"])}}}' in down


def test_a_cluster_name_cannot_add_a_matcher_to_its_route(tmp_path: Path) -> None:
    am = yaml.safe_load(hostile_files(tmp_path)[ALERTMANAGER_FILE])
    for cluster, route in zip(HOSTILE_SITE["clusters"], am["route"]["routes"], strict=False):
        assert [am_parse_matchers(m) for m in route["matchers"]] == [[("cluster", "=", cluster["name"])]]
        assert [am_parse_matchers(m) for r in route["routes"] for m in r["matchers"]] == \
            [[("severity", "=", "critical")], [("severity", "=~", "warning|info")]]


def test_site_strings_in_templates_are_printed_never_run(tmp_path: Path, settings: Settings) -> None:
    hostile, plain = hostile_files(tmp_path), render_all(settings)

    def actions(rules: list[dict[str, Any]]) -> list[list[str]]:
        return [[a for text in r["annotations"].values() for a in template_actions(text) if not is_string_action(a)]
                for r in rules]

    assert actions(rules_of(hostile)) == actions(rules_of(plain))
    down = alerts_named(hostile, "GPUExporterDown")[0]["annotations"]
    assert go_template_text(HOSTILE_SITE["scrape"]["job"]) in down["description"]
    assert render_go_template(down["runbook_url"], {}) == f"{HOSTILE_SITE['runbook_base_url']}#gpuexporterdown"
    receiver = yaml.safe_load(hostile[ALERTMANAGER_FILE])["receivers"][0]
    channel, email = receiver["slack_configs"][0]["channel"], receiver["email_configs"][0]
    for text, given in ((channel, '#gpu {{ template "x" . }}'), (email["to"], "{{ .Bad"),
                        (email["from"], 'am@example.org"}}')):
        assert all(is_string_action(a) for a in template_actions(text)) and render_go_template(text, {}) == given


def test_hostile_site_strings_reach_the_scrape_config_unchanged(tmp_path: Path) -> None:
    job = yaml.safe_load(hostile_files(tmp_path)[SCRAPE_FILE])["scrape_configs"][0]
    assert job["job_name"] == HOSTILE_SITE["scrape"]["job"]
    assert [g["labels"] for g in job["static_configs"]] == [
        {"cluster": c["name"], "rack": c["targets"][0].get("rack", "rack-1")} for c in HOSTILE_SITE["clusters"]]


def test_cluster_recordings_count_a_gpu_once_whatever_jobs_share_it() -> None:
    from support.paths import ROOT

    from gpudash.config.loading import load_settings
    from gpudash.promql.for_settings import recording_rules
    from gpudash.promql.recordings import JOB_RECORDINGS

    job_level = {r.record for r in JOB_RECORDINGS} | {"cluster_instance_gpu:gpu_fb_used:ratio"}
    for rec, expr in recording_rules(load_settings(ROOT / "thresholds.yaml")):
        if rec.record not in job_level:  # per cluster or per node: every GPU signal merged per GPU first
            merged = re.findall(r"max by \(cluster, instance, gpu[\w, ]*\) \((?:\w+\()?(?:DCGM_|gpudash_)", expr)
            assert merged, (rec.record, expr)


def test_operator_output_never_replaces_another_teams_resource(settings: Settings, tmp_path: Path) -> None:
    theirs = tmp_path / "kubernetes" / "prometheus-rules.yaml"  # a hand-written PrometheusRule in --out
    theirs.parent.mkdir()
    theirs.write_text("kind: PrometheusRule\n")
    beside = tmp_path / "kubernetes" / "team-monitor.yaml"
    beside.write_text("kind: ServiceMonitor\n")
    args = ["rules", "--out", str(tmp_path), "--format", "all", "--thresholds", str(settings.thresholds_path),
            "--dashboards-json", str(ROOT / "dashboards" / "json")]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"gpudash: {theirs}: would be overwritten but was not written by gpudash")
    assert theirs.read_text() == "kind: PrometheusRule\n" and beside.read_text() == "kind: ServiceMonitor\n"
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["prometheus-rules.yaml", "team-monitor.yaml"]
    theirs.unlink()
    assert CliRunner().invoke(cli, args).exit_code == 0
    assert beside.read_text() == "kind: ServiceMonitor\n"
