"""bench/rule_cost.py: how much history the rules read, and the order their recordings are backfilled in."""

from __future__ import annotations

from pathlib import Path

import yaml

from bench.rule_cost import LOOKBACK_S, Cost, Rule, lines, passes, reach_s, read_back, rules_at, runs_out_near
from gpudash.repository import ALERTS_FILE, RECORDING_FILE


def test_reach_is_each_range_plus_its_own_offset() -> None:
    assert reach_s("max_over_time(x[1h]) < 5 and on (gpu) x offset 1h") == 3600 + LOOKBACK_S
    assert reach_s("min_over_time(r[5m] offset 10m) > 0 and y[20m:15s]") == 20 * 60
    assert reach_s("up == 0") == LOOKBACK_S


def test_a_recording_is_backfilled_after_the_ones_it_reads() -> None:
    rules = [("ratio", "used / (used + free)"), ("full", "max by (gpu) (ratio) > 0.9"), ("count", "count(x)"),
             ("odd", "full and on (gpu) count")]
    assert passes(rules) == [[rules[0], rules[2]], [rules[1]], [rules[3]]]


def test_a_recording_is_backfilled_as_far_back_as_its_readers_read() -> None:
    def rule(name: str, expr: str, recording: bool = True) -> Rule:
        return Rule("g", name, expr, recording, 15)

    ratio, departure, median, alone = (rule("ratio", "used / total"), rule("dep", "x - avg_over_time(med[5m])"),
                                       rule("med", "quantile(0.5, x)"), rule("sum", "sum(x)"))
    alerts = [rule("Leak", "predict_linear(ratio[1h], 60) > 1", False), rule("Odd", "abs(dep) > 20", False)]
    need = read_back([ratio, departure, median, alone], [ratio, departure, median, alone, *alerts])
    assert need == {"ratio": 3600, "dep": LOOKBACK_S, "med": 300 + LOOKBACK_S, "sum": 0}


def test_the_rules_before_come_from_a_folder_laid_out_as_generated(tmp_path: Path) -> None:
    for path, rule in ((RECORDING_FILE, {"record": "r:x:sum", "expr": "sum(x)"}),
                       (ALERTS_FILE, {"alert": "A", "expr": "x > 1", "labels": {"severity": "warning"}})):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(yaml.safe_dump({"groups": [{"name": "g", "interval": "1h", "rules": [rule]}]}))
    found = rules_at(str(tmp_path), 15)
    assert [(r.name, r.recording, r.interval_s) for r in found] == [
        ("r:x:sum", True, 3600), ("A (severity=warning)", False, 3600)]


def test_the_share_of_a_core_counts_each_rule_at_its_own_groups_interval() -> None:
    every, hourly = Rule("gpudash-gpu-recording", "a", "x", True, 15), Rule("gpudash-gpu-ledger", "b", "y", True, 3600)
    costs = [Cost(every, 1.5, 1), Cost(hourly, 36.0, 1)]
    out = lines({8192: (costs, {"history_s": 3600}, (0.1, 0.2), [], [])}, "a machine", 3, "cmd")
    (summary,) = [line for line in out if line.startswith("At 8,192 GPUs")]
    # 1.5 s every 15 s and 36 s every hour: 10% and 1% of one core
    assert "takes 37.50 s. Each group at its own interval, the rules take 1.65 s of every 15 s: 11.0% of one core" \
        in summary


