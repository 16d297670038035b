"""Link 6, Grafana: the data source the dashboards use exists (uid and type) and points at the Prometheus
doctor was given; the dashboards there are the local ones (what `gpudash diff` reports, in one line).

`read_grafana` fetches through the sync's client (retries, deadlines, secrets never shown); the judging is
`grafana_findings`, a function of what was fetched.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from gpudash.doctor.expect import Expectations
from gpudash.doctor.findings import Finding, Link, fail, hint, listed, ok
from gpudash.errors import ConfigError, GpudashError
from gpudash.sync.apply import Target, read_plan
from gpudash.sync.grafana_api import Connection, Grafana, connection_from
from gpudash.sync.identity import site_from_grafana
from gpudash.sync.plan import Action
from gpudash.sync.remote import GrafanaRemote

# How each verdict of the sync's plan reads in one line.
_STATES = {Action.CREATE: "not in Grafana", Action.UPDATE: "local changes not pushed",
           Action.DRIFTED: "changed in Grafana since gpudash pushed it", Action.CONFLICT: "held by something else"}


@dataclass(frozen=True)
class GrafanaView:
    url: str
    error: str = ""
    version: str = ""
    datasources: Mapping[str, Mapping[str, Any] | None] = field(default_factory=dict)  # uid -> its JSON, or None
    prometheus_sources: tuple[tuple[str, str, str], ...] = ()  # (uid, name, url) of each Prometheus source
    dashboards: tuple[tuple[str, str, Action, str], ...] = ()  # (uid, title, verdict, reason)
    unsettled: str = ""  # why gpudash cannot tell which site this is (gpudash.sync.identity)


def _quiet(_: str) -> None:
    """Doctor prints findings only."""


def read_grafana(connection: Connection, expect: Expectations) -> GrafanaView:
    remote = GrafanaRemote(Grafana(connection))
    version = ""
    try:
        version = remote.probe()
        sources = {uid: remote.datasource(uid) for uid in expect.datasource_uids}
        g = remote.grafana
        listing = g.call("data sources", "GET", "/api/datasources", lambda: g.api.datasource.list_datasources())
        local = [dict(d) for d in expect.dashboards]
        target = Target.for_site(site_from_grafana(remote, expect.settings, local, persist=False, echo=_quiet))
        plan = read_plan(remote, local, target)
    except ConfigError as exc:  # no site_id, and Grafana holds dashboards that may be this site's from before
        return GrafanaView(connection.url, version=version, unsettled=exc.format_message())
    except GpudashError as exc:
        return GrafanaView(connection.url, error=exc.format_message())
    prometheus = tuple((str(d.get("uid")), str(d.get("name")), str(d.get("url", "")))
                       for d in listing or [] if isinstance(d, dict) and d.get("type") == "prometheus")
    steps = tuple((s.uid, s.title, s.action, s.reason) for s in plan.steps)
    return GrafanaView(connection.url, "", version, sources, prometheus, steps)


def _same_server(a: str, b: str) -> bool:
    def where(url: str) -> tuple[str, str | None, int, str]:
        parts = urlsplit(url.rstrip("/"))
        return parts.scheme, parts.hostname, parts.port or (443 if parts.scheme == "https" else 80), parts.path

    return where(a) == where(b)


def grafana_findings(view: GrafanaView, expect: Expectations, prometheus_url: str | None) -> list[Finding]:
    subject = view.url
    if view.error:
        return [fail(Link.GRAFANA, subject, f"cannot ask Grafana: {view.error}",
                     fix="check --grafana URL (GRAFANA_URL) and GRAFANA_TOKEN (a service-account token)")]
    if view.unsettled:
        return [fail(Link.GRAFANA, f"Grafana {view.version}".strip(), view.unsettled,
                     why="a push or sync would stop there: the site config names no site_id, and Grafana holds "
                         "dashboards that may be this site's from before",
                     fix="add the site_id the line names to the site config")]
    findings = [_source(uid, body, view, expect, prometheus_url) for uid, body in view.datasources.items()]
    findings.append(_dashboards(view, len(expect.dashboards)))
    return findings


def _source(uid: str, body: Mapping[str, Any] | None, view: GrafanaView, expect: Expectations,
            prometheus_url: str | None) -> Finding:
    subject = f"data source {uid}"
    if body is None:
        uids = [u for u, _, _ in view.prometheus_sources]
        near = difflib.get_close_matches(uid, uids, n=1, cutoff=0.4)
        has = (f"; its Prometheus data sources: {listed([f'{u} ({n})' for u, n, _ in view.prometheus_sources])}"
               if uids else "; it has no Prometheus data source")
        fix = (f"`gpudash provision --prometheus-url {prometheus_url or 'http://PROMETHEUS:9090'}` creates it"
               + (f"; or set grafana.datasource_uid: {near[0]} in gpudash.yaml" if near else ""))
        return fail(Link.GRAFANA, subject, f"Grafana has no data source with uid {uid!r}{has}",
                    why="the dashboards' queries go to a data source that is not there: every panel errors", fix=fix)
    kind = str(body.get("type", ""))
    if kind != "prometheus":
        return fail(Link.GRAFANA, subject, f"is of type {kind!r}, not prometheus",
                    why="the uid is taken by another kind of data source",
                    fix="give gpudash its own uid (grafana.datasource_uid in gpudash.yaml) and `gpudash provision`")
    url = str(body.get("url", ""))
    if prometheus_url and url and not _same_server(url, prometheus_url):
        return hint(Link.GRAFANA, subject, f"Grafana queries {url}; doctor checked {prometheus_url}",
                    why="fine when both name one server (Grafana may reach it by another name); if not, the "
                        "dashboards show another Prometheus' data",
                    fix=f"`gpudash provision --prometheus-url {prometheus_url}` points the data source there")
    return ok(Link.GRAFANA, subject, f"prometheus at {url or '(no URL)'}")


def _dashboards(view: GrafanaView, local: int) -> Finding:
    subject = f"Grafana {view.version}".strip()
    off = [(uid, title, action, reason) for uid, title, action, reason in view.dashboards if action in _STATES]
    if not off:
        return ok(Link.GRAFANA, subject, f"{local} of {local} dashboards as generated")
    shown = listed([f"{uid}: {_STATES[action]}" for uid, _, action, _ in off], 3)
    return fail(Link.GRAFANA, subject, f"{len(off)} of {local} dashboards differ: {shown}",
                why="dashboards not pushed since `gpudash dashboards`, or edited in the Grafana UI",
                fix="`gpudash diff` shows what differs; `gpudash sync` writes the local ones")



def connect(env: Mapping[str, str], url: str) -> Connection:
    """Grafana's connection from --grafana and GRAFANA_TOKEN (or GRAFANA_USER/PASSWORD); one retry."""
    return connection_from(env, url=url, retries=1)
