"""`gpudash rules` writing its files: the committed output is current, what --check and a bad thresholds file do,
file modes, and never replacing a file gpudash did not write."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.paths import ROOT

from gpudash.cli import cli
from gpudash.config.loading import Settings
from gpudash.files import write_text_tree as write_files
from gpudash.repository import SCRAPE_FILE
from gpudash.rules.generated_files import MARK, render_all, stale_files


def test_committed_output_is_current_and_rendering_is_deterministic(settings: Settings) -> None:
    first, second = render_all(settings), render_all(settings)
    assert first == second
    assert stale_files(ROOT / "generated", first) == []


def test_cli_writes_then_checks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "thresholds.yaml").write_text((ROOT / "thresholds.yaml").read_text())
    runner = CliRunner()
    first = runner.invoke(cli, ["rules", "--out", "gen"])
    assert first.exit_code == 0, first.output
    assert "5 of 5 files changed" in first.output
    assert runner.invoke(cli, ["rules", "--out", "gen"]).output.strip().endswith("0 of 5 files changed in gen")
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


@pytest.mark.parametrize(("args", "message"), [
    (["--out", "{file}"], "{file}: cannot write there: not a directory"),
    (["--out", "{file}/sub"], "{file}: cannot write there: not a directory"),
    (["--format", "all", "--dashboards-json", "{file}", "--out", "{folder}"],
     "{file}: --dashboards-json: not a directory"),
])
def test_a_file_where_a_folder_is_meant_is_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    file, folder = tmp_path / "a-file", tmp_path / "out"
    file.write_text("mine\n")
    named = [arg.format(file=file, folder=folder) for arg in args]
    result = CliRunner().invoke(cli, ["rules", "--thresholds", str(ROOT / "thresholds.yaml"), *named])
    assert result.exit_code == 2
    assert result.stderr == f"gpudash: {message.format(file=file)}\n"
    assert file.read_text() == "mine\n" and not folder.exists()