def test_each_group_runs_out_of_its_interval_at_its_own_size() -> None:
    """Groups are evaluated side by side: each group's own cost against its own interval, not the sum."""
    aggregates = Rule("gpudash-gpu-recording", "a", "x", True, 15)
    states = Rule("gpudash-gpu-states", "b", "y", True, 15)
    hourly = Rule("gpudash-gpu-ledger", "c", "z", True, 3600)
    costs = [Cost(aggregates, 2.0, 1), Cost(aggregates, 1.0, 1), Cost(states, 5.0, 1), Cost(hourly, 36.0, 1)]
    assert runs_out_near(costs, 8192) == {"gpudash-gpu-recording": 40960, "gpudash-gpu-states": 24576,
                                          "gpudash-gpu-ledger": 819200}
    out = lines({8192: (costs, {"history_s": 3600}, (0.1, 0.2), [], [])}, "a machine", 3, "cmd")
    (total,) = [line for line in out if line.startswith("| **every rule**")]
    assert total.endswith("| **24,576** |")  # the first group to run out
    assert any("the first group to get there does near 24,576 GPUs." in line for line in out)
    # a group the rules before did not have reads "-" in their columns, not a cost of 0
    before = [Cost(Rule("gpudash-gpu-recording", "a", "x", True, 15), 6.0, 1)]
    out = lines({8192: (costs, {"history_s": 3600}, (0.1, 0.2), before, [])}, "a machine", 3, "cmd", "abc")
    (row,) = [line for line in out if line.startswith("| gpudash-gpu-states |")]
    assert row == "| gpudash-gpu-states | 1 / 0 | 15 s | 5,000 | - | 24,576 / - |"
    (row,) = [line for line in out if line.startswith("| gpudash-gpu-recording |")]
    assert row == "| gpudash-gpu-recording | 2 / 1 | 15 s | 3,000 | 6,000 | 40,960 / 20,480 |"


def test_the_fleet_report_counts_the_hourly_recordings_once_an_hour() -> None:
    from bench.fleet_report import rule_lines

    costs = {"cluster:gpu_count:count": 0.15, "cluster_instance_gpu_uuid:gpu_ecc_dbe_vol:hourly_increase": 3.6}
    (row,) = [line for line in rule_lines({1024: costs}) if line.startswith("| 1,024")]
    assert row.split(" | ")[4] == "1.1%"  # 0.15 s every 15 s and 3.6 s every hour


def test_the_alerts_floor_counts_the_signals_the_alerts_read_through_recordings() -> None:
    from bench.rule_cost import alert_signals

    chained = [Rule("g", "r:b", "max(DCGM_FI_DEV_GPU_TEMP)", True, 15),
               Rule("g", "r:a", "r:b > on() group_left avg(DCGM_FI_DEV_POWER_USAGE)", True, 15),
               Rule("g", "r:dashboard_only", "sum(DCGM_FI_PROF_PCIE_TX_BYTES)", True, 15),
               Rule("a", "Hot (severity=warning)", "r:a > 1 and DCGM_FI_DEV_XID_ERRORS > 0", False, 15)]
    assert alert_signals(chained) == {"DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_XID_ERRORS"}
    floor = [Cost(Rule("floor", name, f"count({name})", True, 15), seconds, 1) for name, seconds in
             [("DCGM_FI_DEV_GPU_TEMP", 0.07), ("DCGM_FI_DEV_POWER_USAGE", 0.08), ("DCGM_FI_DEV_XID_ERRORS", 0.05),
              ("DCGM_FI_PROF_PCIE_TX_BYTES", 0.5)]]
    costs = [Cost(rule, 0.1, 1) for rule in chained]
    out = lines({8192: (costs, {"history_s": 3600}, (0.1, 0.2), [], floor)}, "a machine", 3, "cmd")
    (line,) = [line for line in out if line.startswith("The floor:")]
    assert "each of the 4 signals the rules read took 0.70 s" in line
    assert "the 3 signals the alerting rules read, directly or through the recordings they read, took 0.20 s" in line



def test_the_report_names_the_prometheus_that_answered() -> None:
    from bench.fleet_tsdb import version_named

    printed = "prometheus, version 3.5.3+ds1 (branch: debian/sid, revision: 3.5.3+ds1-6)\n  build user: x\n"
    assert version_named(printed) == "Prometheus 3.5.3+ds1"
    assert version_named("") == "Prometheus (its version unknown)"
