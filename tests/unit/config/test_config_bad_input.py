"""Config text that once gave a wrong file or a traceback: each is now one line naming the file, exit 2,
nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli import gpudash
from support.paths import ROOT

FULLWIDTH_2 = "\uff12"


def replaced(tmp_path: Path, old: str, new: str, name: str = "thresholds.yaml") -> Path:
    """A copy of the committed thresholds.yaml with the first `old` replaced by `new`."""
    text = (ROOT / "thresholds.yaml").read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / name
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path


def one_line_exit_2(tmp_path: Path, *args: str) -> str:
    """Run `gpudash rules` into a fresh folder; assert exit 2, one line on stderr, nothing written; give the line."""
    out = tmp_path / "out"
    ran = gpudash("rules", "--out", str(out), *args)
    assert ran.code == 2, ran.out + ran.err
    assert ran.err.count("\n") == 1 and ran.err.startswith("gpudash: "), ran.err
    assert not out.exists()
    return ran.err.strip()


@pytest.mark.parametrize(("old", "new", "key"), [
    ("    window: 2m ", f"    window: {FULLWIDTH_2}m ", "alerts.temperature.window"),
    ("    group_wait: 10s", f"    group_wait: 1{FULLWIDTH_2}s", "alertmanager.critical.group_wait"),
    ("  refresh: 30s", f"  refresh: {FULLWIDTH_2}0s", "dashboards.refresh"),
])
def test_a_duration_with_a_fullwidth_digit_is_refused_naming_file_key_and_value(
        tmp_path: Path, old: str, new: str, key: str) -> None:
    path = replaced(tmp_path, old, new)
    line = one_line_exit_2(tmp_path, "--thresholds", str(path))
    value = new.split(":")[1].strip()
    assert line == f"gpudash: {path}: {key}: expected a positive duration such as 5m or 1h, got {value!r}"


def test_a_scrape_interval_with_a_fullwidth_digit_is_refused(tmp_path: Path) -> None:
    site = tmp_path / "gpudash.yaml"
    site.write_text(f"scrape:\n  interval: 1{FULLWIDTH_2}s\n", encoding="utf-8")
    line = one_line_exit_2(tmp_path, "--thresholds", str(ROOT / "thresholds.yaml"), "--site", str(site))
    assert line == (f"gpudash: {site}: scrape.interval: expected a positive duration such as 5m or 1h, "
                    f"got '1{FULLWIDTH_2}s'")


def test_a_sexagesimal_topk_is_refused_not_read_as_90(tmp_path: Path) -> None:
    path = replaced(tmp_path, "fleet_topk: 10 ", "fleet_topk: 1:30 ")
    line = one_line_exit_2(tmp_path, "--thresholds", str(path))
    assert line == f"gpudash: {path}: dashboards.fleet_topk: expected a whole number from 1 to 200, got '1:30'"


DEEP = "x: " + "[" * 3000 + "]" * 3000 + "\n"
LONG = "n: " + "9" * 5001 + "\n"


@pytest.mark.parametrize(("text", "message"), [
    (DEEP, "line 1, column 67: nested more than 64 levels deep"),
    (LONG, "line 1, column 4: a whole number of 5001 digits; a config file holds at most 100"),
    ("# padding\n" * 120_000, "1,200,000 bytes; a config file is at most 1,048,576 bytes"),
])
@pytest.mark.parametrize("option", ["--thresholds", "--site"])
def test_a_deep_long_or_huge_config_is_one_line_naming_the_file(
        tmp_path: Path, text: str, message: str, option: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    args = (option, str(path)) if option == "--thresholds" else ("--site", str(path), "--thresholds",
                                                                  str(ROOT / "thresholds.yaml"))
    assert one_line_exit_2(tmp_path, *args) == f"gpudash: {path}: {message}"


@pytest.mark.parametrize("text", [DEEP, LONG])
def test_the_exporter_web_config_is_read_with_the_same_bounds(tmp_path: Path, text: str) -> None:
    from gpudash.errors import ExporterError
    from gpudash.exporter.webconfig import load_web_config

    path = tmp_path / "web-config.yml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ExporterError, match=rf"^{path}: line 1, column \d+: ") as info:
        load_web_config(path)
    assert "\n" not in info.value.format_message()


@pytest.mark.parametrize(("text", "shown"), [("08", "8"), ("1e3", "1000.0"), ("true", "True")])
def test_a_name_yaml_reads_as_a_number_says_to_quote_it(tmp_path: Path, text: str, shown: str) -> None:
    site = tmp_path / "gpudash.yaml"
    site.write_text(f"clusters:\n  - name: {text}\n    targets: [{{address: 'h:9400'}}]\n", encoding="utf-8")
    line = one_line_exit_2(tmp_path, "--thresholds", str(ROOT / "thresholds.yaml"), "--site", str(site))
    assert line == (f"gpudash: {site}: clusters[0].name: expected a non-empty string, got {shown} "
                    "(quote it to mean text)")


def test_a_grafana_schema_other_than_v1_v2_or_auto_is_refused(tmp_path: Path) -> None:
    site = tmp_path / "gpudash.yaml"
    site.write_text("grafana:\n  schema: v3\n", encoding="utf-8")
    line = one_line_exit_2(tmp_path, "--thresholds", str(ROOT / "thresholds.yaml"), "--site", str(site))
    assert line == f"gpudash: {site}: grafana.schema: expected one of v1, v2, auto, got 'v3'"


@pytest.mark.parametrize(("old", "new", "key", "expected"), [
    ("speed_below_ratio: 0.75 ", "speed_below_ratio: 1.5 ", "alerts.fabric.speed_below_ratio",
     "a number from 0.01 to 0.99, got 1.5"),
    ("    flaps: 3 ", "    flaps: 1 ", "alerts.fabric.flaps", "a whole number from 2 to 10000, got 1"),
])
def test_a_fabric_knob_out_of_bounds_is_refused_naming_the_key(
        tmp_path: Path, old: str, new: str, key: str, expected: str) -> None:
    path = replaced(tmp_path, old, new)
    line = one_line_exit_2(tmp_path, "--thresholds", str(path))
    assert line.startswith(f"gpudash: {path}: {key}: expected ") and line.endswith(expected), line
