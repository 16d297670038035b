"""The command line as a new user meets it: help that teaches, one-line errors, no tracebacks."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from support.cli import gpudash

from gpudash.cli import COMMANDS, _module_exists, cli, main
from gpudash.errors import (
    CheckFailed,
    ConfigError,
    DriftError,
    ExporterError,
    GpudashError,
    OutputError,
    RemoteError,
    StaleOutputError,
    UsageError,
)


def test_top_level_help_lists_every_command() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    for name in COMMANDS:
        assert name in result.output
    assert "Typical use" in result.output


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_command_exists_and_its_help_has_an_example(name: str) -> None:
    assert _module_exists(COMMANDS[name][0]), f"gpudash {name}: module {COMMANDS[name][0]} is missing"
    result = CliRunner().invoke(cli, [name, "--help"])
    assert result.exit_code == 0, result.output
    assert "Example" in result.output, f"gpudash {name} --help shows no example"


def test_missing_thresholds_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    result = gpudash("dashboards", "--definitions", str(tmp_path), cwd=tmp_path)
    assert result.code == 2
    assert result.err == "gpudash: thresholds.yaml: file not found (pass --thresholds PATH or run from the " \
                            "repository root)\n"
    assert "Traceback" not in result.err + result.out


def test_broken_thresholds_writes_nothing(repo_copy: Path) -> None:
    (repo_copy / "thresholds.yaml").write_text((repo_copy / "thresholds.yaml").read_text()
                                               .replace("warning_ratio: 0.90", "warning_ratio: lots", 1))
    out = repo_copy / "out"
    result = gpudash("dashboards", "--out", str(out), cwd=repo_copy)
    assert result.code == 2
    assert result.err.count("\n") == 1
    assert "thresholds.yaml: memory.warning_ratio: expected a number between 0 and 1, got 'lots'" in result.err
    assert not out.exists()


def test_out_pointing_at_a_file_is_one_line_and_leaves_it_alone(repo_copy: Path) -> None:
    target = repo_copy / "notes.txt"
    target.write_text("mine\n")
    result = gpudash("dashboards", "--out", str(target), cwd=repo_copy)
    assert result.code == 2, result.err
    assert result.err == f"gpudash: {target}: cannot write there: not a directory\n"
    assert target.read_text() == "mine\n"


def test_out_keeps_files_gpudash_did_not_write(repo_copy: Path) -> None:
    out = repo_copy / "provisioning"
    out.mkdir()
    (out / "package.json").write_text("{}\n")
    result = gpudash("dashboards", "--out", str(out), cwd=repo_copy)
    assert result.code == 0, result.err
    assert (out / "package.json").read_text() == "{}\n"
    assert f"kept {out / 'package.json'}: not written by gpudash" in result.out
    assert f"{out} had no record of the files gpudash wrote, so nothing was removed" in result.out
    again = gpudash("dashboards", "--out", str(out), cwd=repo_copy)
    assert again.out.splitlines() == [f"kept {out / 'package.json'}: not written by gpudash",
                                         f"5 dashboards in {out} already up to date"]
    assert gpudash("dashboards", "--out", str(out), "--check", cwd=repo_copy).code == 0


def test_version() -> None:
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0 and "gpudash" in result.output


def test_a_command_exit_code_reaches_the_shell() -> None:
    # click returns (rather than raises) ctx.exit(n) outside standalone mode; main() must pass it on.
    import click

    from gpudash import cli as cli_module

    @click.command("exit-three")
    @click.pass_context
    def exit_three(ctx: click.Context) -> None:
        ctx.exit(3)

    cli_module.cli.add_command(exit_three)
    try:
        with pytest.raises(SystemExit) as info:
            cli_module.main(["exit-three"])
        assert info.value.code == 3
    finally:
        cli_module.cli.commands.pop("exit-three")


ERRORS = [(ConfigError, 2), (UsageError, 2), (OutputError, 2), (ExporterError, 2), (StaleOutputError, 1),
          (CheckFailed, 1), (DriftError, 3), (RemoteError, 4)]


@pytest.fixture
def raising() -> Iterator[Callable[[BaseException], None]]:
    """Adds a `fail` command that raises the exception given."""
    import click

    raised: list[BaseException] = []

    @click.command("fail")
    def fail() -> None:
        raise raised[0]

    cli.add_command(fail)
    try:
        yield raised.append
    finally:
        cli.commands.pop("fail")


@pytest.mark.parametrize(("kind", "code"), ERRORS, ids=[kind.__name__ for kind, _ in ERRORS])
def test_a_gpudash_error_is_one_line_and_its_exit_code(kind: type[GpudashError], code: int, raising: Any,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    raising(kind("Grafana said no\nand then more"))
    result = CliRunner().invoke(cli, ["fail"])
    assert (result.exit_code, result.stdout, result.stderr) == (code, "", "gpudash: Grafana said no and then more\n")
    with pytest.raises(SystemExit) as info:
        main(["fail"])
    assert info.value.code == code
    assert capsys.readouterr() == ("", "gpudash: Grafana said no and then more\n")


def test_ctrl_c_is_aborted_and_130(raising: Any, capsys: pytest.CaptureFixture[str]) -> None:
    raising(KeyboardInterrupt())
    with pytest.raises(SystemExit) as info:
        main(["fail"])
    assert info.value.code == 130
    assert capsys.readouterr().err == "\ngpudash: aborted\n"


@pytest.mark.parametrize(("argv", "line"), [
    (["dashboards", "--bogus"], "gpudash: dashboards: No such option '--bogus'. Did you mean '--out'? "
                                "(see 'gpudash dashboards --help')\n"),
    (["rules", "--out"], "gpudash: rules: Option '--out' requires an argument. (see 'gpudash rules --help')\n"),
    (["rulez"], "gpudash: No such command 'rulez'. (see 'gpudash --help')\n"),
])
def test_click_usage_errors_are_one_line_naming_the_command_and_its_help(
        argv: list[str], line: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert capsys.readouterr().err == line


def test_a_directory_given_for_thresholds_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["rules", "--thresholds", str(tmp_path)])
    assert info.value.code == 2
    assert capsys.readouterr().err == (f"gpudash: rules: Invalid value for '--thresholds': File '{tmp_path}' is a "
                                       "directory. (see 'gpudash rules --help')\n")
