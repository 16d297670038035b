"""alertmanager.yml and the scrape config: routes, inhibitions, timing, receivers and their secrets, targets by
cluster and rack; and site strings, which reach them and the rules, staying data wherever they land."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from support.languages import am_parse_matchers, is_string_action, promql_code, render_go_template, template_actions
from support.paths import ROOT
from support.rule_files import alerts_named, rules_of, site_file

from gpudash.cli import cli
from gpudash.config.loading import Settings, load_settings
from gpudash.escape import go_template_text, promql_string
from gpudash.repository import ALERTMANAGER_FILE, ALERTS_FILE, RECORDING_FILE, SCRAPE_FILE
from gpudash.rules.alert_table import alert_names
from gpudash.rules.alertmanager import SECRETS_DIR, STRAGGLER_CAUSES
from gpudash.rules.generated_files import render_all


def test_alertmanager_routes_inhibitions_and_receivers(settings: Settings) -> None:
    am = yaml.safe_load(render_all(settings)[ALERTMANAGER_FILE])
    route = am["route"]
    assert route["group_by"] == ["cluster", "instance", "alertname"]
    by_matchers = {tuple(r["matchers"]): r for r in route["routes"]}
    critical = by_matchers[('severity="critical"',)]
    warning = by_matchers[('severity=~"warning|info"',)]
    assert critical["group_wait"] == "10s" and critical["group_by"] == ["cluster", "rack", "alertname", "action"]
    assert warning["group_by"] == ["cluster"]  # info (an idle job) joins the digest
    assert route["routes"][-2:] == [critical, warning]  # last: every route above is tried first
    drained, drained_ports, down, off_bus, severity, straggler = am["inhibit_rules"]
    assert drained["source_matchers"] == ['alertname="GPUNodeDrained"', 'instance=~".+"']
    assert drained["equal"] == ["cluster", "instance"]
    assert drained_ports["source_matchers"] == ['alertname="GPUNodeDrained"', 'host=~".+"']
    assert drained_ports["equal"] == ["cluster", "host"]
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
    assert set(STRAGGLER_CAUSES) < set(alert_names())
    assert [r["name"] for r in am["receivers"]] == ["gpudash-critical", "gpudash-warning-digest", "gpudash-job-owner",
                                                    "gpudash-null"]
    severities = {r["labels"]["severity"] for r in rules_of(render_all(settings))}
    assert {"critical", "warning", "info"} == severities  # and each has a route: none falls to the root's page


def test_alertmanager_timing_comes_from_thresholds(thresholds_copy: Callable[..., Path],
                                                   monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    path = thresholds_copy((("alertmanager", "critical"), {"group_wait": "5s", "group_interval": "2m",
                                                           "repeat_interval": "3h"}),
                           (("alertmanager", "digest", "repeat_interval"), "12h"),
                           (("alertmanager", "job_owner", "group_wait"), "45s"),
                           (("alertmanager", "heartbeat", "repeat_interval"), "2m"))
    am = yaml.safe_load(render_all(load_settings(path))[ALERTMANAGER_FILE])
    timings = {r["receiver"]: (r.get("group_wait"), r.get("group_interval"), r.get("repeat_interval"))
               for r in am["route"]["routes"]}
    assert timings["gpudash-critical"] == ("5s", "2m", "3h")
    assert timings["gpudash-warning-digest"] == ("10m", "1h", "12h")
    assert timings["gpudash-job-owner"] == ("45s", "5m", "4h")
    watchdog = next(r for r in am["route"]["routes"] if r["matchers"] == ['alertname="Watchdog"'])
    assert (watchdog["group_wait"], watchdog["group_interval"], watchdog["repeat_interval"]) == ("10s", "1m", "2m")


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


def test_email_receiver_without_smarthost_is_one_clear_error(tmp_path: Path) -> None:
    site = site_file(tmp_path, {"receivers": [{"name": "mail", "type": "email", "to": "a@example.org"}]})
    runner = CliRunner()
    result = runner.invoke(cli, ["rules", "--out", str(tmp_path / "out"), "--thresholds",
                                 str(ROOT / "thresholds.yaml"), "--site", str(site)])
    assert result.exit_code != 0
    assert f"{site}: receivers[0]: an email receiver needs from, smarthost" in result.stderr
    assert not (tmp_path / "out").exists()


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


def test_a_cluster_name_cannot_add_a_matcher_to_a_rack(tmp_path: Path) -> None:
    relabel = yaml.safe_load(hostile_files(tmp_path)[SCRAPE_FILE])["alerting"]["alert_relabel_configs"]
    for config, cluster in zip(relabel, HOSTILE_SITE["clusters"], strict=True):
        assert config["source_labels"] == ["cluster", "instance"] and config["target_label"] == "rack"
        assert re.fullmatch(config["regex"], f'{cluster["name"]};{cluster["targets"][0]["address"]}')
        assert config["replacement"] == cluster["targets"][0].get("rack", "rack-1")


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
