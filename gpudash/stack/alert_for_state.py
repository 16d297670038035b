"""The alerts' `for:` state at the end of a backfilled past, as the ALERTS_FOR_STATE series Prometheus restores.

At every evaluation Prometheus's rules manager writes ALERTS_FOR_STATE for each active alert (its value: the
Unix time the alert became active) and, when it starts, reads the last one back to carry each alert's `for:`
on from where it stood (`--rules.alert.for-grace-period` is the least a restored alert then still waits; 0
carries it on exactly). A Prometheus started on a backfilled history finds none, so every alert with a `for:`
would start its wait over. This replays the alerting rules over that past, through the backtest's query
engine and `for:` state machine (gpudash.backtest), and writes the series for the alerts active at its last
evaluation only: backfilled samples carry no staleness marker, so one written for an alert that later
resolved would be read back as if it were still active.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpudash.backtest.alert_state import AlertMachine, alert_labels
from gpudash.backtest.engine import DEFAULT_CHUNK_STEPS, RangeQueries, Stats, chunks, evaluation_times, query_chunk
from gpudash.backtest.rule_set import AlertSpec, RuleSet
from gpudash.escape import label_value
from gpudash.stack.history import OpenMetricsHistory

FOR_STATE = "ALERTS_FOR_STATE"


def replayed_alerts(rules: RuleSet, step: int) -> list[AlertSpec]:
    """The alerting rules as a Prometheus holding only raw samples evaluates them every `step` seconds: each
    recorded series they read inlined (gpudash.backtest.rule_set)."""
    at_step = RuleSet(rules.alerts, rules.recordings, rules.alertmanager, step)
    return [at_step.inlined(alert) for alert in rules.alerts]


def for_state_at_end(client: RangeQueries, alerts: Sequence[AlertSpec], start: float, end: float, step: int,
                     into: OpenMetricsHistory | None = None) -> OpenMetricsHistory:
    """ALERTS_FOR_STATE of every alert active at the last evaluation of `alerts` over [start, end] (evaluated
    at the multiples of `step`), at that evaluation."""
    history = OpenMetricsHistory() if into is None else into
    first, last = evaluation_times(start, end, step)
    stats = Stats()
    for rule in alerts:
        machine = AlertMachine(rule.for_s, rule.keep_firing_for_s)
        for lo, hi in chunks(first, last, step, DEFAULT_CHUNK_STEPS):
            answers = dict(query_chunk(client, rule, lo, hi, step, stats))
            for ts in range(lo, hi + step, step):
                machine.evaluate(ts, [alert_labels(m, rule.labels, rule.alert) for m in answers.get(ts, ())])
        for labels, alert in sorted(machine.active.items()):
            text = ",".join(f'{k}="{label_value(v)}"' for k, v in labels)
            history.add(FOR_STATE, text, float(alert.active_at), last)
    return history
