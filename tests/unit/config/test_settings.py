"""thresholds.yaml loading: the committed file loads, and each kind of mistake gets its own clear error."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from gpudash.catalog import PROFILES
from gpudash.config.loading import load_settings, load_site, load_thresholds
from gpudash.errors import ConfigError


def test_committed_thresholds_load_with_the_documented_levels(root: Path) -> None:
    t = load_thresholds(root / "thresholds.yaml")
    assert (t.utilization.idle_below_percent, t.utilization.saturated_above_percent) == (20, 90)
    assert (t.memory.warning, t.memory.critical) == (0.90, 0.95)
    assert (t.temperature.gpu.warning, t.temperature.gpu.critical) == (80, 85)
    # HBM's fallback: an H200's memory max operating temperature (95 C) less the 5-degree margin
    assert (t.temperature.hbm.warning, t.temperature.hbm.critical) == (90, 95)
    assert (t.temperature.gpu_margin, t.temperature.hbm_margin) == (5, 5)
    assert t.alerts.nvlink.crc_per_second_critical == 100
    assert t.throttle_drop_ratio == pytest.approx(0.10)
    assert t.alerts.memory_leak.horizon.seconds == 4 * 3600
    assert str(t.dashboards.comparison_offset) == "1d"
    assert t.alerts.xid.overrides == ()
    assert t.alerts.xid.table[79].action == "reboot_node"
    assert t.alerts.exporter_down.lookback.seconds == 3600
    assert str(t.alertmanager.critical.group_wait) == "10s"
    assert str(t.alertmanager.digest.repeat_interval) == "24h"


def test_every_knob_has_a_comment(root: Path) -> None:
    for number, line in enumerate((root / "thresholds.yaml").read_text().splitlines(), 1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#") and not stripped.endswith(":"):
            assert "#" in line, f"thresholds.yaml line {number} has no comment: {line!r}"


BAD_CASES = [
    pytest.param((("memory", "warning_ratio"), "high"), "memory.warning_ratio: expected a number between 0 and 1, "
                 "got 'high'", id="wrong-type"),
    pytest.param((("memory", "warnign_ratio"), 0.9), "memory: unknown key 'warnign_ratio'", id="unknown-key"),
    pytest.param((("temperature", "gpu_warning_celsius"), 90),
                 "temperature: gpu_warning_celsius (90) must not be above gpu_critical_celsius (85)",
                 id="warning-above-critical"),
    pytest.param((("alerts", "memory_leak", "window"), "-1h"),
                 "alerts.memory_leak.window: expected a positive duration such as 5m or 1h, got '-1h'",
                 id="negative-window"),
    pytest.param((("alerts", "temperature", "for"), 5),
                 "alerts.temperature.for: expected a positive duration such as 5m or 1h, got 5", id="number-for"),
    pytest.param((("memory", "critical_ratio"), 1.5), "memory.critical_ratio: expected a number between 0 and 1, "
                 "got 1.5", id="out-of-range"),
    pytest.param((("alerts", "xid", "critical_codes"), [79]),
                 "alerts.xid.critical_codes: is gone: each XID's severity and action now come from the XID table "
                 "(gpudash/health/xid_catalog.csv", id="xid-critical-codes-moved"),
    pytest.param((("alerts", "xid", "overrides"), {13: "restart"}),
                 "alerts.xid.overrides.13: expected one of none, restart_job, reset_gpu, reboot_node, drain, rma, "
                 "got 'restart'", id="xid-override-unknown-action"),
    pytest.param((("alerts", "xid", "overrides"), {"x13": "none"}),
                 "alerts.xid.overrides.x13: expected an XID code (a whole number from 1 to 999) as the key",
                 id="xid-override-bad-code"),
    pytest.param((("alerts", "xid", "overrides"), [13]), "alerts.xid.overrides: expected a mapping, got a list",
                 id="xid-overrides-not-a-mapping"),
    pytest.param((("temperature", "hbm_margin_celsius"), -1),
                 "temperature.hbm_margin_celsius: expected a number from 0 to 50, got -1", id="negative-margin"),
    pytest.param((("alerts", "nvlink", "crc_per_second_critical"), "lots"),
                 "alerts.nvlink.crc_per_second_critical: expected a number from 0.001 to 1e+09, got 'lots'",
                 id="nvlink-crc-rate-type"),
    pytest.param((("dashboards", "fleet_topk"), True), "dashboards.fleet_topk: expected a whole number",
                 id="bool-is-not-a-number"),
    pytest.param((("alerts", "exporter_down", "lookback"), "-1h"),
                 "alerts.exporter_down.lookback: expected a positive duration such as 5m or 1h, got '-1h'",
                 id="negative-lookback"),
    pytest.param((("alerts", "exporter_down", "lookback"), "5m"),
                 "alerts.exporter_down: lookback (5m) must be above for (5m)", id="lookback-not-above-for"),
    pytest.param((("alerts", "repeat_offender", "merge_within"), "7d"),
                 "alerts.repeat_offender: merge_within (7d) must be below window (7d)", id="merge-not-below-window"),
    pytest.param((("alerts", "repeat_offender", "resets"), 1),
                 "alerts.repeat_offender.resets: expected a whole number from 2 to 1000, got 1", id="one-reset"),
    pytest.param((("alertmanager", "digest", "group_wiat"), "5m"), "alertmanager.digest: unknown key 'group_wiat'",
                 id="alertmanager-unknown-key"),
    pytest.param((("alertmanager", "critical", "repeat_interval"), "30s"),
                 "alertmanager.critical: repeat_interval (30s) must not be below group_interval (1m)",
                 id="repeat-below-group-interval"),
    pytest.param((("alertmanager", "critical", "group_wait"), 10),
                 "alertmanager.critical.group_wait: expected a positive duration such as 5m or 1h, got 10",
                 id="alertmanager-number-duration"),
    pytest.param((("memory", "warning_ratio"), float("nan")),
                 "memory.warning_ratio: expected a number between 0 and 1, got nan", id="nan"),
    pytest.param((("temperature", "gpu_critical_celsius"), float("inf")),
                 "temperature.gpu_critical_celsius: expected a number from 0 to 150, got inf", id="infinity"),
    pytest.param((("utilization", "idle_below_percent"), float("-inf")),
                 "utilization.idle_below_percent: expected a number from 0 to 100, got -inf", id="minus-infinity"),
    pytest.param((("alerts", "memory_leak", "horizon"), "99999999999999999999d"),
                 "alerts.memory_leak.horizon: expected a duration of at most 3650d (10 years), "
                 "got '99999999999999999999d'", id="duration-overflows-prometheus"),
    pytest.param((("alerts", "memory_leak", "horizon"), "3650d1s"),
                 "alerts.memory_leak.horizon: expected a duration of at most 3650d (10 years), got '3650d1s'",
                 id="duration-just-over-the-bound"),
    pytest.param((("dashboards", "refresh"), "0" * 5000 + "1" * 13 + "s"),
                 "dashboards.refresh: expected a duration of at most 3650d (10 years)", id="duration-many-digits"),
]


@pytest.mark.parametrize(("change", "message"), BAD_CASES)
def test_each_mistake_names_file_key_and_expectation(
        thresholds_copy: Callable[..., Path], change: tuple[tuple[str, ...], object], message: str) -> None:
    path = thresholds_copy(change)
    with pytest.raises(ConfigError) as info:
        load_thresholds(path)
    text = info.value.format_message()
    assert text.startswith(f"{path}: ")
    assert message in text
    assert "\n" not in text


def test_missing_section_is_named(tmp_path: Path, root: Path) -> None:
    path = tmp_path / "thresholds.yaml"
    path.write_text("\n".join(line for line in (root / "thresholds.yaml").read_text().splitlines()
                              if not line.startswith("clocks") and "throttle_drop_ratio" not in line))
    with pytest.raises(ConfigError, match=r"thresholds.yaml: clocks: is required but missing"):
        load_thresholds(path)


def test_missing_file_broken_yaml_and_empty_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="file not found"):
        load_thresholds(tmp_path / "nope.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("memory:\n  warning_ratio: [0.9\n")
    with pytest.raises(ConfigError, match=r"broken.yaml: line \d+, column \d+: invalid YAML"):
        load_thresholds(broken)
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing\n")
    with pytest.raises(ConfigError, match="the file is empty"):
        load_thresholds(empty)
    listed = tmp_path / "list.yaml"
    listed.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match=r"\(top level\): expected a mapping, got a list"):
        load_thresholds(listed)


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_the_site_takes_every_catalog_profile(tmp_path: Path, name: str) -> None:
    site = tmp_path / "gpudash.yaml"
    site.write_text(f"profile: {name}\n")
    assert load_site(site).profile == name


def test_site_defaults_and_validation(tmp_path: Path) -> None:
    assert load_site(None).profile == "dcgm"
    site = tmp_path / "gpudash.yaml"
    site.write_text("profile: nvidia_smi\nclusters:\n  - name: a\n    targets: [{address: 'h:9400', rack: r7}]\n")
    loaded = load_site(site)
    assert loaded.profile == "nvidia_smi"
    assert loaded.clusters[0].targets[0].rack == "r7"
    site.write_text("profile: dcgm2\n")
    with pytest.raises(ConfigError, match="profile: expected one of dcgm, nvidia_smi, got 'dcgm2'"):
        load_site(site)
    site.write_text("receivers:\n  - {name: s, type: slack, channel: '#gpu'}\n")
    with pytest.raises(ConfigError, match=r"receivers\[0\]: a slack receiver needs api_url_file or api_url_env"):
        load_site(site)
    site.write_text("scrape: {interval: 10s, timeout: 15s}\n")
    with pytest.raises(ConfigError, match=r"scrape: timeout \(15s\) must not be above interval \(10s\)"):
        load_site(site)


def test_environment_points_at_another_thresholds_file(
        thresholds_copy: Callable[..., Path], monkeypatch: pytest.MonkeyPatch) -> None:
    path = thresholds_copy((("memory", "warning_ratio"), 0.8))
    monkeypatch.setenv("GPUDASH_THRESHOLDS", str(path))
    assert load_settings().thresholds.memory.warning == 0.8


def test_site_id_and_folder_uid_given_explicitly(tmp_path: Path) -> None:
    site = tmp_path / "gpudash.yaml"
    site.write_text("site_id: lab-7\n")
    assert (load_site(site).site_id, load_site(site).grafana_folder_uid) == ("lab-7", "gpudash-lab-7")
    site.write_text("site_id: lab-7\ngrafana: {folder_uid: gpus}\n")
    assert load_site(site).grafana_folder_uid == "gpus"


@pytest.mark.parametrize("value", ["Lab", "-lab", "lab_7", "a" * 31, "''", "7", '"lab\\n"'])
def test_bad_site_id_is_one_line_naming_the_key(tmp_path: Path, value: str) -> None:
    site = tmp_path / "gpudash.yaml"
    site.write_text(f"site_id: {value}\n")
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(site))}: site_id: expected ") as info:
        load_site(site)
    assert "\n" not in info.value.format_message()


def test_duplicate_keys_are_refused_with_both_lines(tmp_path: Path, root: Path) -> None:
    text = (root / "thresholds.yaml").read_text()
    first = next(n for n, line in enumerate(text.splitlines(), 1) if line.startswith("memory:"))
    path = tmp_path / "thresholds.yaml"
    path.write_text(text + "memory:\n  warning_ratio: 0.5\n  critical_ratio: 0.6\n")
    last = len(text.splitlines()) + 1
    with pytest.raises(ConfigError) as info:
        load_thresholds(path)
    assert info.value.format_message() == \
        f"{path}: line {last}, column 1: duplicate key 'memory' (first at line {first})"
    site = tmp_path / "gpudash.yaml"
    site.write_text("clusters:\n  - name: a\n    targets: [{address: 'h:9400'}]\n    name: b\n")
    with pytest.raises(ConfigError, match=r"gpudash.yaml: line 4, column 5: duplicate key 'name' \(first at line 2\)$"):
        load_site(site)


def _cluster(name: object = "a", address: object = "h:9400", rack: object = "r1") -> dict[str, object]:
    return {"name": name, "targets": [{"address": address, "rack": rack}]}


SITE_CASES = [
    pytest.param({"clusters": [_cluster(name="")]}, "clusters[0].name: expected a non-empty string, got ''",
                 id="empty-name"),
    pytest.param({"clusters": [_cluster(name="a\nb")]},
                 "clusters[0].name: expected text without control characters or line breaks, got 'a\\nb'",
                 id="newline-in-name"),
    pytest.param({"clusters": [_cluster(rack="r\x1b[31m")]}, "clusters[0].targets[0].rack: expected text without "
                 "control characters", id="control-character-in-rack"),
    pytest.param({"clusters": [_cluster(name="a\u2028b")]}, "clusters[0].name: expected text without control",
                 id="line-separator-in-name"),
    pytest.param({"clusters": [_cluster(address="gpu-node-1")]}, "clusters[0].targets[0].address: expected "
                 "host:port (a host name or IP address and a port from 1 to 65535), got 'gpu-node-1'", id="no-port"),
    pytest.param({"clusters": [_cluster(address="http://h:9400")]}, "clusters[0].targets[0].address: expected "
                 "host:port", id="url-as-address"),
    pytest.param({"clusters": [_cluster(address="h:9400/metrics")]}, "address: expected host:port", id="path"),
    pytest.param({"clusters": [_cluster(address="h:70000")]}, "address: expected host:port", id="port-too-big"),
    pytest.param({"clusters": [_cluster(address='h"}:9400')]}, "address: expected host:port", id="quote-in-host"),
    pytest.param({"clusters": [_cluster(), _cluster(address="g:9400")]},
                 "clusters[1].name: cluster 'a' is given twice (first at clusters[0].name)", id="duplicate-cluster"),
    pytest.param({"clusters": [_cluster(), _cluster(name="b")]},
                 "clusters[1].targets[0].address: target 'h:9400' is given twice "
                 "(first at clusters[0].targets[0].address)", id="duplicate-target"),
    pytest.param({"scrape": {"job": ""}}, "scrape.job: expected a non-empty string, got ''", id="empty-job"),
    pytest.param({"scrape": {"job": "gpu\r"}}, "scrape.job: expected text without control", id="cr-in-job"),
    pytest.param({"scrape": {"job": "n", "node_job": "n"}}, "scrape: node_job ('n') must not be the GPU "
                 "exporters' job", id="same-jobs"),
    pytest.param({"runbook_base_url": "ftp://h/r"}, "runbook_base_url: expected an http:// or https:// URL",
                 id="runbook-not-http"),
    pytest.param({"runbook_base_url": "https://h/run book"}, "runbook_base_url: expected an http:// or https:// URL",
                 id="runbook-with-space"),
    pytest.param({"runbook_base_url": "https://h/%zz"}, "runbook_base_url: expected an http:// or https:// URL",
                 id="runbook-bad-percent"),
    pytest.param({"grafana": {"datasource_uid": "prom ds"}}, "grafana.datasource_uid: expected a Grafana uid",
                 id="datasource-uid"),
    pytest.param({"grafana": {"folder_uid": "f" * 41}}, "grafana.folder_uid: expected a Grafana uid",
                 id="folder-uid-too-long"),
    pytest.param({"grafana": {"folder": "GPU\n"}}, "grafana.folder: expected text without control", id="folder"),
    pytest.param({"receivers": [{"name": "w", "type": "webhook", "url_env": "HOOK-URL"}]},
                 "receivers[0].url_env: expected an environment variable name", id="env-name"),
    pytest.param({"receivers": [{"name": "m", "type": "email", "to": "a@b", "from": "c@d", "smarthost": "smtp"}]},
                 "receivers[0].smarthost: expected host:port", id="smarthost"),
    pytest.param({"receivers": [{"name": "w", "type": "webhook", "url": "hook"}]},
                 "receivers[0].url: expected an http:// or https:// URL", id="webhook-url"),
    pytest.param({"receivers": [{"name": "w", "type": "webhook", "url": "https://h/x"},
                                {"name": "w", "type": "webhook", "url": "https://g/x"}]},
                 "receivers[1].name: receiver 'w' is given twice (first at receivers[0].name)", id="same-receiver"),
    pytest.param({"receivers": [{"name": "s", "type": "slack", "api_url_file": "/run/s", "channel": "#a\n"}]},
                 "receivers[0].channel: expected text without control", id="channel"),
    pytest.param({"rma_receivers": [{"name": "t", "type": "webhook"}]},
                 "rma_receivers[0]: a webhook receiver needs url, url_file or url_env", id="rma-receiver-incomplete"),
    pytest.param({"rma_receivers": [{"name": "t", "type": "pager", "url": "https://h/x"}]},
                 "rma_receivers[0].type: expected one of webhook, slack, email, got 'pager'", id="rma-receiver-kind"),
    pytest.param({"rma_receivers": {"name": "t"}}, "rma_receivers: expected a list, got a mapping",
                 id="rma-receivers-not-a-list"),
]


@pytest.mark.parametrize(("data", "message"), SITE_CASES)
def test_site_strings_that_no_output_can_hold_are_refused(tmp_path: Path, data: dict[str, object],
                                                          message: str) -> None:
    site = tmp_path / "gpudash.yaml"
    site.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as info:
        load_site(site)
    text = info.value.format_message()
    assert text.startswith(f"{site}: ") and message in text and "\n" not in text


def test_a_password_in_a_url_is_not_repeated(tmp_path: Path) -> None:
    site = tmp_path / "gpudash.yaml"
    site.write_text(yaml.safe_dump({"receivers": [{"name": "w", "type": "webhook",
                                                   "url": "https://ops:hunter2@relay.example/x"}]}))
    with pytest.raises(ConfigError, match=r"receivers\[0\]\.url: expected an http") as info:
        load_site(site)
    assert "hunter2" not in info.value.format_message()


def test_every_string_a_site_may_hold_is_accepted(tmp_path: Path) -> None:
    odd = 'a"b\\ {{ .x }} é😀 } or vector(1) # '
    site = tmp_path / "gpudash.yaml"
    site.write_text(yaml.safe_dump({
        "clusters": [{"name": odd, "targets": [{"address": "[::1]:9400", "rack": odd},
                                               {"address": "gpu_node-7.example:1"}]}],
        "scrape": {"job": odd, "node_job": odd + "n"},
        "runbook_base_url": "https://h:8443/r/{{x}}?a=%20#",
        "receivers": [{"name": odd, "type": "email", "to": odd, "from": odd, "smarthost": "smtp.example:25"}],
    }))
    loaded = load_site(site)
    assert loaded.clusters[0].name == odd and loaded.scrape_job == odd and loaded.receivers[0].option("to") == odd


def test_job_label_defaults_to_hpc_job_and_is_a_label_name(tmp_path: Path) -> None:
    from gpudash.config.site import Site, parse_site

    assert Site().job_label == "hpc_job"
    assert parse_site("s.yml", {"jobs": {"label": "training_kubeflow_org_job_name"}}).job_label == (
        "training_kubeflow_org_job_name")
    for bad in ("job-name", "1job", "__name__"):
        with pytest.raises(ConfigError, match=r"s.yml: jobs.label: expected a Prometheus label name"):
            parse_site("s.yml", {"jobs": {"label": bad}})
    with pytest.raises(ConfigError, match=r"unknown key 'lable'"):
        parse_site("s.yml", {"jobs": {"lable": "x"}})


def test_xid_overrides_retune_the_table(thresholds_copy: Callable[..., Path]) -> None:
    t = load_thresholds(thresholds_copy((("alerts", "xid", "overrides"), {63: "reset_gpu", 13: "none"})))
    assert t.alerts.xid.overrides == ((13, "none"), (63, "reset_gpu"))
    table = t.alerts.xid.table
    assert (table[63].action, table[63].severity) == ("reset_gpu", "critical")
    assert (table[13].action, table[13].severity) == ("none", "info")
    assert table[79].action == "reboot_node"  # the rest is the bundled table


def test_rma_receivers_are_optional_and_read_like_receivers(tmp_path: Path) -> None:
    from gpudash.config.site import Site, parse_site

    assert Site().rma_receivers == () and Site().runbook_base_url == ""
    site = parse_site("s.yml", {"rma_receivers": [{"name": "tickets", "type": "webhook", "url_env": "RMA_HOOK"}]})
    (tickets,) = site.rma_receivers
    assert (tickets.name, tickets.kind, tickets.option("url_env")) == ("tickets", "webhook", "RMA_HOOK")
    assert site.receivers == Site().receivers  # the severity receivers are not touched
