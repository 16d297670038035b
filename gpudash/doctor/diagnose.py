"""Walking the chain: fetch each server once, then judge every link in the order data flows through them.

Prometheus is read first because it tells which exporters it scrapes (checked when none were given) and
whether a target this machine cannot reach is scraped fine all the same. The judges quote the servers (a
target's error, a data source's URL, a rule's name), so every finding has the credentials doctor was given
masked out of it, in any spelling, before it is shown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import reduce

from gpudash.doctor.alerting import alertmanager_findings, prometheus_alerting
from gpudash.doctor.expect import Expectations
from gpudash.doctor.exporter import exporter_findings
from gpudash.doctor.findings import Finding, Link, Verdict, count, fail, hint, listed, ok
from gpudash.doctor.grafana import grafana_findings, read_grafana
from gpudash.doctor.labels import label_findings, label_metrics, label_queries
from gpudash.doctor.loaded_rules import loaded_expressions, rule_findings
from gpudash.doctor.observed import (
    DEFAULT_TIMEOUT_S,
    ExporterPage,
    PrometheusView,
    read_alertmanager,
    read_prometheus,
    scrape_exporter,
)
from gpudash.doctor.physics import physics_findings, physics_queries
from gpudash.doctor.scrape_targets import site_targets, target_findings
from gpudash.redaction import NO_SECRETS, Secrets, split_userinfo
from gpudash.sync.grafana_api import Connection

SCRAPERS = 16  # exporters read at once
EXPORTERS_SHOWN = 3  # up to this many exporters, each gets its own lines


@dataclass(frozen=True)
class Given:
    """What to check; None (or empty) leaves that link out. `grafana_problem` says why Grafana cannot be asked."""

    exporters: tuple[str, ...] = ()
    prometheus: str | None = None
    alertmanager: str | None = None
    grafana: Connection | None = None
    grafana_problem: str = ""

    @property
    def anything(self) -> bool:
        return bool(self.exporters or self.prometheus or self.alertmanager or self.grafana or self.grafana_problem)

    @property
    def secrets(self) -> Secrets:
        """The credentials of every server given, in every spelling a server could echo."""
        urls = [split_userinfo(url) for url in (*self.exporters, self.prometheus, self.alertmanager) if url]
        logins = [Secrets.of(login.user, login.password) for login in urls]
        return reduce(Secrets.__add__, logins, self.grafana.secrets if self.grafana else NO_SECRETS)


def masked(findings: Sequence[Finding], secrets: Secrets) -> list[Finding]:
    """The findings with every secret masked out of what they show."""
    return [replace(f, subject=secrets.redact(f.subject), what=secrets.redact(f.what), why=secrets.redact(f.why),
                    fix=secrets.redact(f.fix)) for f in findings]


def _scraped(view: PrometheusView | None, job: str) -> Mapping[str, bool]:
    """scrape URL -> whether Prometheus' last scrape of it worked."""
    if view is None or view.error:
        return {}
    return {str(t.get("scrapeUrl", "")): t.get("health") == "up" for t in site_targets(view, job)}


def exporters_findings(pages: Sequence[ExporterPage], expect: Expectations,
                       scraped: Mapping[str, bool]) -> list[Finding]:
    """Each exporter's findings; beyond a few exporters, those with nothing to report are one line together."""
    each = [exporter_findings(page, expect, scraped.get(page.url, False)) for page in pages]
    if len(pages) <= EXPORTERS_SHOWN:
        return [finding for findings in each for finding in findings]
    quiet = [page for page, findings in zip(pages, each, strict=True) if all(f.verdict is Verdict.OK for f in findings)]
    noisy = [f for findings in each for f in findings if f.verdict is not Verdict.OK]
    summary = ok(Link.EXPORTER, f"{len(quiet)} of {len(pages)} exporters",
                 "serving GPUs, NVML healthy where it has self-metrics, every field the dashboards read")
    return [summary, *noisy] if quiet else noisy


def diagnose(given: Given, expect: Expectations, timeout: float = DEFAULT_TIMEOUT_S) -> list[Finding]:
    view = None
    if given.prometheus:
        queries = {**label_queries(expect), **physics_queries(expect)}
        view = read_prometheus(given.prometheus, queries, label_metrics(expect), loaded_expressions(expect), timeout)
    scraped = _scraped(view, expect.settings.site.scrape_job)
    findings: list[Finding] = []
    urls, discovered = (given.exporters, False) if given.exporters else (tuple(scraped), True)
    with ThreadPoolExecutor(max_workers=max(1, min(SCRAPERS, len(urls)))) as pool:
        pages = list(pool.map(lambda url: scrape_exporter(url, timeout, discovered), urls))
    findings += exporters_findings(pages, expect, scraped)
    if view is not None:
        findings += target_findings(view, expect)
        findings += label_findings(view, expect)
        findings += rule_findings(view, expect)
        findings += prometheus_alerting(view, given.alertmanager)
    if given.alertmanager:
        findings += alertmanager_findings(read_alertmanager(given.alertmanager, timeout), expect)
    if given.grafana is not None:
        shown = split_userinfo(given.prometheus).url if given.prometheus else None
        findings += grafana_findings(read_grafana(given.grafana, expect), expect, shown)
    elif given.grafana_problem:
        findings.append(fail(Link.GRAFANA, "grafana", f"cannot log in: {given.grafana_problem}",
                             fix="set GRAFANA_TOKEN (a service-account token with Viewer rights), or "
                                 "GRAFANA_USER and GRAFANA_PASSWORD"))
    if view is not None:
        findings += physics_findings(view, expect)
        findings += unanswered(view)
    return masked(findings, given.secrets)


def unanswered(view: PrometheusView) -> list[Finding]:
    """Doctor's own queries that Prometheus refused: what was judged without them may say too little."""
    if not view.failed_queries:
        return []
    shown = listed([f"{name} ({why})" for name, why in sorted(view.failed_queries.items())], 3)
    return [hint(Link.PHYSICS, "queries", f"Prometheus did not answer {count(len(view.failed_queries), 'query')}: "
                                          f"{shown}", why="the labels and physics above lack that evidence")]
