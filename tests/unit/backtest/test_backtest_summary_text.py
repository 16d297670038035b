"""Counting and printing a backtest: rows per alert and severity, the side-by-side table, JSON."""

from __future__ import annotations

import json

from gpudash.backtest.alert_state import alert_labels
from gpudash.backtest.engine import Incident
from gpudash.backtest.notify import Notification
from gpudash.backtest.summary import summarize
from gpudash.backtest.summary_text import as_json, render, render_compare

KEYS = [("Hot", "warning"), ("Hot", "critical"), ("Down", "critical")]


def incident(alert: str, severity: str, node: str, gpu: str, start: float, end: float) -> Incident:
    labels = alert_labels({"instance": node, "gpu": gpu}, {"severity": severity}, alert)
    return Incident(alert, severity, labels, start, end)


def sample() -> tuple[list[Incident], list[Notification]]:
    found = [incident("Hot", "warning", "n1", "0", 0, 585), incident("Hot", "warning", "n1", "0", 1200, 1200),
             incident("Hot", "warning", "n2", "3", 0, 0)]
    sent = [Notification("digest", "r", 600, (found[0].labels, found[2].labels), ())]
    return found, sent


def test_rows_count_incidents_time_firing_and_top_gpus() -> None:
    found, sent = sample()
    summary = summarize(found, sent, 0, 3600, 15, KEYS)
    hot = summary.row("Hot", "warning")
    assert hot is not None
    assert (hot.incidents, hot.notifications, hot.firing_s) == (3, 1, 600 + 15 + 15)
    assert hot.top_gpus[0] == ("n1 gpu 0", 2) and hot.top_nodes == (("n1", 2), ("n2", 1))
    assert [(r.alert, r.severity, r.incidents) for r in summary.rows][1:] == [("Hot", "critical", 0),
                                                                             ("Down", "critical", 0)]
    assert summary.notifications_by_receiver == {"digest": 1}
    text = render(summary)
    assert "n1 gpu 0 (2)" in text and "3 incidents; about 1 notifications (digest: 1)" in text
    assert json.loads(as_json(summary))["alerts"][0]["incidents"] == 3


def test_compare_marks_what_changed_only() -> None:
    found, sent = sample()
    old = summarize(found, sent, 0, 3600, 15, KEYS)
    new = summarize(found[:1], [], 0, 3600, 15, KEYS)
    table = render_compare(old, new, "thresholds.yaml", "proposed.yaml")
    assert "| Hot | warning | 3 -> 1 | 1 -> 0 | 0.2 h |" in table
    assert "| Down | critical | 0 | 0 | 0.0 h |" in table
    assert "| **total** | | 3 -> 1 | 1 -> 0 | |" in table
