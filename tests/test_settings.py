"""thresholds.yaml loading: the committed file loads, and each kind of mistake gets its own clear error."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from gpudash.errors import ConfigError
from gpudash.settings import load_settings, load_site, load_thresholds, parse_duration


def test_committed_thresholds_load_with_the_documented_levels(root: Path) -> None:
    t = load_thresholds(root / "thresholds.yaml")
    assert (t.utilization.idle_below_percent, t.utilization.saturated_above_percent) == (20, 90)
    assert (t.memory.warning, t.memory.critical) == (0.90, 0.95)
    assert (t.temperature.gpu.warning, t.temperature.gpu.critical) == (80, 85)
    assert (t.temperature.hbm.warning, t.temperature.hbm.critical) == (80, 85)
    assert t.throttle_drop_ratio == pytest.approx(0.10)
    assert t.alerts.memory_leak.horizon.seconds == 4 * 3600
    assert str(t.dashboards.comparison_offset) == "1d"
    assert 79 in t.alerts.xid.critical_codes
    assert t.alerts.exporter_down.lookback.seconds == 3600
    assert str(t.alertmanager.critical.group_wait) == "10s"
    assert str(t.alertmanager.digest.repeat_interval) == "24h"


def test_every_knob_has_a_comment(root: Path) -> None:
    for number, line in enumerate((root / "thresholds.yaml").read_text().splitlines(), 1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#") and not stripped.endswith(":"):
            assert "#" in line, f"thresholds.yaml line {number} has no comment: {line!r}"


@pytest.mark.parametrize(("text", "seconds"), [("30s", 30), ("5m", 300), ("1h30m", 5400), ("1d", 86400)])
def test_durations_parse(text: str, seconds: int) -> None:
    assert parse_duration(text).seconds == seconds
    assert str(parse_duration(text)) == text


@pytest.mark.parametrize("text", ["-5m", "0s", "5", "5ms", "five minutes", ""])
def test_bad_durations_are_rejected(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


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
    pytest.param((("alerts", "xid", "critical_codes"), ["79"]), "alerts.xid.critical_codes: expected whole numbers",
                 id="xid-code-type"),
    pytest.param((("dashboards", "fleet_topk"), True), "dashboards.fleet_topk: expected a whole number",
                 id="bool-is-not-a-number"),
    pytest.param((("alerts", "exporter_down", "lookback"), "-1h"),
                 "alerts.exporter_down.lookback: expected a positive duration such as 5m or 1h, got '-1h'",
                 id="negative-lookback"),
    pytest.param((("alerts", "exporter_down", "lookback"), "5m"),
                 "alerts.exporter_down: lookback (5m) must be above for (5m)", id="lookback-not-above-for"),
    pytest.param((("alertmanager", "digest", "group_wiat"), "5m"), "alertmanager.digest: unknown key 'group_wiat'",
                 id="alertmanager-unknown-key"),
    pytest.param((("alertmanager", "critical", "repeat_interval"), "30s"),
                 "alertmanager.critical: repeat_interval (30s) must not be below group_interval (1m)",
                 id="repeat-below-group-interval"),
    pytest.param((("alertmanager", "critical", "group_wait"), 10),
                 "alertmanager.critical.group_wait: expected a positive duration such as 5m or 1h, got 10",
                 id="alertmanager-number-duration"),
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


def test_site_id_is_derived_from_the_clusters(tmp_path: Path) -> None:
    default = load_site(None)
    assert re.fullmatch(r"demo-[0-9a-f]{6}", default.site_id)
    assert default.grafana_folder_uid == f"gpudash-{default.site_id}"
    site = tmp_path / "gpudash.yaml"
    site.write_text("clusters:\n  - {name: West_1, targets: [{address: 'h:9400'}]}\n"
                    "  - {name: East, targets: [{address: 'g:9400'}]}\n")
    first = load_site(site).site_id
    assert re.fullmatch(r"west-1-east-[0-9a-f]{6}", first)
    site.write_text("clusters:\n  - {name: West_1, targets: [{address: 'h:9401'}]}\n"
                    "  - {name: East, targets: [{address: 'g:9400'}]}\n")
    assert load_site(site).site_id != first  # another address is another site
    site.write_text("clusters:\n  - {name: 'a-very-long-cluster-name-indeed', targets: [{address: 'h:9400'}]}\n")
    assert re.fullmatch(r"a-very-long-cluster-[0-9a-f]{6}", load_site(site).site_id)


def test_site_id_and_folder_uid_given_explicitly(tmp_path: Path) -> None:
    site = tmp_path / "gpudash.yaml"
    site.write_text("site_id: lab-7\n")
    assert (load_site(site).site_id, load_site(site).grafana_folder_uid) == ("lab-7", "gpudash-lab-7")
    site.write_text("site_id: lab-7\ngrafana: {folder_uid: gpus}\n")
    assert load_site(site).grafana_folder_uid == "gpus"


@pytest.mark.parametrize("value", ["Lab", "-lab", "lab_7", "a" * 31, "''", "7"])
def test_bad_site_id_is_one_line_naming_the_key(tmp_path: Path, value: str) -> None:
    site = tmp_path / "gpudash.yaml"
    site.write_text(f"site_id: {value}\n")
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(site))}: site_id: expected ") as info:
        load_site(site)
    assert "\n" not in info.value.format_message()
