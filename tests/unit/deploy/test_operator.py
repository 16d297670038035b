"""`gpudash rules --format prometheus-operator`: the resources hold the plain files' rules and routes, the
site config's names and labels, and the committed dashboard JSON; and they pass the operator's schemas."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.cli import gpudash
from support.kubeschema import documents, file_problems, problems
from support.languages import am_parse_matchers
from support.paths import ROOT, TESTS

from gpudash.config.loading import Settings, load_settings
from gpudash.kube.operator import (
    ALERTMANAGER_CONFIG_FILE,
    DASHBOARDS_FILE,
    MONITOR_FILE,
    RULES_FILE,
    matcher,
    receiver_secret_keys,
)
from gpudash.repository import ALERTING_FILE, ALERTMANAGER_FILE, ALERTS_FILE, RECORDING_FILE
from gpudash.rules.cli import render
from gpudash.rules.generated_files import render_all

JSON_DIR = ROOT / "dashboards" / "json"
SITE = {
    "clusters": [{"name": "prod-a", "targets": [{"address": "a1:9400"}]},
                 {"name": "Prod B", "targets": [{"address": "b1:9400"}]}],
    "receivers": [{"name": "oncall", "type": "webhook", "url_env": "ONCALL_URL"},
                  {"name": "team", "type": "slack", "api_url_file": "/s/slack", "channel": "#gpu"},
                  {"name": "mail", "type": "email", "to": "a@b.c", "from": "g@b.c", "smarthost": "smtp:25",
                   "auth_username": "g", "auth_password_env": "SMTP_PASSWORD"}],
    "kubernetes": {"namespace": "gpu-mon", "name_prefix": "gd", "rule_labels": {"release": "kps"},
                   "monitor_labels": {"team": "ml", "release": "kps"},
                   "alertmanager_config_labels": {"alertmanagerConfig": "gpu"},
                   "exporter_selector": {"app": "gpu-exporter"}, "exporter_port": "http-metrics",
                   "dashboards": {"label": "dash", "label_value": "yes", "folder_annotation": "folder"}},
}


def _settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, site: dict[str, Any] | None) -> Settings:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPUDASH_SITE", raising=False)
    path = None
    if site is not None:
        path = tmp_path / "gpudash.yaml"
        path.write_text(yaml.safe_dump(site), encoding="utf-8")
    return load_settings(ROOT / "thresholds.yaml", path)


@pytest.fixture
def site_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    return _settings(tmp_path, monkeypatch, SITE)


def _parsed(matchers: list[str]) -> list[tuple[str, str, str]]:
    """(name, op, value) of each matcher, as the Alertmanager-grammar reader in support.languages reads it."""
    return [found for text in matchers for found in am_parse_matchers(text)]


def _docs(files: dict[str, str], rel: str) -> list[Any]:
    return documents(files[rel])


def _rules(groups: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [(group["name"], rule) for group in groups for rule in group["rules"]]


@pytest.mark.parametrize("site", [None, SITE], ids=["demo", "site"])
def test_prometheus_rules_hold_exactly_the_plain_files_rules(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, site: dict[str, Any] | None) -> None:
    settings = _settings(tmp_path, monkeypatch, site)
    files = render(settings, "all", JSON_DIR)
    plain = [rule for rel in (RECORDING_FILE, ALERTS_FILE, ALERTING_FILE)
             for rule in _rules(yaml.safe_load(files[rel])["groups"])]
    resources = _docs(files, RULES_FILE)
    assert [r["kind"] for r in resources] == ["PrometheusRule"] * 3
    operator = [rule for r in resources for rule in _rules(r["spec"]["groups"])]
    assert operator == plain
    assert len(plain) > 20  # both files, not an empty pair


def test_names_namespace_and_selector_labels_come_from_the_site_config(site_settings: Settings) -> None:
    files = render(site_settings, "prometheus-operator", JSON_DIR)
    rules = _docs(files, RULES_FILE)
    assert [r["metadata"]["name"] for r in rules] == ["gd-gpu-recording", "gd-gpu-alerts", "gd-alerting"]
    assert {r["metadata"]["namespace"] for r in rules} == {"gpu-mon"}
    assert all(r["metadata"]["labels"]["release"] == "kps" for r in rules)
    (am,) = _docs(files, ALERTMANAGER_CONFIG_FILE)
    assert am["metadata"]["labels"]["alertmanagerConfig"] == "gpu"
    monitors = [doc for key in ("prod-a", "prod-b") for doc in _docs(files, MONITOR_FILE.format(cluster=key))]
    assert [m["metadata"]["name"] for m in monitors] == ["gd-exporter-prod-a", "gd-exporter-prod-b"]
    for monitor, cluster in zip(monitors, ("prod-a", "Prod B"), strict=True):
        assert monitor["metadata"]["labels"]["team"] == "ml"
        assert monitor["spec"]["selector"] == {"matchLabels": {"app": "gpu-exporter"}}
        assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["gpu-mon"]}
        (endpoint,) = monitor["spec"]["endpoints"]
        assert endpoint["port"] == "http-metrics"
        relabel = {r["targetLabel"]: r.get("replacement") for r in endpoint["relabelings"]}
        assert relabel["cluster"] == cluster  # the cluster label, as the plain scrape config attaches it
        assert relabel["job"] == site_settings.site.scrape_job  # what GPUExporterDown and `check` look for
    assert set(files) == {RULES_FILE, ALERTMANAGER_CONFIG_FILE, DASHBOARDS_FILE, MONITOR_FILE.format(cluster="prod-a"),
                          MONITOR_FILE.format(cluster="prod-b")}


def test_alertmanager_config_keeps_alertmanager_yml_routes_and_inhibitions(site_settings: Settings) -> None:
    files = render(site_settings, "all", JSON_DIR)
    plain = yaml.safe_load(files[ALERTMANAGER_FILE])
    (am,) = _docs(files, ALERTMANAGER_CONFIG_FILE)

    def walk_plain(route: dict[str, Any]) -> list[Any]:
        here = [route.get("receiver"), route.get("group_wait"), route.get("group_by"),
                sorted(_parsed(route.get("matchers", [])))]
        return [here, [walk_plain(child) for child in route.get("routes", [])]]

    def walk_operator(route: dict[str, Any]) -> list[Any]:
        matchers = sorted((m["name"], m["matchType"], m["value"]) for m in route.get("matchers", []))
        here = [route.get("receiver"), route.get("groupWait"), route.get("groupBy"), matchers]
        return [here, [walk_operator(child) for child in route.get("routes", [])]]

    assert walk_operator(am["spec"]["route"]) == walk_plain(plain["route"])
    assert len(am["spec"]["inhibitRules"]) == len(plain["inhibit_rules"])
    for ours, theirs in zip(am["spec"]["inhibitRules"], plain["inhibit_rules"], strict=True):
        assert sorted((m["name"], m["matchType"], m["value"]) for m in ours["sourceMatch"]) == \
            sorted(_parsed(theirs["source_matchers"]))
        assert ours["equal"] == theirs["equal"]
    assert [r["name"] for r in am["spec"]["receivers"]] == [r["name"] for r in plain["receivers"]]


def test_receiver_secrets_are_secret_references_never_values(site_settings: Settings,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ONCALL_URL", "https://hooks.example/very-secret")
    monkeypatch.setenv("SMTP_PASSWORD", "hunter2")
    files = render(site_settings, "prometheus-operator", JSON_DIR)
    text = files[ALERTMANAGER_CONFIG_FILE]
    assert "very-secret" not in text and "hunter2" not in text
    (am,) = _docs(files, ALERTMANAGER_CONFIG_FILE)
    receiver = am["spec"]["receivers"][0]
    secret = "gpudash-alertmanager-receivers"
    assert receiver["webhookConfigs"] == [{"urlSecret": {"name": secret, "key": "oncall-url"}, "sendResolved": True}]
    assert receiver["slackConfigs"][0]["apiURL"] == {"name": secret, "key": "team-api-url"}
    assert receiver["emailConfigs"][0]["authPassword"] == {"name": secret, "key": "mail-auth-password"}
    assert receiver_secret_keys(site_settings) == ["oncall-url", "team-api-url", "mail-auth-password"]
    # Everything else as alertmanager.yml has it: the Slack message templates, the channel, the mail headers.
    plain = yaml.safe_load(render_all(site_settings)[ALERTMANAGER_FILE])["receivers"][0]
    slack, theirs = receiver["slackConfigs"][0], plain["slack_configs"][0]
    assert (slack["title"], slack["text"], slack["channel"]) == (theirs["title"], theirs["text"], theirs["channel"])
    mail = receiver["emailConfigs"][0]
    assert (mail["to"], mail["from"], mail["authUsername"]) == ("a@b.c", "g@b.c", "g")


@pytest.mark.parametrize("text", ['cluster="a\\"b\\\\c\\nd"', 'alertname=~"GPU.+"', 'gpu=""', 'x!~"y"'])
def test_matcher_reads_back_what_alertmanager_reads(text: str) -> None:
    ((name, op, value),) = _parsed([text])
    assert matcher(text) == {"name": name, "value": value, "matchType": op}


def test_dashboard_config_maps_hold_the_committed_json_for_the_sidecar(site_settings: Settings) -> None:
    files = render(site_settings, "prometheus-operator", JSON_DIR)
    maps = _docs(files, DASHBOARDS_FILE)
    committed = sorted(JSON_DIR.glob("*.json"))
    assert len(maps) == len(committed) >= 2
    for config_map, path in zip(maps, committed, strict=True):
        assert config_map["data"] == {path.name: path.read_text(encoding="utf-8")}  # byte for byte
        json.loads(config_map["data"][path.name])
        assert config_map["metadata"]["labels"]["dash"] == "yes"
        assert config_map["metadata"]["annotations"] == {"folder": site_settings.site.grafana_folder}


def test_every_committed_and_shipped_resource_passes_the_schemas() -> None:
    generated = sorted((ROOT / "generated" / "kubernetes").glob("*.yaml"))
    shipped = [p for p in sorted((ROOT / "deploy" / "kubernetes").glob("*.y*ml"))
               if p.name not in ("kustomization.yaml", "web-config.yml")]
    assert len(generated) == 4 and len(shipped) >= 5  # rules, alertmanager config, dashboards, the demo's monitor
    assert file_problems(generated + shipped) == {}


def test_the_site_configs_resources_pass_the_schemas(site_settings: Settings) -> None:
    files = render(site_settings, "prometheus-operator", JSON_DIR)
    assert [p for text in files.values() for doc in documents(text) for p in problems(doc)] == []


@pytest.mark.parametrize("fixture", sorted((TESTS / "fixtures" / "kubernetes").glob("broken-*.yaml")),
                         ids=lambda p: p.stem)
def test_a_broken_resource_fails_the_schemas(fixture: Path) -> None:
    found = file_problems([fixture])
    assert list(found) == [str(fixture)] and found[str(fixture)]


def test_the_committed_operator_files_are_current(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran = gpudash("rules", "--format", "all", "--check", "--out", str(ROOT / "generated"),
                  "--dashboards-json", str(JSON_DIR), "--thresholds", str(ROOT / "thresholds.yaml"), cwd=tmp_path)
    assert ran.code == 0, ran.err


def test_plain_format_is_unchanged_by_the_operator_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _settings(tmp_path, monkeypatch, None)
    assert render(settings, "plain", JSON_DIR) == render_all(settings)


def test_two_clusters_with_one_kubernetes_name_are_refused(tmp_path: Path) -> None:
    site = tmp_path / "gpudash.yaml"
    site.write_text(yaml.safe_dump({"clusters": [{"name": "Prod A", "targets": [{"address": "a:1"}]},
                                                 {"name": "prod-a", "targets": [{"address": "b:1"}]}]}))
    ran = gpudash("rules", "--format", "prometheus-operator", "--out", str(tmp_path / "out"), "--dashboards-json",
                  str(JSON_DIR), "--thresholds", str(ROOT / "thresholds.yaml"), "--site", str(site), cwd=tmp_path)
    assert ran.code == 2
    assert ran.err.strip() == ("gpudash: clusters 'Prod A' and 'prod-a' both give the ServiceMonitor name "
                               "gpudash-exporter-prod-a: rename one")
    assert not (tmp_path / "out").exists()


def test_operator_format_without_dashboard_json_is_one_line_exit_2(tmp_path: Path) -> None:
    ran = gpudash("rules", "--format", "prometheus-operator", "--out", str(tmp_path / "out"),
                  "--thresholds", str(ROOT / "thresholds.yaml"), cwd=tmp_path)
    assert ran.code == 2
    assert ran.err.strip().splitlines() == [
        "gpudash: dashboards/json: no dashboard JSON there (run `gpudash dashboards` first, or pass "
        "--dashboards-json DIR)"]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("section", "where"), [
    ({"namespace": "Monitoring"}, "kubernetes.namespace"),
    ({"rule_labels": {"bad key!": "x"}}, "kubernetes.rule_labels.bad key!"),
    ({"monitor_labels": {"release": "-x"}}, "kubernetes.monitor_labels.release"),
    ({"monitor_labels": {}}, "kubernetes.monitor_labels"),
    ({"exporter_scheme": "ftp"}, "kubernetes.exporter_scheme"),
    ({"dashboards": {"lable": "x"}}, "kubernetes.dashboards"),
    ({"namspace": "x"}, "kubernetes"),
])
def test_a_bad_kubernetes_section_names_its_key(tmp_path: Path, section: dict[str, Any], where: str) -> None:
    site = tmp_path / "gpudash.yaml"
    site.write_text(yaml.safe_dump({"kubernetes": section}), encoding="utf-8")
    ran = gpudash("rules", "--format", "prometheus-operator", "--out", str(tmp_path / "out"),
                  "--thresholds", str(ROOT / "thresholds.yaml"), "--site", str(site), cwd=tmp_path)
    assert ran.code == 2
    assert ran.err.startswith(f"gpudash: {site}: {where}: ")
    assert len(ran.err.strip().splitlines()) == 1
