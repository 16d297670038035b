"""The for / keep_firing_for state machine, evaluation by evaluation, as Prometheus's rules manager runs it."""

from __future__ import annotations

from collections.abc import Sequence

from gpudash.backtest.alert_state import AlertMachine, alert_labels

A = alert_labels({"__name__": "x", "gpu": "0"}, {"severity": "warning"}, "Hot")


def run(machine: AlertMachine, present: Sequence[int], step: int = 15) -> list[list[float]]:
    for i, here in enumerate(present):
        machine.evaluate(i * step, [A] if here else [])
    return machine.intervals.get(A, [])


def test_labels_drop_the_name_and_add_the_rule_labels_and_alertname() -> None:
    assert dict(A) == {"gpu": "0", "severity": "warning", "alertname": "Hot"}
    # the rule's labels win over the series' own
    assert dict(alert_labels({"severity": "x"}, {"severity": "critical"}, "A"))["severity"] == "critical"


def test_without_for_it_fires_at_the_first_evaluation_that_returns_it() -> None:
    assert run(AlertMachine(), [0, 1, 1, 0, 1]) == [[15, 30], [60, 60]]


def test_for_counts_from_the_first_evaluation_and_fires_when_reached() -> None:
    # for 30 s: active at 15, pending at 30, firing at 45 (45 - 15 >= 30)
    assert run(AlertMachine(for_s=30), [0, 1, 1, 1, 1, 0]) == [[45, 60]]


def test_a_gap_of_one_evaluation_resets_a_pending_alert() -> None:
    assert run(AlertMachine(for_s=30), [1, 1, 0, 1, 1, 1]) == [[75, 75]]


def test_a_firing_alert_resolves_at_the_first_evaluation_without_it() -> None:
    machine = AlertMachine(for_s=15)
    assert run(machine, [1, 1, 1, 0, 1, 1]) == [[15, 30], [75, 75]]
    assert machine.firing_at() == {A}


def test_keep_firing_for_bridges_a_short_gap_and_restarts_its_count() -> None:
    # keep 30 s: missing at 45 and 60 (< 30 s since 45) keeps firing; back at 75 clears the count, so the
    # next gap counts from 90 again: firing at 90 and 105, resolved at 120 (30 s since 90 is not < 30 s)
    assert run(AlertMachine(keep_firing_for_s=30), [1, 1, 1, 0, 0, 1, 0, 0, 0, 0]) == [[0, 105]]


def test_keep_firing_for_ends_once_it_has_passed() -> None:
    assert run(AlertMachine(keep_firing_for_s=15), [1, 0, 0, 0, 1]) == [[0, 15], [60, 60]]


def test_a_pending_alert_is_not_kept_by_keep_firing_for() -> None:
    assert run(AlertMachine(for_s=60, keep_firing_for_s=600), [1, 1, 0, 1]) == []
