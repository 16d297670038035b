"""What the demo prints: the check in brief, a fleet summary, the pages delivered, alerts as they fire and
notifications as they land."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from gpudash.catalog import HPC_JOB_LABEL
from gpudash.check.judge import GroupResult, Status
from gpudash.check.tables import render_table
from gpudash.config.loading import Settings
from gpudash.errors import RemoteError
from gpudash.escape import promql_matcher
from gpudash.promql.for_settings import promql_for
from gpudash.promql.query import PromQL
from gpudash.stack.demo_node import Injected
from gpudash.stack.servers import WebhookReceiver

FIRING = 'ALERTS{alertstate="firing"}'
PENDING = 'ALERTS{alertstate="pending"}'


class InstantQueries(Protocol):
    """What the report asks of Prometheus (gpudash.stack.process.PrometheusProcess answers it)."""

    def query(self, expr: str) -> list[dict[str, Any]]: ...


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


def _value(prometheus: InstantQueries, expr: str) -> float | None:
    try:
        result = prometheus.query(expr)
    except RemoteError:
        return None
    return float(result[0]["value"][1]) if result else None


SEVERITIES = ("critical", "warning", "info")


def _query(prometheus: InstantQueries, expr: str) -> list[dict[str, Any]]:
    try:
        return prometheus.query(expr)
    except RemoteError:
        return []


def alert_places(result: Sequence[Mapping[str, Any]], gpu_label: str) -> list[str]:
    """Each alert and severity with the GPUs it fires on, each GPU once (two rules of one alert, say the GPU's
    and the memory's temperature, can fire on one GPU)."""
    where: dict[str, set[str]] = {}
    for series in result:
        labels = series["metric"]
        name = f"{labels.get('alertname', '?')} ({labels.get('severity', '-')})"
        place = f"GPU {labels[gpu_label]}" if labels.get(gpu_label) else labels.get("instance", "")
        where.setdefault(name, set()).add(place)
    return [f"{name} on {', '.join(sorted(places, key=lambda p: (len(p), p)))}"  # GPU 5 before GPU 10
            for name, places in sorted(where.items())]


def by_severity(result: Sequence[Mapping[str, Any]]) -> str:
    """How many alerts, per severity: '2 critical, 3 warning'."""
    counts = Counter(series["metric"].get("severity", "-") for series in result)
    order = [*SEVERITIES, *sorted(set(counts) - set(SEVERITIES))]
    return ", ".join(f"{counts[s]} {s}" for s in order if counts[s])


def _jobs(prometheus: InstantQueries, q: PromQL) -> str:
    """Each job's GPU count and median utilization, from the recording rules; '' when no GPU names a job."""
    gpus = {s["metric"].get(HPC_JOB_LABEL, ""): float(s["value"][1])
            for s in _query(prometheus, f"sum by ({HPC_JOB_LABEL}) ({q.use('cluster_job:gpu_count:count')})")}
    util = {s["metric"].get(HPC_JOB_LABEL, ""): float(s["value"][1])
            for s in _query(prometheus, f"max by ({HPC_JOB_LABEL}) ({q.use('cluster_job:gpu_utilization:median')})")}
    return "; ".join(f"{job}: {n:.0f} GPU{'s' if n != 1 else ''}, {util[job]:.0f} % median utilization"
                     if job in util else f"{job}: {n:.0f} GPUs" for job, n in sorted(gpus.items()))


def fleet_summary(prometheus: InstantQueries, settings: Settings, receiver: WebhookReceiver | None = None,
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
    firing_now = _query(prometheus, FIRING)
    firing = alert_places(firing_now, prof.gpu_label)
    pending = alert_places(_query(prometheus, PENDING), prof.gpu_label)
    notifications = receiver.received() if receiver is not None else []
    pages = sum(1 for body in notifications if is_page(body))
    jobs = _jobs(prometheus, q)

    hot = "n/a"
    if hottest:
        labels, value = hottest[0]["metric"], float(hottest[0]["value"][1])
        hot = f"{value:.0f} C, GPU {labels.get(prof.gpu_label, '?')} on {labels.get('instance', '?')}"
    memory = f"{used / total:.0%} of {total / 1024:.0f} GiB" if used is not None and total else "n/a"
    rows = [
        ("GPUs", f"{gpus:.0f} reporting, {idle or 0:.0f} idle (under "
                 f"{settings.thresholds.utilization.idle_below_percent:g} %)" if gpus is not None else "none yet"),
        ("utilization", f"{util:.0f} % mean" if util is not None else "n/a"),
        ("jobs", jobs or f"none named ({HPC_JOB_LABEL}: docs/jobs.md)"),
        ("memory used", memory),
        ("power", f"{power / 1000:.2f} kW" if power is not None else "n/a"),
        ("hottest", hot),
        ("alerts firing", f"{by_severity(firing_now)}: {'; '.join(firing)}" if firing else "none"),
        ("pending", "; ".join(pending) or "none"),
        ("notifications", f"{len(notifications)} delivered by Alertmanager to the webhook, {pages} of them "
                          f"page{'s' if pages != 1 else ''} (critical); warnings and info wait for the digest "
                          f"(first after {settings.thresholds.alertmanager.digest.group_wait})"),
    ]
    if one_line:
        return "fleet: " + " | ".join(f"{name} {text}" for name, text in rows[:6]) + f" | firing {len(firing_now)}"
    return "\n".join(["fleet summary:", *(f"  {name:<14} {text}" for name, text in rows)])


def alert_line(prometheus: InstantQueries, seen: set[str]) -> list[str]:
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


def is_page(body: Mapping[str, Any], alertname: str | None = None) -> bool:
    """A notification of critical alerts firing (what the critical route sends at once), of `alertname` if given."""
    common = body.get("commonLabels") or {}
    return (body.get("status") == "firing" and common.get("severity") == "critical"
            and alertname in (None, common.get("alertname")))


def _where(prometheus: InstantQueries, q: PromQL, labels: Mapping[str, str]) -> tuple[str, str]:
    """The host name and job of the GPU an alert names, from the GPU's own series now ('' when it has none)."""
    job = labels.get(HPC_JOB_LABEL, "")
    host_label = q.profile.hostname_label
    keys = [k for k in ("cluster", "instance", q.gpu) if labels.get(k)]
    if q.gpu not in keys:
        return "", job
    selector = ",".join(promql_matcher(k, "=", labels[k]) for k in keys)
    grouping = ", ".join(label for label in (host_label, HPC_JOB_LABEL) if label)
    found = _query(prometheus, f"group by ({grouping}) ({q.profile.ref('gpu_util').name}{{{selector}}})")
    hosts = sorted({s["metric"].get(host_label, "") for s in found} - {""}) if host_label else []
    jobs = sorted({s["metric"].get(HPC_JOB_LABEL, "") for s in found} - {""})
    return ", ".join(hosts), job or ", ".join(jobs)


def page_lines(prometheus: InstantQueries, settings: Settings,
               notifications: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each alert of each page received: its name and severity, the GPU, host and job it concerns, its action,
    and its summary (host and job read from the GPU's series: GPU alerts are grouped per GPU, not per job)."""
    q = promql_for(settings)
    lines = []
    for body in notifications:
        if not is_page(body):
            continue
        for alert in body.get("alerts") or []:
            labels, notes = alert.get("labels") or {}, alert.get("annotations") or {}
            host, job = _where(prometheus, q, labels)
            gpu = labels.get(q.gpu)
            place = (f"GPU {gpu} of {host or 'its node'} ({labels.get('instance', '?')})" if gpu
                     else labels.get("instance", "?"))
            lines.append(f"  {labels.get('alertname', '?')} ({labels.get('severity', '-')}): {place}, "
                         f"job {job or 'none'}; action: {labels.get('action', 'none')}")
            lines.append(f"    {notes.get('summary', '')}")
    return lines


def injected_lines(prometheus: InstantQueries, gpu_label: str, injected: Sequence[Injected]) -> list[str]:
    """Per injected fault: each alert it raises on its GPU, firing (with severities), pending or not yet."""
    states: dict[tuple[str, str, str], set[str]] = {}
    for state, expr in (("firing", FIRING), ("pending", PENDING)):
        for series in _query(prometheus, expr):
            labels = series["metric"]
            key = (state, labels.get("alertname", ""), labels.get(gpu_label, ""))
            states.setdefault(key, set()).add(labels.get("severity", "-"))
    lines = []
    for fault in injected:
        said = []
        for alert in fault.alerts:
            firing, pending = (states.get((state, alert, str(fault.gpu))) for state in ("firing", "pending"))
            said.append(f"{alert} firing ({', '.join(sorted(firing))})" if firing
                        else f"{alert} pending" if pending else f"{alert} not yet")
        lines.append(f"  GPU {fault.gpu}, {fault.what}: {'; '.join(said)}")
    return lines


def pages_and_faults(prometheus: InstantQueries, settings: Settings, notifications: Sequence[Mapping[str, Any]],
                     injected: Sequence[Injected] = ()) -> str:
    """What follows the fleet summary: the pages received, then how each injected fault shows (if any)."""
    pages = page_lines(prometheus, settings, notifications)
    lines = ["pages delivered to the webhook:" if pages else "pages delivered to the webhook: none", *pages]
    if injected:
        lines += ["injected faults:", *injected_lines(prometheus, promql_for(settings).gpu, injected)]
    return "\n".join(lines)
