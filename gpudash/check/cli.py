"""`gpudash check`: run every dashboard query and every rule expression against a live Prometheus.

Dashboards that look right but query nothing are the commonest failure of GPU dashboards (an empty
`$gpu` variable, a renamed metric, a label that is not there). This asks the server itself: each panel
and variable query of each dashboard, interpolated as Grafana would with every variable set to All, and
each alerting and recording rule. It prints one table per dashboard and rule file, and fails when an
expression does not parse or a query that should have data has none. Queries on optional signals, ones
that look back further than the server's history, filters nothing passes and alerts not firing are
reported as such, not failed.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from gpudash.catalog import PROFILES, Profile, profile
from gpudash.check.client import QUERY_TIMEOUT_S, Prometheus, Window
from gpudash.check.run import Checker, GroupResult, Result, Status
from gpudash.check.targets import (
    RULES_PREFIX,
    Group,
    Interpolation,
    dashboard_group,
    load_dashboards,
    one_line,
    parse_range,
    rule_groups,
)
from gpudash.config.durations import parse_duration
from gpudash.config.loading import Settings, load_settings
from gpudash.errors import CheckFailed, UsageError
from gpudash.layout import DASHBOARDS_JSON_DIR, DEFINITIONS_DIR, RULES_DIR
from gpudash.redaction import split_userinfo

DEFAULT_URL = "http://127.0.0.1:9090"
EXPR_WIDTH = 64


def dashboard_groups(dashboards: Sequence[tuple[dict[str, Any], str]], scrape_interval_s: int,
                     variables: dict[str, str] | None = None, range_s: int | None = None) -> list[Group]:
    """One group per dashboard; the range is each dashboard's own unless `range_s` is given."""
    groups = []
    for dashboard, origin in dashboards:
        span = range_s or parse_range(str((dashboard.get("time") or {}).get("from") or "now-6h"))
        groups.append(dashboard_group(dashboard, origin, Interpolation(span, scrape_interval_s, variables),
                                      variables))
    return groups


def built_dashboards(settings: Settings, profile_name: str, definitions: Path = DEFINITIONS_DIR
                     ) -> list[tuple[dict[str, Any], str]]:
    """The dashboards generated in memory for a metric profile (what `gpudash dashboards --profile` writes)."""
    from gpudash.dashboards.build import build_all

    built = build_all(settings, definitions, profile_name=profile_name)
    return [(data, f"{definitions}/ (profile {profile_name})") for _, data in sorted(built.items())]


def run_check(url: str, groups: Sequence[Group], metric_profile: Profile, timeout: float = QUERY_TIMEOUT_S,
              scrape_interval_s: int = 15) -> list[GroupResult]:
    """Run every query of every group; raise RemoteError (one line) when the server cannot be reached."""
    server = Prometheus(url, timeout)
    try:
        server.probe()
        now = server.now()
        longest = max((g.range_s for g in groups), default=3600) or 3600
        step = Interpolation(longest, scrape_interval_s).interval_s
        checker = Checker(server, metric_profile, Window(now, longest, step))
        return [checker.run_group(group) for group in groups]
    finally:
        server.close()


def failures(results: Sequence[GroupResult]) -> list[Result]:
    return [r for g in results for r in g.failures]


# ------------------------------------------------------------------------------------------ output


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def render_table(result: GroupResult, wide: bool = False) -> str:
    group = result.group
    span = f", range {group.range_s // 3600}h" if group.range_s and group.range_s % 3600 == 0 else ""
    lines = [f"{group.title}  ({group.origin}: {len(group.queries)} queries{span})"]
    name_width = min(34, max([5, *(len(_item(r)) for r in result.results)]))
    first = "RULE" if group.title.startswith(RULES_PREFIX) else "PANEL"
    rows = [(first, "EXPRESSION", "SERIES", "RESULT")]
    for r in result.results:
        expr = one_line(r.query.expr)
        result_text = r.status.value + (f": {r.detail}" if r.detail else "")
        rows.append((_cut(_item(r), name_width), expr if wide else _cut(expr, EXPR_WIDTH), str(r.series),
                     result_text))
    expr_width = max(len(row[1]) for row in rows)
    for item, expr, series, text in rows:
        lines.append(f"  {item:<{name_width}}  {expr:<{expr_width}}  {series:>6}  {text}")
    return "\n".join(lines)


def _item(r: Result) -> str:
    return f"{r.query.item} [{r.query.ref}]" if r.query.ref and r.query.ref != "A" else r.query.item


def summary(results: Sequence[GroupResult], url: str) -> str:
    counts = Counter(r.status for g in results for r in g.results)
    total = sum(counts.values())
    parts = [f"{counts[s]} {s.value.lower()}" for s in Status if counts[s] and not s.failed]
    bad = sum(counts[s] for s in Status if s.failed)
    shown = split_userinfo(url).url  # credentials in the URL log in; they are never printed
    return f"checked {total} queries against {shown}: {', '.join(parts) or 'none passed'}; {bad} failed"


def as_json(results: Sequence[GroupResult]) -> str:
    return json.dumps([
        {"title": g.group.title, "origin": g.group.origin, "results": [
            {"item": r.query.item, "ref": r.query.ref, "kind": r.query.kind, "expr": r.query.expr,
             "series": r.series, "status": r.status.name.lower(), "detail": r.detail} for r in g.results]}
        for g in results
    ], indent=2)


def _parse_vars(pairs: Sequence[str]) -> dict[str, str]:
    variables = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"--var {pair!r}: expected NAME=VALUE, e.g. --var cluster=prod-a")
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
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--wide", is_flag=True, help="Show whole expressions instead of cutting them short.")
@click.option("--thresholds", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="thresholds.yaml to read (default: ./thresholds.yaml or $GPUDASH_THRESHOLDS).")
@click.option("--site", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Site config (default: ./gpudash.yaml when present, or $GPUDASH_SITE).")
def check(url: str, dashboard_paths: tuple[Path, ...], profile_name: str | None, rule_paths: tuple[Path, ...],
          no_rules: bool, var_pairs: tuple[str, ...], range_text: str | None, timeout: float, fmt: str,
          wide: bool, thresholds: Path | None, site: Path | None) -> None:
    """Run every panel, variable and rule query against a live Prometheus; exit 1 if any fails.

    \b
    Examples:
      gpudash check --prometheus http://127.0.0.1:9090
      PROMETHEUS_URL=http://vm:8428 gpudash check --var cluster=prod-a
      gpudash check --profile nvidia_smi --no-rules
    """
    settings = load_settings(thresholds, site)
    variables = _parse_vars(var_pairs)
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
    metric_profile = profile(profile_name or settings.site.profile)
    results = run_check(url, groups, metric_profile, timeout, scrape_s)
    if fmt == "json":
        click.echo(as_json(results))
    else:
        for result in results:
            click.echo(render_table(result, wide))
            click.echo()
        click.echo(summary(results, url))
    failed = failures(results)
    if failed:
        names = ", ".join(f"{r.query.source} / {_item(r)}" for r in failed[:5])
        more = f" and {len(failed) - 5} more" if len(failed) > 5 else ""
        raise CheckFailed(f"{len(failed)} queries failed: {names}{more}")


def _range_seconds(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return parse_duration(text.removeprefix("now-")).seconds
    except ValueError:
        raise UsageError(f"--range {text!r}: expected a duration such as 1h, 30m or 6h") from None
