"""What the demo prints: the check in brief, a fleet summary, alerts as they fire and notifications as they land."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from gpudash.check.judge import GroupResult, Status
from gpudash.check.tables import render_table
from gpudash.config.loading import Settings
from gpudash.errors import RemoteError
from gpudash.promql.for_settings import promql_for
from gpudash.stack.process import PrometheusProcess
from gpudash.stack.servers import WebhookReceiver

FIRING = 'ALERTS{alertstate="firing"}'
PENDING = 'ALERTS{alertstate="pending"}'


def render_brief(results: Sequence[GroupResult], verbose: bool = False) -> str:
    """Per dashboard and rule file: counts by result, then only the rows that are not plainly ok."""
    if verbose:
        return "\n\n".join(render_table(r) for r in results)
    lines = []
    for result in results:
        counts = Counter(r.status for r in result.results)
        parts = ", ".join(f"{n} {s.value.lower()}" for s, n in sorted(counts.items(), key=lambda kv: kv[0].failed))
        lines.append(f"{result.group.title} ({len(result.results)} queries): {parts}")
        for r in result.results:
            if r.status not in (Status.OK, Status.NOT_FIRING):
                lines.append(f"    {r.status.value}: {r.query.item}: {r.detail}")
    return "\n".join(lines)


def _value(prometheus: PrometheusProcess, expr: str) -> float | None:
    try:
        result = prometheus.query(expr)
    except RemoteError:
        return None
    return float(result[0]["value"][1]) if result else None


def _alerts(prometheus: PrometheusProcess, expr: str, gpu_label: str) -> list[str]:
    try:
        result = prometheus.query(expr)
    except RemoteError:
        return []
    where: dict[str, list[str]] = {}
    for series in result:
        labels = series["metric"]
        name = f"{labels.get('alertname', '?')} ({labels.get('severity', '-')})"
        place = f"GPU {labels[gpu_label]}" if labels.get(gpu_label) else labels.get("instance", "")
        where.setdefault(name, []).append(place)
    return [f"{name} on {', '.join(sorted(places))}" for name, places in sorted(where.items())]


def fleet_summary(prometheus: PrometheusProcess, settings: Settings, receiver: WebhookReceiver | None = None,
                  one_line: bool = False) -> str:
    """GPUs, utilization, memory, power, the hottest GPU and the alerts, from the recording rules."""
    q = promql_for(settings)
    prof = q.profile
    count = f"sum({q.use('cluster:gpu_count:count')})"
    gpus = _value(prometheus, count)
    idle = _value(prometheus, f"sum({q.use('cluster:gpu_idle:count')})")
    util = _value(prometheus, f"sum({q.use('cluster:gpu_utilization:sum')}) / {count}")
    used = _value(prometheus, f"sum({q.use('cluster:gpu_fb_used_mib:sum')})")
    total = _value(prometheus, f"sum({q.use('cluster:gpu_fb_total_mib:sum')})")
    power = _value(prometheus, f"sum({q.use('cluster:gpu_power_watts:sum')})") if prof.has("power") else None
    hottest = prometheus.query(f"topk(1, {q.metric('gpu_temp')})") if prof.has("gpu_temp") else []
    firing = _alerts(prometheus, FIRING, prof.gpu_label)
    pending = _alerts(prometheus, PENDING, prof.gpu_label)
    delivered = len(receiver.received()) if receiver is not None else 0

    hot = "n/a"
    if hottest:
        labels, value = hottest[0]["metric"], float(hottest[0]["value"][1])
        hot = f"{value:.0f} C, GPU {labels.get(prof.gpu_label, '?')} on {labels.get('instance', '?')}"
    memory = f"{used / total:.0%} of {total / 1024:.0f} GiB" if used is not None and total else "n/a"
    rows = [
        ("GPUs", f"{gpus:.0f} reporting, {idle or 0:.0f} idle (under "
                 f"{settings.thresholds.utilization.idle_below_percent:g} %)" if gpus is not None else "none yet"),
        ("utilization", f"{util:.0f} % mean" if util is not None else "n/a"),
        ("memory used", memory),
        ("power", f"{power / 1000:.2f} kW" if power is not None else "n/a"),
        ("hottest", hot),
        ("alerts firing", "; ".join(firing) or "none"),
        ("pending", "; ".join(pending) or "none"),
        ("notifications", f"{delivered} delivered by Alertmanager to the webhook"),
    ]
    if one_line:
        return "fleet: " + " | ".join(f"{name} {text}" for name, text in rows[:5]) + f" | firing {len(firing)}"
    return "\n".join(["fleet summary:", *(f"  {name:<14} {text}" for name, text in rows)])


def alert_line(prometheus: PrometheusProcess, seen: set[str]) -> list[str]:
    """Lines for alerts that started or stopped firing since the last call; `seen` is updated."""
    try:
        result = prometheus.query(FIRING)
    except RemoteError:
        return []
    now = {", ".join(f"{k}={v}" for k, v in sorted(s["metric"].items()) if k not in ("__name__", "alertstate"))
           for s in result}
    lines = [f"  firing:   {key}" for key in sorted(now - seen)]
    lines += [f"  resolved: {key}" for key in sorted(seen - now)]
    seen.clear()
    seen.update(now)
    return lines


def notification_line(body: dict[str, Any]) -> str:
    """One Alertmanager webhook notification, as one line."""
    group = ", ".join(f"{k}={v}" for k, v in sorted((body.get("groupLabels") or {}).items()))
    alerts = body.get("alerts") or []
    severity = (body.get("commonLabels") or {}).get("severity", "-")
    return (f"  alertmanager -> webhook: {str(body.get('status', '?')).upper()} {group} ({severity}), "
            f"{len(alerts)} alert{'s' if len(alerts) != 1 else ''}")
