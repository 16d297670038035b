"""`gpudash doctor`: check the chain from NVML to the pager, link by link; exit 0 when every link holds."""

from __future__ import annotations

import os
from pathlib import Path

import click

from gpudash.catalog import profile
from gpudash.check.queries import load_dashboards
from gpudash.config.loading import DEFAULT_SITE, Settings, load_settings
from gpudash.config.options import config_options
from gpudash.doctor.diagnose import Given, diagnose
from gpudash.doctor.expect import Expectations, build
from gpudash.doctor.findings import Finding
from gpudash.doctor.findings_text import as_json, line, summary
from gpudash.doctor.grafana import connect
from gpudash.doctor.observed import DEFAULT_TIMEOUT_S, metrics_url
from gpudash.errors import CheckFailed, ConfigError, UsageError
from gpudash.repository import DASHBOARDS_JSON_DIR

NOTHING_GIVEN = ("nothing to check: pass --prometheus URL (or set PROMETHEUS_URL), and any of --exporter, "
                 "--alertmanager, --grafana (or a gpudash.yaml with the exporters' targets)")


def expectations(settings: Settings, dashboards_dir: Path = DASHBOARDS_JSON_DIR) -> Expectations:
    dashboards = [data for data, _ in load_dashboards([dashboards_dir])]
    return build(settings, profile(settings.site.profile), dashboards)


def given_from(exporters: tuple[str, ...], prometheus: str | None, alertmanager: str | None, grafana: str | None,
               settings: Settings, site_in_use: bool, env: dict[str, str]) -> Given:
    """What to check: flags and environment; the exporters from gpudash.yaml when it names them and none are
    given and Prometheus is not (with Prometheus, its own targets are the ones checked)."""
    if not exporters and site_in_use and not prometheus:
        exporters = tuple(metrics_url(t.address) for c in settings.site.clusters for t in c.targets)
    connection, problem = None, ""
    if grafana:
        try:
            connection = connect(env, grafana)
        except ConfigError as exc:
            if not grafana.startswith(("http://", "https://")):
                raise UsageError(f"--grafana {grafana!r}: expected http(s)://host[:port]") from None
            problem = exc.format_message()
    return Given(exporters, prometheus or None, alertmanager or None, connection, problem)


def _site_in_use(site: Path | None) -> bool:
    return site is not None or bool(os.environ.get("GPUDASH_SITE")) or DEFAULT_SITE.exists()


def print_findings(findings: list[Finding], fmt: str) -> None:
    if fmt == "json":
        click.echo(as_json(findings))
        return
    for finding in findings:
        click.echo(line(finding))
    click.echo(summary(findings))


@click.command("doctor")
@click.option("--exporter", "exporters", multiple=True, metavar="URL",
              help="An exporter's /metrics (host:port is enough), repeatable. Default: the targets Prometheus "
                   "scrapes for the site's job, else those gpudash.yaml names.")
@click.option("--prometheus", envvar="PROMETHEUS_URL", default=None, metavar="URL",
              help="Prometheus the exporters feed and the rules run in (default: $PROMETHEUS_URL).")
@click.option("--alertmanager", envvar="ALERTMANAGER_URL", default=None, metavar="URL",
              help="Alertmanager that should receive the alerts (default: $ALERTMANAGER_URL).")
@click.option("--grafana", envvar="GRAFANA_URL", default=None, metavar="URL",
              help="Grafana that shows the dashboards (default: $GRAFANA_URL), with GRAFANA_TOKEN or "
                   "GRAFANA_USER/GRAFANA_PASSWORD.")
@click.option("--dashboards", "dashboards_dir", type=click.Path(path_type=Path), default=DASHBOARDS_JSON_DIR,
              show_default=True, help="Dashboard JSON whose queries say which fields and labels are needed.")
@click.option("--timeout", type=click.FloatRange(min=0.1), default=DEFAULT_TIMEOUT_S, show_default=True,
              help="Seconds per request.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@config_options()
def doctor(exporters: tuple[str, ...], prometheus: str | None, alertmanager: str | None, grafana: str | None,
           dashboards_dir: Path, timeout: float, fmt: str, thresholds: Path | None, site: Path | None) -> None:
    """Check the monitoring chain link by link, from NVML to the pager; exit 1 when a link is broken.

    In order: each exporter (reachable, serving GPUs, NVML healthy, every field the dashboards read);
    Prometheus' targets (up, scrape interval against the rules' windows); the labels the dashboards select
    on; the rules (loaded, as `gpudash rules` renders them, evaluating, alerts pending and for how long);
    alerting (Prometheus has an Alertmanager, whose loaded config has the generated routes and whose
    receivers deliver); Grafana (the data source, the dashboards as generated); and what the data shows
    (throttled GPUs, nodes that lost a GPU). One line per finding: ok, or what is wrong, why, and the fix.
    Only what is given is checked; a server that cannot be reached is a broken link (exit 1), bad arguments
    exit 2.

    \b
    Examples:
      gpudash doctor --prometheus http://prometheus:9090 --alertmanager http://alertmanager:9093
      gpudash doctor --exporter gpu-node-17:9400
      PROMETHEUS_URL=http://127.0.0.1:9090 GRAFANA_URL=http://grafana:3000 GRAFANA_TOKEN=... gpudash doctor
      gpudash doctor --prometheus http://127.0.0.1:9090 --format json
    """
    settings = load_settings(thresholds, site)
    given = given_from(exporters, prometheus, alertmanager, grafana, settings, _site_in_use(site), dict(os.environ))
    if not given.anything:
        raise UsageError(NOTHING_GIVEN)
    findings = diagnose(given, expectations(settings, dashboards_dir), timeout)
    print_findings(findings, fmt)
    failed = [f for f in findings if f.failed]
    if failed:
        links = ", ".join(dict.fromkeys(f.link.value for f in failed))
        raise CheckFailed(f"doctor: {len(failed)} failed (links: {links})")
