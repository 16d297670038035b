"""Link 5, alerting: Prometheus has active Alertmanagers; the Alertmanager's loaded configuration (its status
API) has the generated routes, receivers and inhibitions; no receiver has failed to notify (its metrics).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from gpudash.config.durations import parse_duration
from gpudash.doctor.expect import Expectations
from gpudash.doctor.findings import Finding, Link, count, fail, hint, listed, ok
from gpudash.doctor.observed import AlertmanagerView, PrometheusView
from gpudash.doctor.scrape_targets import reload_hint

_TIMINGS = ("group_wait", "group_interval", "repeat_interval")
_INTEGRATIONS = ("webhook_configs", "slack_configs", "email_configs", "pagerduty_configs", "opsgenie_configs",
                 "msteams_configs", "telegram_configs", "pushover_configs", "victorops_configs", "wechat_configs",
                 "sns_configs", "webex_configs", "discord_configs")


def _host(url: str) -> str:
    """`host:port` of a URL or an address, never its credentials."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    return parts.netloc.rpartition("@")[2]


def prometheus_alerting(view: PrometheusView, alertmanager_url: str | None) -> list[Finding]:
    if view.error:
        return []
    if not view.alertmanagers:
        target = _host(alertmanager_url) if alertmanager_url else "ALERTMANAGER:9093"
        return [fail(Link.ALERTING, "prometheus", "Prometheus has no active Alertmanager: rules fire, nobody is told",
                     why="prometheus.yml has no alerting.alertmanagers section, or its targets cannot be resolved",
                     fix=f"prometheus.yml: alerting: {{alertmanagers: [{{static_configs: [{{targets: "
                         f"['{target}']}}]}}]}}, then {reload_hint(view)}")]
    hosts = [_host(url) for url in view.alertmanagers]
    if alertmanager_url and _host(alertmanager_url) not in hosts:
        return [hint(Link.ALERTING, "prometheus", f"sends alerts to {listed(hosts)}, not to "
                                                  f"{_host(alertmanager_url)}",
                     why="the Alertmanager checked below may not be the one that pages",
                     fix="point --alertmanager at the one Prometheus names, or fix alerting.alertmanagers")]
    return [ok(Link.ALERTING, "prometheus", f"sends alerts to {listed(hosts)}")]


def _seconds(value: Any) -> int | None:
    try:
        return parse_duration(str(value)).seconds if value is not None else None
    except ValueError:
        return None


def _matchers(route: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(sorted("".join(str(m).split()) for m in route.get("matchers") or []))


def routes(route: Mapping[str, Any], path: str = "route") -> list[tuple[str, tuple[Any, ...]]]:
    """The route tree flattened: (where, what decides delivery) for each route, in order."""
    shape = (route.get("receiver"), _matchers(route), tuple(route.get("group_by") or ()),
             *(_seconds(route.get(key)) for key in _TIMINGS), bool(route.get("continue", False)))
    flat = [(path, shape)]
    for index, child in enumerate(route.get("routes") or []):
        flat += routes(child, f"{path}.routes[{index}]")
    return flat


def _receivers(config: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    return {str(r.get("name")): tuple(k for k in _INTEGRATIONS if r.get(k)) for r in config.get("receivers") or []}


def _inhibitions(config: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    return [(_matchers({"matchers": r.get("source_matchers")}), _matchers({"matchers": r.get("target_matchers")}),
             tuple(sorted(r.get("equal") or ()))) for r in config.get("inhibit_rules") or []]


def config_differences(loaded: Mapping[str, Any], wanted: Mapping[str, Any]) -> list[str]:
    notes: list[str] = []
    have, want = routes(loaded.get("route") or {}), routes(wanted.get("route") or {})
    if have != want:
        paths = [p for (p, a), (_, b) in zip(have, want, strict=False) if a != b]
        if len(have) != len(want):
            notes.append(f"{len(have)} routes loaded, {len(want)} generated")
        elif paths:
            notes.append(f"routes differ at {listed(paths, 2)}")
    have_receivers, want_receivers = _receivers(loaded), _receivers(wanted)
    missing = sorted(set(want_receivers) - set(have_receivers))
    if missing:
        notes.append(f"receivers not loaded: {listed(missing)}")
    changed = sorted(n for n in set(want_receivers) & set(have_receivers) if want_receivers[n] != have_receivers[n])
    if changed:
        notes.append(f"receivers of another kind: {listed(changed)}")
    if _inhibitions(loaded) != _inhibitions(wanted):
        notes.append(f"{len(_inhibitions(loaded))} inhibitions loaded, {len(_inhibitions(wanted))} generated, "
                     "or other matchers")
    return notes


def alertmanager_findings(view: AlertmanagerView, expect: Expectations) -> list[Finding]:
    subject = _host(view.url)
    if view.error:
        return [fail(Link.ALERTING, subject, f"cannot ask Alertmanager: {view.error}",
                     why="it is not running there, or the URL is not Alertmanager's",
                     fix=f"`curl {view.url}/-/ready`; pass the right one with --alertmanager URL or ALERTMANAGER_URL")]
    findings: list[Finding] = []
    notes = config_differences(view.config, expect.alertmanager)
    if notes:
        findings.append(fail(Link.ALERTING, subject, f"its loaded config differs from `gpudash rules`: "
                                                     f"{listed(notes, 3)}",
                             why="Alertmanager runs an older or hand-edited alertmanager.yml",
                             fix=f"`gpudash rules`, copy generated/alertmanager/alertmanager.yml to it, then "
                                 f"curl -X POST {view.url}/-/reload"))
    else:
        config = view.config
        findings.append(ok(Link.ALERTING, subject, f"config as generated: "
                                                   f"{count(len(routes(config.get('route') or {})), 'route')}, "
                                                   f"{count(len(_receivers(config)), 'receiver')}, "
                                                   f"{count(len(_inhibitions(config)), 'inhibition')}"))
    findings += _notifications(view, subject)
    return findings


def _notifications(view: AlertmanagerView, subject: str) -> list[Finding]:
    failing = sorted((name, sent, failed) for name, (sent, failed) in view.notifications.items() if failed > 0)
    if failing:
        shown = [f"{name}: {failed:.0f} of {sent:.0f}" for name, sent, failed in failing]
        return [fail(Link.ALERTING, subject, f"notifications failed since it started: {listed(shown)}",
                     why="a receiver's URL, credentials or network is wrong",
                     fix="Alertmanager's log names the receiver and the error; `amtool check-config` the file")]
    sent = sum(s for s, _ in view.notifications.values())
    if not view.notifications:
        return [hint(Link.ALERTING, subject, "its metrics say nothing about notifications")]
    return [ok(Link.ALERTING, subject, f"no failed notification ({sent:.0f} sent since it started)")]

