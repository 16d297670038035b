"""Counting a backtest: per alert and severity, incidents, estimated notifications, time firing, top GPUs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gpudash.backtest.engine import Incident
from gpudash.backtest.notify import Notification

TOP = 5


@dataclass(frozen=True)
class AlertSummary:
    alert: str
    severity: str
    incidents: int
    notifications: int
    firing_s: float
    top_gpus: tuple[tuple[str, int], ...]
    top_nodes: tuple[tuple[str, int], ...]

    def as_dict(self) -> dict[str, Any]:
        return {"alert": self.alert, "severity": self.severity, "incidents": self.incidents,
                "notifications": self.notifications, "firing_seconds": self.firing_s,
                "top_gpus": [{"gpu": g, "incidents": n} for g, n in self.top_gpus],
                "top_nodes": [{"node": g, "incidents": n} for g, n in self.top_nodes]}


@dataclass(frozen=True)
class Summary:
    start: float
    end: float
    step: int
    rows: tuple[AlertSummary, ...]
    notifications_by_receiver: dict[str, int] = field(default_factory=dict)

    @property
    def incidents(self) -> int:
        return sum(r.incidents for r in self.rows)

    @property
    def notifications(self) -> int:
        return sum(self.notifications_by_receiver.values())

    def row(self, alert: str, severity: str) -> AlertSummary | None:
        return next((r for r in self.rows if (r.alert, r.severity) == (alert, severity)), None)

    def as_dict(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end, "evaluation_interval_seconds": self.step,
                "incidents": self.incidents, "notifications": self.notifications,
                "notifications_by_receiver": dict(sorted(self.notifications_by_receiver.items())),
                "alerts": [r.as_dict() for r in self.rows]}


def gpu_name(incident: Incident, gpu_label: str = "gpu") -> str:
    node = incident.label("instance")
    gpu = incident.label(gpu_label)
    return f"{node} gpu {gpu}" if gpu else node


def summarize(incidents: Sequence[Incident], notifications: Sequence[Notification], start: float, end: float,
              step: int, rule_keys: Sequence[tuple[str, str]] = ()) -> Summary:
    """One row per alert and severity (every rule's, fired or not, when `rule_keys` lists them)."""
    keys = list(dict.fromkeys([*rule_keys, *((i.alert, i.severity) for i in incidents)]))
    carried: Counter[tuple[str, str]] = Counter()
    for n in notifications:
        for key in {(dict(a)["alertname"], dict(a).get("severity", "")) for a in (*n.firing, *n.resolved)}:
            carried[key] += 1
    rows = []
    for alert, severity in keys:
        mine = [i for i in incidents if (i.alert, i.severity) == (alert, severity)]
        gpus = Counter(gpu_name(i) for i in mine)
        nodes = Counter(i.label("instance") for i in mine)
        firing = sum(min(i.end, end) - max(i.start, start) + step for i in mine)
        rows.append(AlertSummary(alert, severity, len(mine), carried[(alert, severity)], firing,
                                 tuple(gpus.most_common(TOP)), tuple(nodes.most_common(TOP))))
    receivers = Counter(n.receiver for n in notifications)
    return Summary(start, end, step, tuple(rows), dict(receivers))
