"""Arbitrary site strings through the real tools: promtool and amtool must read exactly what the site says.

Each Hypothesis example puts many strings into one site config and runs every tool once on it: promtool
checks the rules and runs a rule unit test whose series carry those strings (GPUExporterDown must select
exactly the intended series, not a near miss, and print the strings in its annotations); amtool checks
alertmanager.yml and routes each cluster's alert through that cluster's route.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.languages import render_go_template
from test_rules_promtool import ROOT, run, tool

from gpudash.config.durations import MAX_DURATION_SECONDS
from gpudash.config.loading import load_settings
from gpudash.escape import am_matcher, promql_string
from gpudash.files import write_text_tree as write_files
from gpudash.repository import ALERTMANAGER_FILE, ALERTS_FILE, RECORDING_FILE, SCRAPE_FILE
from gpudash.rules.alertmanager import CRITICAL_RECEIVER
from gpudash.rules.generated_files import MARK, render_all

# What validation lets through: any text but control characters, lone surrogates and line separators.
NAME = st.text(st.characters(exclude_categories=("Cc", "Cs", "Zl", "Zp")), min_size=1, max_size=16)
URL_TAIL = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters="%"), max_size=16)


class _QuotedText(yaml.SafeDumper):
    """Every string double-quoted: PyYAML quotes only what YAML 1.1 would misread, and gpudash reads YAML 1.2,
    which takes a plain `0e0` as a number."""


_QuotedText.add_representer(str, lambda dumper, text: dumper.represent_scalar("tag:yaml.org,2002:str", text,
                                                                              style='"'))


def render(tmp: Path, site: dict[str, Any], thresholds: Path = ROOT / "thresholds.yaml") -> Path:
    (tmp / "site.yaml").write_text(yaml.dump(site, Dumper=_QuotedText, allow_unicode=True))
    out = tmp / "out"
    write_files(out, render_all(load_settings(thresholds, tmp / "site.yaml")), MARK)
    return out


def series(metric: str, **labels: str) -> str:
    return metric + "{" + ",".join(f"{k}={promql_string(v)}" for k, v in labels.items()) + "}"


def exporter_down_case(out: Path, job: str, node_job: str, clusters: list[str]) -> dict[str, Any]:
    """Every cluster's exporter is down; near misses of the job name (and the node job) are down too."""
    rule = next(r for r in yaml.safe_load((out / ALERTS_FILE).read_text())["groups"][0]["rules"]
                if r["alert"] == "GPUExporterDown")
    inputs, expected = [], []
    for index, cluster in enumerate(clusters):
        instance = f"n{index}:9400"
        inputs.append({"series": series("up", job=job, instance=instance, cluster=cluster), "values": "0x20"})
        labels = {"severity": "critical", "action": "none", "cluster": cluster, "instance": instance}
        values = {"$labels.instance": instance, "$labels.cluster": cluster, "$labels.gpu": ""}
        annotations = {k: render_go_template(v, values) for k, v in rule["annotations"].items()}
        expected.append({"exp_labels": labels, "exp_annotations": annotations})
    for index, near in enumerate({job + "x", "x" + job, job[:-1], job + " ", node_job} - {job}):
        instance = f"near{index}:9400"
        inputs.append({"series": series("up", job=near, instance=instance, cluster=clusters[0]), "values": "0x20"})
    return {
        "rule_files": [str(out / RECORDING_FILE), str(out / ALERTS_FILE)],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": inputs,
                   "alert_rule_test": [{"eval_time": "15m", "alertname": "GPUExporterDown", "exp_alerts": expected}]}],
    }


def check(result: subprocess.CompletedProcess[str], what: str) -> None:
    assert result.returncode == 0, f"{what}: {(result.stdout + result.stderr)[-4000:]}"


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters=st.lists(NAME, min_size=1, max_size=3, unique=True), racks=st.lists(NAME, min_size=3, max_size=3),
       job=NAME, node_job=NAME, channel=NAME, mail=NAME, runbook=URL_TAIL)
def test_arbitrary_site_strings_pass_the_real_tools(clusters: list[str], racks: list[str], job: str, node_job: str,
                                                    channel: str, mail: str, runbook: str) -> None:
    if node_job == job:
        node_job += "-node"
    site = {
        "clusters": [{"name": name, "targets": [{"address": f"n{i}:9400", "rack": racks[i]}]}
                     for i, name in enumerate(clusters)],
        "scrape": {"job": job, "node_job": node_job},
        "runbook_base_url": f"https://runbooks.example/{runbook}",
        "receivers": [{"name": "team", "type": "slack", "api_url_file": f"/run/{channel}", "channel": channel},
                      {"name": "mail", "type": "email", "to": mail, "from": mail, "smarthost": "smtp.example:25"}],
    }
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        out = render(tmp, site)
        check(run(tool("promtool"), "check", "rules", str(out / ALERTS_FILE), str(out / RECORDING_FILE)), "rules")
        (tmp / "case.yaml").write_text(yaml.safe_dump(exporter_down_case(out, job, node_job, clusters),
                                                      allow_unicode=True))
        check(run(tool("promtool"), "test", "rules", str(tmp / "case.yaml")), "promtool test")
        config = str(out / ALERTMANAGER_FILE)
        check(run(tool("amtool"), "check-config", config), "amtool check-config")
        for name in clusters:
            routed = run(tool("amtool"), "config", "routes", "test", f"--config.file={config}", "--tree",
                         am_matcher("cluster", name), "severity=critical")
            check(routed, f"routes test {name!r}")
            # pages are routed by action and severity, not per cluster: any cluster's critical alert is paged
            assert "receiver: gpudash-critical" in routed.stdout, routed.stdout
            assert routed.stdout.rstrip().endswith(CRITICAL_RECEIVER), routed.stdout
        near = next(n for n in (clusters[0] + "x", "x" + clusters[0]) if n not in clusters)
        routed = run(tool("amtool"), "config", "routes", "test", f"--config.file={config}", "--tree",
                     am_matcher("cluster", near), "severity=critical")
        check(routed, "routes test near miss")
        assert "cluster=" not in routed.stdout.split("Matching routes:", 1)[1], routed.stdout


def test_the_longest_durations_pass_the_real_tools(tmp_path: Path, root: Path) -> None:
    longest = f"{MAX_DURATION_SECONDS // 86400}d"
    data = yaml.safe_load((root / "thresholds.yaml").read_text())
    for section in data["alerts"].values():
        for key in ("window", "growth_window", "horizon", "lookback"):
            if key in section:
                section[key] = longest
        if "for" in section:
            section["for"] = "0003649d23h59m59s"  # leading zeros and all units: Prometheus reads them too
    for timing in data["alertmanager"].values():
        timing.update(group_wait=longest, group_interval=longest, repeat_interval=longest)
    (tmp_path / "thresholds.yaml").write_text(yaml.safe_dump(data))
    out = render(tmp_path, {"scrape": {"interval": longest, "timeout": longest}}, tmp_path / "thresholds.yaml")
    check(run(tool("promtool"), "check", "rules", str(out / ALERTS_FILE), str(out / RECORDING_FILE)), "rules")
    check(run(tool("amtool"), "check-config", str(out / ALERTMANAGER_FILE)), "amtool check-config")
    config = {"scrape_configs": yaml.safe_load((out / SCRAPE_FILE).read_text())["scrape_configs"]}
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    check(run(tool("promtool"), "check", "config", str(tmp_path / "prometheus.yml")), "promtool check config")
