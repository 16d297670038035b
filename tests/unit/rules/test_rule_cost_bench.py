"""bench/rule_cost.py: how much history the rules read, and the order their recordings are backfilled in."""

from __future__ import annotations

from pathlib import Path

import yaml

from bench.rule_cost import LOOKBACK_S, Cost, Rule, core_share, passes, reach_s, read_back, rules_at
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


def test_a_group_weighs_on_the_core_at_its_own_interval() -> None:
    every_15s, hourly = Rule("g", "a", "x", True, 15), Rule("h", "b", "y", True, 3600)
    costs = [Cost(every_15s, 1.5, 0), Cost(hourly, 36.0, 0)]
    # 1.5 s every 15 s and 36 s an hour: 10 % and 1 % of a core
    assert abs(core_share(costs) - 0.11) < 1e-9


def test_the_rules_before_come_from_a_folder_laid_out_as_generated(tmp_path: Path) -> None:
    for path, rule in ((RECORDING_FILE, {"record": "r:x:sum", "expr": "sum(x)"}),
                       (ALERTS_FILE, {"alert": "A", "expr": "x > 1", "labels": {"severity": "warning"}})):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(yaml.safe_dump({"groups": [{"name": "g", "interval": "1h", "rules": [rule]}]}))
    found = rules_at(str(tmp_path), 15)
    assert [(r.name, r.recording, r.interval_s) for r in found] == [
        ("r:x:sum", True, 3600), ("A (severity=warning)", False, 3600)]
