"""Recorded series replaced by the expressions recording them: what the backtest replays and every backfill of the
recording rules evaluates against a history of raw samples only."""

from __future__ import annotations

import pytest
import yaml
from support.paths import ROOT

from gpudash.config.loading import Settings, load_settings
from gpudash.errors import ConfigError
from gpudash.promql.inline import inline, inlined_rule_file, reads_recorded
from gpudash.repository import RECORDING_FILE
from gpudash.rules.generated_files import render_all
from gpudash.rules.recording import LEDGER_GROUP_NAME

REC = {"a:b:ratio": "x / (x + y)"}


@pytest.fixture(scope="module")
def settings() -> Settings:
    return load_settings(ROOT / "thresholds.yaml")


@pytest.mark.parametrize(("expr", "inlined"), [
    ("a:b:ratio > 0.9", "(x / (x + y)) > 0.9"),
    ("min_over_time(a:b:ratio[5m])", "min_over_time((x / (x + y))[5m:15s])"),
    ("min_over_time(a:b:ratio[5m] offset 10m)", "min_over_time((x / (x + y))[5m:15s] offset 10m)"),
    ("max(a:b:ratio offset 20m) > 0.1", "max(last_over_time((x / (x + y))[15s:15s] offset 20m)) > 0.1"),
    ("a:b:ratio_other + a:b:ratio", "a:b:ratio_other + (x / (x + y))"),
])
def test_inline_reads_what_the_recorded_series_would_hold(expr: str, inlined: str) -> None:
    assert inline(expr, REC, 15) == inlined


def test_inline_refuses_a_recorded_selector_with_matchers() -> None:
    with pytest.raises(ConfigError, match="a:b:ratio"):
        inline('a:b:ratio{gpu="0"}', REC, 15)


def test_a_series_read_over_a_range_is_stepped_at_the_interval_of_the_group_recording_it() -> None:
    recordings = {"fast:x:sum": "sum(x)", "hourly:x:max": "max(fast:x:sum)"}
    assert inline("max_over_time(hourly:x:max[1d]) + fast:x:sum offset 1m", recordings, 15, {"hourly:x:max": 3600}) \
        == "max_over_time((max((sum(x))))[1d:3600s]) + last_over_time((sum(x))[15s:15s] offset 1m)"


def test_recordings_reading_each_other_in_a_cycle_are_refused() -> None:
    with pytest.raises(ConfigError, match="cycle"):
        inline("a:x:sum", {"a:x:sum": "sum(b:x:sum)", "b:x:sum": "sum(a:x:sum)"}, 15)


def test_a_rule_file_is_rewritten_rule_by_rule_each_group_at_its_interval() -> None:
    text = yaml.safe_dump({"groups": [
        {"name": "fast", "interval": "30s", "rules": [{"record": "r:x:sum", "expr": "sum(x)"},
                                                       {"record": "r:x:max", "expr": "max_over_time(r:x:sum[5m])"}]},
        {"name": "default", "rules": [{"record": "r:x:min", "expr": "min_over_time(r:x:max[1h])"},
                                      {"record": "r:x:two", "expr": "r:x:min * 2"}]},
    ]}, sort_keys=False)
    groups = yaml.safe_load(inlined_rule_file(text, 60))["groups"]
    assert [g["name"] for g in groups] == ["fast", "default"] and groups[0]["interval"] == "30s"
    assert [(r["record"], r["expr"]) for g in groups for r in g["rules"]] == [
        ("r:x:sum", "sum(x)"),
        ("r:x:max", "max_over_time((sum(x))[5m:30s])"),
        ("r:x:min", "min_over_time((max_over_time((sum(x))[5m:30s]))[1h:30s])"),
        ("r:x:two", "(min_over_time((max_over_time((sum(x))[5m:30s]))[1h:30s])) * 2"),
    ]


def test_the_rendered_rule_file_inlined_reads_no_recorded_series(settings: Settings) -> None:
    text = render_all(settings)[RECORDING_FILE]
    before = [r for g in yaml.safe_load(text)["groups"] for r in g["rules"]]
    after = [r for g in yaml.safe_load(inlined_rule_file(text, 15))["groups"] for r in g["rules"]]
    recordings = {r["record"]: r["expr"] for r in before}
    readers = {r["record"] for r in before if reads_recorded(r["expr"], recordings)}
    assert readers, "some recording reads another"
    assert [r["record"] for r in after] == [r["record"] for r in before]
    assert [r["record"] for r in after if reads_recorded(r["expr"], recordings)] == []
    assert [r["record"] for r in after if r["expr"] != recordings[r["record"]]] == \
        [r["record"] for r in before if r["record"] in readers]


def test_no_recording_reads_an_hourly_one_nor_does_an_hourly_one_read_a_recording(settings: Settings) -> None:
    """So every series inlined is stepped at the scrape interval, the one group interval a reader of it has; the
    per-group step is there for the day one does."""
    groups = yaml.safe_load(render_all(settings)[RECORDING_FILE])["groups"]
    hourly = {r["record"]: r["expr"] for g in groups if g["name"] == LEDGER_GROUP_NAME for r in g["rules"]}
    every = {r["record"]: r["expr"] for g in groups for r in g["rules"]}
    assert hourly
    assert [r["record"] for g in groups for r in g["rules"] if reads_recorded(r["expr"], hourly)] == []
    assert [name for name, expr in hourly.items() if reads_recorded(expr, every)] == []
