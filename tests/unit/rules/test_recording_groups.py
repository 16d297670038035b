"""The recording rule file's groups: the health ledger's hourly rules in a group of their own, evaluated every
hour, the rest at the site's scrape interval; and the bench's backfill grouping them the same way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from support.paths import ROOT
from support.rule_files import site_file

from bench.fleet_tsdb import rules_file
from gpudash.config.loading import Settings, load_settings
from gpudash.promql.for_settings import promql_for
from gpudash.promql.ledger_recordings import COUNTERS, FLAGS, STOPPED, record_name
from gpudash.promql.recordings import RECORDINGS
from gpudash.repository import GENERATED_DIR, RECORDING_FILE
from gpudash.rules.generated_files import render_all

HOURLY_RECORDS = [record_name(key) for key in (*COUNTERS, *FLAGS)]


def groups(text: str) -> dict[str, dict[str, Any]]:
    return {g["name"]: g for g in yaml.safe_load(text)["groups"]}


def records(group: dict[str, Any]) -> list[str]:
    return [rule["record"] for rule in group["rules"]]


def test_the_ledger_rules_are_evaluated_hourly_in_a_group_of_their_own(settings: Settings) -> None:
    for text in (render_all(settings)[RECORDING_FILE], (ROOT / GENERATED_DIR / RECORDING_FILE).read_text()):
        found = groups(text)
        assert list(found) == ["gpudash-gpu-recording", "gpudash-gpu-ledger"]
        every, ledger = found["gpudash-gpu-recording"], found["gpudash-gpu-ledger"]
        assert (every["interval"], ledger["interval"]) == ("15s", "1h")
        assert records(ledger) == HOURLY_RECORDS
        assert not set(HOURLY_RECORDS) & set(records(every))
        assert STOPPED in records(every)  # it compares with one rule interval ago: not hourly
        # each evaluation records the hour before it: no gate on the time of day
        assert not [rule["record"] for rule in ledger["rules"] if "time()" in rule["expr"]]
        assert all(" offset 1h" in rule["expr"] for rule in ledger["rules"] if rule["record"].endswith("increase"))


def test_the_ledger_group_stays_hourly_whatever_the_scrape_interval(tmp_path: Path, settings: Settings) -> None:
    site = load_settings(ROOT / "thresholds.yaml", site_file(tmp_path, {"scrape": {"interval": "30s"}}))
    slow, default = groups(render_all(site)[RECORDING_FILE]), groups(render_all(settings)[RECORDING_FILE])
    assert (slow["gpudash-gpu-recording"]["interval"], slow["gpudash-gpu-ledger"]["interval"]) == ("30s", "1h")
    assert slow["gpudash-gpu-ledger"]["rules"] == default["gpudash-gpu-ledger"]["rules"]


def test_another_profile_has_in_its_hourly_group_the_ledger_rules_it_can_fill(tmp_path: Path) -> None:
    site = load_settings(ROOT / "thresholds.yaml", site_file(tmp_path, {"profile": "nvidia_smi"}))
    found = groups(render_all(site)[RECORDING_FILE])
    q = promql_for(site, recorded=False)
    fillable = [rec.record for rec in RECORDINGS if rec.hourly and rec.possible(q)]
    assert 0 < len(fillable) < len(HOURLY_RECORDS)  # nvidia-smi's exporter publishes some of the counters
    assert records(found["gpudash-gpu-ledger"]) == fillable
    assert not set(HOURLY_RECORDS) & set(records(found["gpudash-gpu-recording"]))


def test_the_bench_backfills_the_ledger_rules_hourly(tmp_path: Path) -> None:
    rules = [("cluster:gpu_count:count", "count(x)"), (HOURLY_RECORDS[0], "y"), (STOPPED, "z")]
    rules_file(tmp_path / "r.yml", rules, 15)
    found = groups((tmp_path / "r.yml").read_text())
    assert {name: (g["interval"], records(g)) for name, g in found.items()} == {
        "gpudash-gpu-recording": ("15s", ["cluster:gpu_count:count", STOPPED]),
        "gpudash-gpu-ledger": ("3600s", [HOURLY_RECORDS[0]])}
    rules_file(tmp_path / "r.yml", rules[:1], 15)
    assert list(groups((tmp_path / "r.yml").read_text())) == ["gpudash-gpu-recording"]
