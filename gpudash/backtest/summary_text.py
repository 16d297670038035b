"""Printing a backtest: a table per run, two runs side by side (`--compare`), and JSON for machines."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from gpudash.backtest.summary import Summary


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h"


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _top(pairs: tuple[tuple[str, int], ...], count: int = 3) -> str:
    return ", ".join(f"{name} ({n})" for name, n in pairs[:count]) or "-"


def render(summary: Summary, title: str = "") -> str:
    head = f"{title}: " if title else ""
    lines = [f"{head}{_when(summary.start)} to {_when(summary.end)}, evaluated every {summary.step} s",
             "",
             f"{'alert':<26} {'severity':<9} {'incidents':>9} {'notified':>8} {'firing':>9}  most incidents"]
    for r in summary.rows:
        lines.append(f"{r.alert:<26} {r.severity:<9} {r.incidents:>9} {r.notifications:>8} "
                     f"{_hours(r.firing_s):>9}  {_top(r.top_gpus)}")
    lines.append("")
    receivers = ", ".join(f"{name}: {n}" for name, n in sorted(summary.notifications_by_receiver.items())) or "none"
    lines.append(f"{summary.incidents} incidents; about {summary.notifications} notifications ({receivers})")
    nodes: dict[str, int] = {}
    for r in summary.rows:
        for node, n in r.top_nodes:
            nodes[node] = nodes.get(node, 0) + n
    if nodes:
        top = sorted(nodes.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
        lines.append("nodes with the most incidents: " + ", ".join(f"{k} ({v})" for k, v in top))
    return "\n".join(lines)


def _change(text_a: str, text_b: str) -> str:
    return text_a if text_a == text_b else f"{text_a} -> {text_b}"


def render_compare(old: Summary, new: Summary, old_name: str, new_name: str) -> str:
    """A Markdown table, ready for a pull request's description."""
    lines = [f"Backtest {_when(old.start)} to {_when(old.end)} (every {old.step} s): `{old_name}` -> `{new_name}`",
             "",
             "| alert | severity | incidents | notifications | firing |",
             "|---|---|---|---|---|"]
    keys = list(dict.fromkeys([(r.alert, r.severity) for r in (*old.rows, *new.rows)]))
    for alert, severity in keys:
        a, b = old.row(alert, severity), new.row(alert, severity)
        ai, bi = (a.incidents if a else 0), (b.incidents if b else 0)
        an, bn = (a.notifications if a else 0), (b.notifications if b else 0)
        af, bf = (a.firing_s if a else 0.0), (b.firing_s if b else 0.0)
        lines.append(f"| {alert} | {severity} | {_change(str(ai), str(bi))} | "
                     f"{_change(str(an), str(bn))} | {_change(_hours(af), _hours(bf))} |")
    lines.append(f"| **total** | | {_change(str(old.incidents), str(new.incidents))} | "
                 f"{_change(str(old.notifications), str(new.notifications))}"
                 " | |")
    return "\n".join(lines)


def as_json(summary: Summary, other: Summary | None = None) -> str:
    if other is None:
        return json.dumps(summary.as_dict(), indent=2, sort_keys=True)
    return json.dumps({"old": summary.as_dict(), "new": other.as_dict()}, indent=2, sort_keys=True)
