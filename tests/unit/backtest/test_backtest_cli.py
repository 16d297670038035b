"""The commands' flags: bad ones are one line and exit 2, before any server is asked."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from gpudash.backtest.cli import backtest_command, parse_time, tune_command
from gpudash.errors import UsageError


def test_times_are_unix_seconds_or_rfc3339() -> None:
    assert parse_time("1700000000", "--start") == 1_700_000_000
    assert parse_time("2026-11-30T12:00:00Z", "--start") == parse_time("2026-11-30T12:00:00+00:00", "--start")
    with pytest.raises(UsageError, match="--end 'tomorrow'"):
        parse_time("tomorrow", "--end")


@pytest.mark.parametrize(("args", "message"), [
    (["--start", "100"], "--start and --end go together"),
    (["--start", "200", "--end", "100"], "is not after --start"),
    (["--since", "a week"], "--since 'a week'"),
])
def test_bad_flags_are_one_line_and_exit_2(args: list[str], message: str) -> None:
    result = CliRunner().invoke(backtest_command, ["--prometheus", "http://127.0.0.1:1", *args])
    assert result.exit_code == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_help_teaches_with_examples() -> None:
    for command in (backtest_command, tune_command):
        text = CliRunner().invoke(command, ["--help"]).output
        assert "Examples:" in text and "--prometheus" in text
