"""Link 2, Prometheus' targets: every GPU exporter target up (the last scrape error when not), and the scrape
interval and timeout against what the rules' windows assume.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from gpudash.config.durations import duration_text, parse_duration
from gpudash.doctor.expect import Expectations
from gpudash.doctor.findings import Finding, Link, fail, hint, listed, ok
from gpudash.doctor.observed import PrometheusView
from gpudash.redaction import snippet

RELOAD = "curl -X POST {url}/-/reload (needs --web.enable-lifecycle) or restart Prometheus"
# A scrape that takes this share of its timeout is one slow node away from failing.
SLOW_SCRAPE_RATIO = 0.8


def reload_hint(view: PrometheusView) -> str:
    return RELOAD.format(url=view.url)


def unreachable(view: PrometheusView) -> Finding:
    return fail(Link.TARGETS, view.url, f"cannot ask Prometheus: {view.error}",
                why="the server is down, or the URL is not Prometheus' (a proxy, a Grafana, a typo)",
                fix=f"`curl {view.url}/-/ready`; pass the right one with --prometheus URL or PROMETHEUS_URL")


def site_targets(view: PrometheusView, job: str) -> list[Mapping[str, Any]]:
    return [t for t in view.targets if t.get("scrapePool") == job or (t.get("labels") or {}).get("job") == job]


def _address(target: Mapping[str, Any]) -> str:
    return str((target.get("labels") or {}).get("instance") or target.get("scrapeUrl", "?"))


def target_findings(view: PrometheusView, expect: Expectations) -> list[Finding]:
    if view.error:
        return [unreachable(view)]
    site = expect.settings.site
    job = site.scrape_job
    targets = site_targets(view, job)
    if not targets:
        pools = sorted({str(t.get("scrapePool", "")) for t in view.targets})
        near = difflib.get_close_matches(job, pools, n=1, cutoff=0.5)
        seen = f"; its jobs: {listed(pools)}" if pools else "; it scrapes nothing"
        return [fail(Link.TARGETS, f"job {job}", f"Prometheus has no scrape job {job!r}{seen}",
                     why=(f"the GPU exporters are scraped as {near[0]!r}, but the rules select job={job!r}"
                          if near else "the scrape config `gpudash rules` renders was never merged"),
                     fix=(f"rename the job, or set scrape.job: {near[0]} in gpudash.yaml and `gpudash rules`" if near
                          else "merge generated/prometheus/scrape-gpu.yml into prometheus.yml's scrape_configs, "
                               f"then {reload_hint(view)}"))]
    findings: list[Finding] = []
    down = [t for t in targets if t.get("health") != "up"]
    for target in down:
        error = snippet(str(target.get("lastError") or "never scraped yet"), 160)
        findings.append(fail(Link.TARGETS, _address(target), f"target DOWN: {error}",
                             why="the exporter is not running there, the address or port is wrong, or a firewall "
                                 "stops Prometheus",
                             fix=f"`curl {target.get('scrapeUrl', '')}` from the Prometheus host; fix the target "
                                 "address in the scrape config"))
    up = len(targets) - len(down)
    if up:
        findings.append(ok(Link.TARGETS, f"job {job}", f"{up} of {len(targets)} targets up"))
    findings.append(_timing(view, targets, expect))
    return findings


def _timing(view: PrometheusView, targets: list[Mapping[str, Any]], expect: Expectations) -> Finding:
    site = expect.settings.site
    subject = f"job {site.scrape_job}"
    intervals = sorted({parse_duration(str(t["scrapeInterval"])).seconds for t in targets if t.get("scrapeInterval")})
    if not intervals:
        return hint(Link.TARGETS, subject, "Prometheus does not say how often it scrapes (no scrapeInterval)")
    interval = intervals[-1]
    window = expect.shortest_window_s
    if window and window < 2 * interval:
        return fail(Link.TARGETS, subject,
                    f"scraped every {duration_text(interval)}, but the rules' shortest window is "
                    f"{duration_text(window)}: one scrape per window, so rate() and *_over_time() see too little",
                    why=f"the rules were rendered for scrape.interval {site.scrape_interval}",
                    fix=f"set scrape.interval: {duration_text(interval)} in gpudash.yaml, `gpudash rules`, reload "
                        "the rules; or scrape more often")
    slow = [t for t in targets if t.get("scrapeTimeout") and float(t.get("lastScrapeDuration") or 0)
            > SLOW_SCRAPE_RATIO * parse_duration(str(t["scrapeTimeout"])).seconds]
    if slow:
        return hint(Link.TARGETS, subject, f"scrapes near their timeout: {listed([_address(t) for t in slow])}",
                    why="a slow exporter or network; one more slow scrape and the target is DOWN",
                    fix="raise scrape.timeout (at most the interval) or find why the exporter answers slowly")
    if interval != site.scrape_interval.seconds:
        return hint(Link.TARGETS, subject,
                    f"scraped every {duration_text(interval)}; gpudash.yaml says {site.scrape_interval}",
                    why="the dashboards' $__rate_interval and the rules assume the configured interval",
                    fix=f"set scrape.interval: {duration_text(interval)} in gpudash.yaml and run `gpudash rules`")
    timeouts = sorted({str(t.get("scrapeTimeout")) for t in targets if t.get("scrapeTimeout")})
    return ok(Link.TARGETS, subject, f"scraped every {duration_text(interval)}, timeout {listed(timeouts)}; "
                                     f"the rules' shortest window ({duration_text(window)}) holds "
                                     f"{window // interval if window else 0} scrapes")
