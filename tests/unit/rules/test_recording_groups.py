"""The recording rule file's groups: the rules evaluated at the site's scrape interval split into groups that
Prometheus evaluates side by side, each reading only what its own group recorded before; the health ledger's
hourly rules in a group of their own, evaluated every hour; and the bench's backfill grouping them the same way."""

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
from gpudash.promql.scanner import metric_names
from gpudash.repository import ALERTS_FILE, GENERATED_DIR, RECORDING_FILE
from gpudash.rules.generated_files import GROUP_EVAL_ORDER, render_all
from gpudash.rules.recording import ALL_GROUP_NAMES, GROUP_NAMES, LEDGER_GROUP_NAME

HOURLY_RECORDS = [record_name(key) for key in (*COUNTERS, *FLAGS)]


def groups(text: str) -> dict[str, dict[str, Any]]:
    return {g["name"]: g for g in yaml.safe_load(text)["groups"]}


def records(group: dict[str, Any]) -> list[str]:
    return [rule["record"] for rule in group["rules"]]


def test_the_ledger_rules_are_evaluated_hourly_in_a_group_of_their_own(settings: Settings) -> None:
    for text in (render_all(settings)[RECORDING_FILE], (ROOT / GENERATED_DIR / RECORDING_FILE).read_text()):
        found = groups(text)
        assert list(found) == ["gpudash-gpu-recording", "gpudash-gpu-job-states", "gpudash-gpu-health-states",
                               "gpudash-fabric-recording", "gpudash-gpu-ledger"]
        ledger = found["gpudash-gpu-ledger"]
        every = [rule for name, g in found.items() if name != LEDGER_GROUP_NAME for rule in g["rules"]]
        assert {g["interval"] for name, g in found.items() if name != LEDGER_GROUP_NAME} == {"15s"}
        assert ledger["interval"] == "1h"
        assert records(ledger) == HOURLY_RECORDS
        assert not set(HOURLY_RECORDS) & {rule["record"] for rule in every}
        # it compares with one rule interval ago: not hourly
        assert STOPPED in records(found["gpudash-gpu-health-states"])
        # each evaluation records the hour before it: no gate on the time of day
        assert not [rule["record"] for rule in ledger["rules"] if "time()" in rule["expr"]]
        assert all(" offset 1h" in rule["expr"] for rule in ledger["rules"] if rule["record"].endswith("increase"))


def test_the_ledger_group_stays_hourly_whatever_the_scrape_interval(tmp_path: Path, settings: Settings) -> None:
    site = load_settings(ROOT / "thresholds.yaml", site_file(tmp_path, {"scrape": {"interval": "30s"}}))
    slow, default = groups(render_all(site)[RECORDING_FILE]), groups(render_all(settings)[RECORDING_FILE])
    assert {name: g["interval"] for name, g in slow.items()} == {**dict.fromkeys(GROUP_NAMES.values(), "30s"),
                                                                  "gpudash-gpu-ledger": "1h"}
    assert slow["gpudash-gpu-ledger"]["rules"] == default["gpudash-gpu-ledger"]["rules"]


def test_another_profile_has_in_its_hourly_group_the_ledger_rules_it_can_fill(tmp_path: Path) -> None:
    site = load_settings(ROOT / "thresholds.yaml", site_file(tmp_path, {"profile": "nvidia_smi"}))
    found = groups(render_all(site)[RECORDING_FILE])
    q = promql_for(site, recorded=False)
    fillable = [rec.record for rec in RECORDINGS if rec.hourly and rec.possible(q)]
    assert 0 < len(fillable) < len(HOURLY_RECORDS)  # nvidia-smi's exporter publishes some of the counters
    assert records(found["gpudash-gpu-ledger"]) == fillable
    assert not set(HOURLY_RECORDS) & {r for name in GROUP_NAMES.values() if name in found for r in records(found[name])}


def test_a_recording_reads_only_what_its_own_group_recorded_before_it(settings: Settings, tmp_path: Path) -> None:
    """Groups are evaluated side by side: a recording reading another group's would read its last evaluation,
    a rule interval late, where in one group it reads this evaluation's."""
    smi = load_settings(ROOT / "thresholds.yaml", site_file(tmp_path, {"profile": "nvidia_smi"}))
    for site in (settings, smi):
        found = groups(render_all(site)[RECORDING_FILE])
        assert list(found) == [name for name in ALL_GROUP_NAMES if name in found]
        home = {rule["record"]: name for name, g in found.items() for rule in g["rules"]}
        for name, group in found.items():
            if name == LEDGER_GROUP_NAME:
                continue  # hourly: what it reads is at most a rule interval old, of an hour it records
            before: set[str] = set()
            for rule in group["rules"]:
                read = {n for n in metric_names(rule["expr"]) if n in home and n != rule["record"]}
                assert read <= before, (name, rule["record"], {n: home[n] for n in read - before})
                before.add(rule["record"])


def test_each_group_holds_the_recordings_of_its_kind(settings: Settings) -> None:
    found = groups(render_all(settings)[RECORDING_FILE])
    q = promql_for(settings, recorded=False)
    for part, name in GROUP_NAMES.items():
        wanted = [rec.record for rec in RECORDINGS if rec.group == part and not rec.hourly and rec.possible(q)]
        assert wanted and records(found[name]) == wanted
    # the dashboards' aggregates apart from the per-GPU states the alerts read
    assert "cluster:gpu_count:count" in records(found["gpudash-gpu-recording"])
    assert "cluster_instance_gpu:gpu_utilization:busy_at_idle_power" in records(found["gpudash-gpu-job-states"])
    assert "cluster_instance_gpu_xid:gpu_xid_errors:new" in records(found["gpudash-gpu-health-states"])
    assert "cluster_instance_gpu:infiniband_port:info" in records(found["gpudash-fabric-recording"])


def test_the_bench_backfills_the_ledger_rules_hourly(tmp_path: Path) -> None:
    rules = [("cluster:gpu_count:count", "count(x)"), (HOURLY_RECORDS[0], "y"), (STOPPED, "z")]
    rules_file(tmp_path / "r.yml", rules, 15)
    found = groups((tmp_path / "r.yml").read_text())
    assert {name: (g["interval"], records(g)) for name, g in found.items()} == {
        "gpudash-gpu-recording": ("15s", ["cluster:gpu_count:count", STOPPED]),
        "gpudash-gpu-ledger": ("3600s", [HOURLY_RECORDS[0]])}
    rules_file(tmp_path / "r.yml", rules[:1], 15)
    assert list(groups((tmp_path / "r.yml").read_text())) == ["gpudash-gpu-recording"]


def test_the_evaluation_order_is_the_groups_of_both_files_recordings_first(settings: Settings) -> None:
    """What promtool cases give as group_eval_order: every recording group before any alert group."""
    files = render_all(settings)
    assert list(GROUP_EVAL_ORDER) == [*groups(files[RECORDING_FILE]), *groups(files[ALERTS_FILE])]
