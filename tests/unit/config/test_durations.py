"""Durations: the three spellings (Prometheus, Grafana, fractional seconds), and each caller's own limits."""

from __future__ import annotations

import pytest

from gpudash.check.queries import parse_range
from gpudash.compare.content import canonical
from gpudash.config.durations import (
    MAX_DURATION_SECONDS,
    Duration,
    duration_text,
    grafana_ms,
    parse_duration,
    parse_seconds,
)
from gpudash.errors import ConfigError, UsageError
from gpudash.exporter.cli import _seconds as exporter_interval
from gpudash.exporter.sim.spec import parse_fault

# ------------------------------------------------------------------------------------ Prometheus durations


@pytest.mark.parametrize(("text", "seconds"), [("30s", 30), ("5m", 300), ("1h30m", 5400), ("1d", 86400),
                                               ("1d2h3m4s", 93784), ("90s", 90)])
def test_durations_parse(text: str, seconds: int) -> None:
    assert parse_duration(text).seconds == seconds
    assert str(parse_duration(text)) == text


def test_a_duration_keeps_its_text_without_the_surrounding_space() -> None:
    assert str(parse_duration(" 90s ")) == "90s"


@pytest.mark.parametrize("text", ["-5m", "0s", "5", "5ms", "five minutes", "", "1.5h", "30m1h", "1w"])
def test_bad_durations_are_rejected(text: str) -> None:
    with pytest.raises(ValueError, match=rf"^expected a positive duration such as 5m or 1h, got {text!r}$"):
        parse_duration(text)


# Python's \d and int() take any Unicode decimal digit; Prometheus, Grafana and promtool take 0-9 only.
NON_ASCII_DIGITS = ["\uff12m", "1\u0661m", "\u0968h", "5m\uff13\uff10s", "\U0001d7d0s"]  # fullwidth, Arabic-Indic, ...


@pytest.mark.parametrize("text", NON_ASCII_DIGITS)
def test_a_duration_takes_ascii_digits_only(text: str) -> None:
    with pytest.raises(ValueError, match=rf"^expected a positive duration such as 5m or 1h, got {text!r}$"):
        parse_duration(text)


@pytest.mark.parametrize("text", NON_ASCII_DIGITS)
def test_grafana_intervals_and_seconds_take_ascii_digits_only(text: str) -> None:
    assert grafana_ms(text) is None
    with pytest.raises(ValueError):
        parse_seconds(text, milliseconds=True)


def test_the_longest_duration_is_accepted() -> None:
    assert parse_duration("3650d").seconds == MAX_DURATION_SECONDS == 3650 * 86400
    assert parse_duration("0003649d23h59m60s").seconds == 3650 * 86400


@pytest.mark.parametrize("text", ["3651d", "3650d1s", "1" + "0" * 13 + "s", "9" * 5000 + "s"])
def test_a_duration_over_ten_years_names_the_bound(text: str) -> None:
    with pytest.raises(ValueError, match=r"^expected a duration of at most 3650d \(10 years\), got "):
        parse_duration(text)


def test_durations_compare_by_length_not_text() -> None:
    assert parse_duration("60s") == parse_duration("1m")
    assert parse_duration("59s") < parse_duration("1m") < parse_duration("1h")
    assert Duration(60, "1m").text == "1m"


@pytest.mark.parametrize(("seconds", "text"), [(0, "0s"), (1, "1s"), (450, "7m30s"), (3600, "1h"),
                                               (86400, "1d"), (93784, "1d2h3m4s"), (90061, "1d1h1m1s")])
def test_duration_text_is_prometheus_text(seconds: int, text: str) -> None:
    assert duration_text(seconds) == text


@pytest.mark.parametrize("seconds", [1, 59, 61, 3599, 3601, 86399, 86401, 1234567])
def test_duration_text_reads_back_as_the_same_length(seconds: int) -> None:
    assert parse_duration(duration_text(seconds)).seconds == seconds


# ------------------------------------------------------------------------------------ Grafana intervals


@pytest.mark.parametrize(("text", "ms"), [("500ms", 500), ("5s", 5000), ("2m", 120_000), ("6h", 21_600_000),
                                          ("2d", 172_800_000), ("1w", 604_800_000), ("1M", 2_592_000_000),
                                          ("1y", 31_536_000_000), ("0s", 0)])
def test_grafana_intervals_in_milliseconds(text: str, ms: int) -> None:
    assert grafana_ms(text) == ms


