"""`gpudash check`: run every dashboard query and every rule expression against a live Prometheus.

Dashboards that look right but query nothing are the commonest failure of GPU dashboards (an empty
`$gpu` variable, a renamed metric, a label that is not there). This asks the server itself: each panel
and variable query of each dashboard, interpolated as Grafana would with every variable set to All, and
each alerting and recording rule. It prints one table per dashboard and rule file, and fails when an
expression does not parse or a query that should have data has none. Queries on optional signals, ones
that look back further than the server's history, filters nothing passes, alerts not firing and the
job dashboard of a site where no series carries the job label ("no jobs") are reported as such, not failed.
The whole run has a deadline (`--deadline`): past it, the queries not yet checked are listed and it fails.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

from gpudash.catalog import PROFILES, profile
from gpudash.check.judge import Result, after_deadline, failures, run_check
from gpudash.check.progress import Progress
from gpudash.check.prometheus_api import QUERY_TIMEOUT_S
from gpudash.check.queries import built_dashboards, dashboard_groups, load_dashboards, rule_groups
from gpudash.check.tables import as_json, item_name, render_table, summary
from gpudash.config.durations import parse_duration, parse_seconds
from gpudash.config.loading import load_settings
from gpudash.config.options import config_options
from gpudash.deadline import Deadline
from gpudash.errors import CheckFailed, RemoteError, UsageError
from gpudash.promql.for_settings import promql_for
from gpudash.repository import DASHBOARDS_JSON_DIR, RULES_DIR

DEFAULT_URL = "http://127.0.0.1:9090"
DEFAULT_DEADLINE = "10m"


def _deadline_seconds(ctx: click.Context, param: click.Parameter, text: str) -> float:
    try:
        seconds = parse_seconds(text)
    except ValueError:
        seconds = 0.0
    if not seconds > 0:
        raise UsageError(f"--deadline {text!r}: expected a positive duration such as 90, 90s or 10m")
    return seconds


def deadline_option(what: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """--deadline: how long the whole run may take (`check` and `preview`; a request's own limit is --timeout)."""
    return click.option("--deadline", "deadline_s", default=DEFAULT_DEADLINE, show_default=True,
                        callback=_deadline_seconds, metavar="DURATION",
                        help=f"The whole run: past it no query is sent, {what} and the command fails (exit 4). "
                             "Seconds, or 90s, 10m, 1h.")


def deadline_text(seconds: float) -> str:
    return f"{seconds:g} s"


def parse_vars(pairs: Sequence[str], example: str = "cluster=prod-a") -> dict[str, str]:
    """--var NAME=VALUE options as {name: value} (a leading $ dropped); UsageError naming a malformed one."""
    variables = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"--var {pair!r}: expected NAME=VALUE, e.g. --var {example}")
        variables[name.strip().lstrip("$")] = value
    return variables


@click.command("check")
@click.option("--prometheus", "url", envvar="PROMETHEUS_URL", default=DEFAULT_URL, show_default=True,
              help="Prometheus (or VictoriaMetrics, Thanos, Mimir) query URL; default $PROMETHEUS_URL.")
@click.option("--dashboards", "dashboard_paths", multiple=True, type=click.Path(path_type=Path),
              help=f"Dashboard JSON file or folder, repeatable (default {DASHBOARDS_JSON_DIR}).")
@click.option("--profile", "profile_name", type=click.Choice(sorted(PROFILES)), default=None,
              help="Build the dashboards for this metric profile in memory instead of reading JSON.")
@click.option("--rules", "rule_paths", multiple=True, type=click.Path(path_type=Path),
              help=f"Rule file or folder, repeatable (default {RULES_DIR}).")
@click.option("--no-rules", is_flag=True, help="Check the dashboards only.")
@click.option("--var", "var_pairs", multiple=True, metavar="NAME=VALUE",
              help="Set a dashboard variable instead of All, e.g. --var cluster=prod-a (repeatable).")
@click.option("--range", "range_text", default=None, help="Time range instead of each dashboard's own (e.g. 1h).")
@click.option("--timeout", type=click.FloatRange(min=0.1), default=QUERY_TIMEOUT_S, show_default=True,
              help="Seconds per query, the whole answer (a slow query fails alone; the run goes on).")
@deadline_option("the queries not checked are listed")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--wide", is_flag=True, help="Show whole expressions instead of cutting them short.")
@config_options()
def check(url: str, dashboard_paths: tuple[Path, ...], profile_name: str | None, rule_paths: tuple[Path, ...],
          no_rules: bool, var_pairs: tuple[str, ...], range_text: str | None, timeout: float, deadline_s: float,
          fmt: str, wide: bool, thresholds: Path | None, site: Path | None) -> None:
    """Run every panel, variable and rule query against a live Prometheus; exit 1 if any fails.

    A run that takes a while says how far it is on stderr every 10 s; stdout holds only the tables (or the
    JSON). Past --deadline it stops, prints what it checked, lists what it did not, and exits 4.

    \b
    Examples:
      gpudash check --prometheus http://127.0.0.1:9090
      PROMETHEUS_URL=http://vm:8428 gpudash check --var cluster=prod-a
      gpudash check --profile nvidia_smi --no-rules
      gpudash check --dashboards dashboards/json/gpudash-job.json --no-rules --var job=48213
    """
    settings = load_settings(thresholds, site)
    variables = parse_vars(var_pairs)
    scrape_s = settings.site.scrape_interval.seconds
    range_s = _range_seconds(range_text)
    if profile_name is not None:
        if dashboard_paths:
            raise UsageError("--profile builds the dashboards itself; leave out --dashboards")
        dashboards = built_dashboards(settings, profile_name)
    else:
        dashboards = load_dashboards(list(dashboard_paths) or [DASHBOARDS_JSON_DIR])
    groups = dashboard_groups(dashboards, scrape_s, variables, range_s)
    if not no_rules:
        groups += rule_groups(list(rule_paths) or [RULES_DIR])
    q = promql_for(settings, profile=profile(profile_name) if profile_name else None)
    progress = Progress("checked", "queries", sum(len(g.queries) for g in groups),
                        lambda line: click.echo(line, err=True))
    deadline = Deadline(deadline_s)

    def judged(result: Result) -> None:
        progress.tick(result.status.failed)

    results = run_check(url, groups, q, timeout, deadline, judged)
    if fmt == "json":
        click.echo(as_json(results))
    else:
        for result in results:
            click.echo(render_table(result, wide))
            click.echo()
        click.echo(summary(results, url))
    failed, late = failures(results), after_deadline(results)
    if late:
        total = progress.total
        raise RemoteError(f"the check's deadline ({deadline_text(deadline_s)}) passed: {total - len(late)} of {total} "
                          f"queries checked ({len(failed)} failed), {len(late)} not checked: {_names(late, 3)}")
    if failed:
        raise CheckFailed(f"{len(failed)} queries failed: {_names(failed, 5)}")


def _names(results: Sequence[Result], shown: int) -> str:
    names = ", ".join(f"{r.query.source} / {item_name(r)}" for r in results[:shown])
    return names + (f" and {len(results) - shown} more" if len(results) > shown else "")


def _range_seconds(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return parse_duration(text.removeprefix("now-")).seconds
    except ValueError:
        raise UsageError(f"--range {text!r}: expected a duration such as 1h, 30m or 6h") from None
