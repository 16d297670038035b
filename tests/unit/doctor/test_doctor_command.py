"""`gpudash doctor` as a command, without servers: what it is given, bad input, and how findings print."""

from __future__ import annotations

import json

from support.cli import gpudash
from support.paths import ROOT

from gpudash.config.loading import load_settings
from gpudash.doctor.cli import given_from
from gpudash.doctor.findings import Link, fail, hint, ok
from gpudash.doctor.findings_text import as_json, line, summary

QUIET = {name: None for name in ("PROMETHEUS_URL", "ALERTMANAGER_URL", "GRAFANA_URL", "GRAFANA_TOKEN",
                                 "GRAFANA_USER", "GRAFANA_PASSWORD", "GPUDASH_SITE", "GPUDASH_THRESHOLDS")}


def test_one_line_per_finding_with_why_and_fix() -> None:
    finding = fail(Link.TARGETS, "b:9400", "target DOWN: connection refused", why="not running", fix="start it")
    assert line(finding) == "FAIL  targets   b:9400: target DOWN: connection refused; why: not running; fix: start it"
    assert line(ok(Link.RULES, "g", "13 rules")) == "ok    rules     g: 13 rules"


def test_summary_names_the_broken_links() -> None:
    findings = [ok(Link.EXPORTER, "a", "x"), hint(Link.LABELS, "b", "y"), fail(Link.RULES, "c", "z")]
    assert summary(findings) == "doctor: 1 ok, 1 hint, 1 failed (rules)"
    assert summary(findings[:2]) == "doctor: 1 ok, 1 hint, 0 failed: every link checked holds"
    assert summary([findings[1], findings[1]]) == "doctor: 0 ok, 2 hints, 0 failed: every link checked holds"
    data = json.loads(as_json(findings))
    assert data["ok"] is False
    assert data["findings"][2] == {"link": "rules", "verdict": "FAIL", "subject": "c", "what": "z", "why": "",
                                   "fix": ""}


def test_nothing_given_is_bad_input() -> None:
    ran = gpudash("doctor", cwd=ROOT, env=QUIET)
    assert ran.code == 2
    assert ran.err.startswith("gpudash: nothing to check: pass --prometheus URL")


def test_a_grafana_that_is_not_a_url_is_bad_input() -> None:
    ran = gpudash("doctor", "--grafana", "grafana:3000", cwd=ROOT, env=QUIET)
    assert (ran.code, ran.err.strip()) == (2, "gpudash: --grafana 'grafana:3000': expected http(s)://host[:port]")


def test_grafana_without_credentials_is_a_broken_link_not_a_crash() -> None:
    ran = gpudash("doctor", "--grafana", "http://grafana.invalid:3000", cwd=ROOT, env=QUIET)
    assert ran.code == 1
    assert ran.out.startswith("FAIL  grafana   grafana: cannot log in: GRAFANA_TOKEN is not set")
    assert "doctor: 1 failed (links: grafana)" in ran.err


def test_the_site_names_the_exporters_when_prometheus_is_not_given() -> None:
    settings = load_settings(ROOT / "thresholds.yaml")
    alone = given_from((), None, None, None, settings, True, {})
    assert alone.exporters == ("http://127.0.0.1:9400/metrics",)
    with_prometheus = given_from((), "http://prom:9090", None, None, settings, True, {})
    assert with_prometheus.exporters == ()  # Prometheus' own targets are checked instead
    assert given_from((), None, None, None, settings, False, {}).anything is False


def test_every_finding_has_every_given_servers_credentials_masked() -> None:
    from gpudash.doctor.diagnose import Given, masked
    from gpudash.sync.grafana_api import Connection

    given = Given(("http://scrape:exporter-pass-1@node:9400",), "http://reader:prometheus-pass-2@prom:9090",
                  "http://am:alertmanager-pass-3@am:9093", Connection("http://g:3000", "glsa_grafana_token_4"))
    quoted = fail(Link.TARGETS, "node:9400 exporter-pass-1", "lastError: bad auth prometheus-pass-2 for reader",
                  why="echo: alertmanager-pass-3", fix="Bearer glsa_grafana_token_4")
    (shown,) = masked([quoted], given.secrets)
    assert line(shown) == ("FAIL  targets   node:9400 ***: lastError: bad auth *** for reader; why: echo: ***; "
                           "fix: Bearer ***")