@pytest.mark.parametrize("text", ["", "5", "1h30m", "1.5h", "5 s", " 5s", "5x", "now-6h", "-5s"])
def test_what_is_not_one_grafana_interval_is_none(text: str) -> None:
    assert grafana_ms(text) is None


def test_a_caller_can_narrow_the_grafana_units() -> None:
    units = ("s", "m", "h", "d", "w")
    assert grafana_ms("1w", units) == 604_800_000
    assert [grafana_ms(t, units) for t in ("500ms", "1M", "1y")] == [None, None, None]


@pytest.mark.parametrize(("text", "seconds"), [("now-6h", 21600), ("30m", 1800), (" now-2d ", 172800),
                                               ("now-1w", 604800), ("15s", 15)])
def test_a_time_range_is_a_grafana_interval_in_whole_units(text: str, seconds: int) -> None:
    assert parse_range(text) == seconds


@pytest.mark.parametrize("text", ["now-500ms", "now-1M", "1y", "now-1h30m", "now-now-6h", "now- 6h", "6"])
def test_a_bad_time_range_says_what_is_expected(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_range(text)
    assert info.value.format_message() == f"time range {text!r}: expected something like 6h, 30m or now-6h"


@pytest.mark.parametrize(("refresh", "canonical_refresh"), [
    ("1s", "5s"), ("4999ms", "5s"), (" 2s ", "5s"), ("5000ms", "5000ms"), ("5s", "5s"), ("1m", "1m"),
    ("1y", "1y"), ("", ""), ("auto", "auto"), ("1h30m", "1h30m"), (False, ""),  # schema 40: a string
])
def test_a_refresh_below_five_seconds_compares_as_five(refresh: object, canonical_refresh: object) -> None:
    assert canonical({"refresh": refresh})["refresh"] == canonical_refresh


# ------------------------------------------------------------------------------------ fractional seconds


@pytest.mark.parametrize(("text", "seconds"), [("90", 90.0), ("90s", 90.0), ("2.5s", 2.5), ("5m", 300.0),
                                               ("1h30m", 5400.0), ("1.5h", 5400.0), ("1m30", 90.0),
                                               (" 10m ", 600.0), ("0", 0.0)])
def test_fractional_seconds(text: str, seconds: float) -> None:
    assert parse_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", " ", "s", "500ms", "1d", "5 m", "-1s", "1e3", ".5s", "30m1h"])
def test_bad_fractional_seconds_raise_with_the_text(text: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_seconds(text)
    assert info.value.args == (text,)


def test_milliseconds_only_when_asked() -> None:
    assert parse_seconds("500ms", milliseconds=True) == 0.5
    assert parse_seconds(" 2.5ms ", milliseconds=True) == 0.0025
    assert parse_seconds("1s", milliseconds=True) == 1.0
    with pytest.raises(ValueError):
        parse_seconds("1sms", milliseconds=True)


@pytest.mark.parametrize(("text", "seconds"), [("1s", 1.0), ("200ms", 0.2), ("50ms", 0.05), ("0.5", 0.5),
                                               ("1m", 60.0)])
def test_exporter_intervals(text: str, seconds: float) -> None:
    assert exporter_interval("--interval", text) == seconds


@pytest.mark.parametrize(("text", "message"), [
    ("fast", "--interval 'fast': expected a duration such as 1s, 500ms or 30s"),
    ("1d", "--interval '1d': expected a duration such as 1s, 500ms or 30s"),
    ("49ms", "--interval '49ms': must be at least 50ms"),
    ("0", "--interval '0': must be at least 50ms"),
])
def test_bad_exporter_intervals_say_why(text: str, message: str) -> None:
    with pytest.raises(UsageError) as info:
        exporter_interval("--interval", text)
    assert info.value.format_message() == message


def test_fault_times_are_fractional_seconds() -> None:
    _, fault = parse_fault("5=thermal:93@10m+1.5m")
    assert (fault.start, fault.duration, fault.arg) == (600.0, 90.0, 93.0)
    _, leak = parse_fault("2=leak:1h@90")
    assert (leak.start, leak.duration, leak.arg) == (90.0, None, 3600.0)


def test_a_bad_fault_time_names_it() -> None:
    with pytest.raises(UsageError) as info:
        parse_fault("4=lost@500ms")
    assert info.value.format_message().startswith("--fault '4=lost@500ms': bad number or time '500ms'; expected ")
