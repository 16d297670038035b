"""The `for:` / `keep_firing_for` state machine of Prometheus's rules manager (rules/alerting.go), replayed.

At each evaluation of an alerting rule, for each series the expression returns (its labels plus the rule's
labels and `alertname` name one alert):

- an alert not active (never seen, or resolved) becomes *pending*, active since this evaluation;
- a pending alert whose active time has reached `for` becomes *firing* in this same evaluation (with no
  `for`, at once);
- an alert the expression no longer returns is dropped when pending, and resolved when firing, unless
  `keep_firing_for` keeps it firing: it stays firing while less than that has passed since the first
  evaluation that missed it, and a return of the series clears that count.

A series that disappears for one evaluation resets a pending alert: the `for` starts again when it is back.
The machine records, per alert, the evaluation timestamps at which it was firing as closed intervals
[first, last] (ALERTS{alertstate="firing"} had a sample at each evaluation in between).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

Labels = tuple[tuple[str, str], ...]  # sorted (name, value) pairs: one alert's identity


def alert_labels(series: Mapping[str, str], rule_labels: Mapping[str, str], alertname: str) -> Labels:
    """The alert's labels: the series' (without __name__), then the rule's, then alertname, as Prometheus sets them."""
    labels = {k: v for k, v in series.items() if k != "__name__"}
    labels.update(rule_labels)
    labels["alertname"] = alertname
    return tuple(sorted(labels.items()))


@dataclass
class _Active:
    active_at: float
    firing: bool = False
    keep_firing_since: float | None = None


@dataclass
class AlertMachine:
    """One alerting rule's alerts through successive evaluations; feed it every evaluation in order."""

    for_s: float = 0.0
    keep_firing_for_s: float = 0.0
    active: dict[Labels, _Active] = field(default_factory=dict)
    intervals: dict[Labels, list[list[float]]] = field(default_factory=dict)

    def evaluate(self, ts: float, returned: Iterable[Labels]) -> None:
        """One evaluation at `ts`; `returned` are the alerts whose series the expression returned."""
        present = set(returned)
        for labels in present:
            alert = self.active.get(labels)
            if alert is None:
                self.active[labels] = _Active(active_at=ts)
        for labels in list(self.active):
            alert = self.active[labels]
            if labels not in present:
                if not alert.firing:
                    del self.active[labels]  # pending and gone: the `for` starts over
                    continue
                if alert.keep_firing_since is None:
                    alert.keep_firing_since = ts
                if ts - alert.keep_firing_since >= self.keep_firing_for_s:
                    del self.active[labels]  # resolved
                    continue
            else:
                alert.keep_firing_since = None
            if not alert.firing and ts - alert.active_at >= self.for_s:
                alert.firing = True
                self.intervals.setdefault(labels, []).append([ts, ts])  # a new firing episode
            elif alert.firing:
                self.intervals[labels][-1][1] = ts

    def firing_at(self) -> set[Labels]:
        return {labels for labels, alert in self.active.items() if alert.firing}
