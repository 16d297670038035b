"""The alerts' `for:` state at the end of a backfilled past: what Prometheus restores, and nothing it must not."""

from __future__ import annotations

from typing import Any

from gpudash.backtest.rule_set import AlertSpec, RuleSet
from gpudash.check.prometheus_api import TimeRange
from gpudash.stack.alert_for_state import for_state_at_end, replayed_alerts


class Scripted:
    """Answers each rule's range query with its GPUs present at the given evaluation timestamps."""

    def __init__(self, present: dict[str, dict[str, set[int]]]) -> None:
        self.present = present  # expr -> gpu -> timestamps

    def range(self, expr: str, window: TimeRange) -> list[dict[str, Any]]:
        stamps = range(int(window.start), int(window.end) + 1, window.step_s)
        return [{"metric": {"gpu": gpu}, "values": [[t, "1"] for t in stamps if t in at]}
                for gpu, at in self.present.get(expr, {}).items() if any(t in at for t in stamps)]


def _state(text: str) -> dict[str, tuple[float, float]]:
    """labels -> (active since, written at), from ALERTS_FOR_STATE lines."""
    out = {}
    for line in text.splitlines()[:-1]:
        series, value, moment = line.rsplit(" ", 2)
        assert series.startswith("ALERTS_FOR_STATE{")
        out[series.removeprefix("ALERTS_FOR_STATE")] = (float(value), float(moment))
    return out


def test_only_alerts_active_at_the_last_evaluation_are_written_with_when_they_became_active() -> None:
    hot = AlertSpec("Hot", "hot", for_s=180, labels={"severity": "critical"})
    leak = AlertSpec("Leak", "leak", for_s=900, labels={"severity": "warning"})
    server = Scripted({
        "hot": {"5": set(range(300, 1201, 15)),   # firing at the end, active since 300
                "4": set(range(0, 600, 15))},      # fired, then resolved: must not be restored
        "leak": {"2": set(range(0, 301, 15)) | set(range(900, 1201, 15))},  # back at 900: pending again
    })
    state = _state(for_state_at_end(server, [hot, leak], 0, 1200, 15).text())
    assert state == {
        '{alertname="Hot",gpu="5",severity="critical"}': (300.0, 1200.0),
        '{alertname="Leak",gpu="2",severity="warning"}': (900.0, 1200.0),
    }


def test_evaluations_fall_on_multiples_of_the_step_and_nothing_active_writes_nothing() -> None:
    hot = AlertSpec("Hot", "hot", labels={"severity": "warning"})
    server = Scripted({"hot": {"0": {30, 45}}})
    assert len(for_state_at_end(server, [hot], 7, 100, 15)) == 0  # gone at 60, the last evaluation is 90
    state = _state(for_state_at_end(server, [hot], 7, 50, 15).text())
    assert state == {'{alertname="Hot",gpu="0",severity="warning"}': (30.0, 45.0)}


def test_replayed_rules_read_the_recorded_series_as_their_expressions_at_the_replay_step() -> None:
    rules = RuleSet((AlertSpec("Full", "max_over_time(a:b:ratio[5m]) > 0.9", 300),), {"a:b:ratio": "x / y"}, {}, 2)
    assert [a.expr for a in replayed_alerts(rules, 15)] == ["max_over_time((x / y)[5m:15s]) > 0.9"]
