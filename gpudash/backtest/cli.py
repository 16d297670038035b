"""`gpudash backtest` and `gpudash tune`: thresholds judged, and proposed, on a Prometheus's stored history."""

from __future__ import annotations

import difflib
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import click

from gpudash.backtest.engine import DEFAULT_CHUNK_STEPS, MAX_POINTS, chunk_count
from gpudash.backtest.replay import (
    RECORDING_MODES,
    Result,
    backtest,
    check_history,
    plan_rules,
    presence_metric,
)
from gpudash.backtest.rule_set import rule_set
from gpudash.backtest.summary_text import as_json, render, render_compare
from gpudash.check.prometheus_api import PrometheusClient
from gpudash.config.durations import parse_duration
from gpudash.config.loading import Settings, load_settings
from gpudash.config.options import config_options
from gpudash.errors import UsageError

DEFAULT_URL = "http://127.0.0.1:9090"


def parse_time(text: str, option: str) -> float:
    """Unix seconds or an RFC 3339 time (2026-11-30T12:00:00Z)."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"{option} {text!r}: expected Unix seconds or a time such as 2026-11-30T12:00:00Z") from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).timestamp()


def explicit_range(start: str | None, end: str | None) -> tuple[float, float] | None:
    """--start and --end, checked before anything is asked of the server; None when --since is used."""
    if (start is None) != (end is None):
        raise UsageError("--start and --end go together (or use --since)")
    if start is None or end is None:
        return None
    lo, hi = parse_time(start, "--start"), parse_time(end, "--end")
    if hi <= lo:
        raise UsageError(f"--end {end!r} is not after --start {start!r}")
    return lo, hi


def since_seconds(since: str) -> int:
    try:
        return parse_duration(since).seconds
    except ValueError as exc:
        raise UsageError(f"--since {since!r}: {exc}") from None


def time_range(client: PrometheusClient, since: str, explicit: tuple[float, float] | None) -> tuple[float, float]:
    """The explicit range, or the last `since` by the server's clock."""
    if explicit is not None:
        return explicit
    now = client.now()
    return now - since_seconds(since), now


@contextmanager
def progress(total: int, label: str) -> Iterator[Callable[[], None]]:
    """A progress bar on a terminal (stderr); nothing when output goes to a file or a pipe."""
    if not sys.stderr.isatty():
        yield lambda: None
        return
    lock = threading.Lock()  # chunks finish on several threads
    with click.progressbar(length=total, label=label, file=sys.stderr) as bar:

        def tick() -> None:
            with lock:
                bar.update(1)

        yield tick


def run_backtest(client: PrometheusClient, settings: Settings, start: float, end: float, mode: str,
                 chunk_steps: int, workers: int, label: str) -> Result:
    rules = rule_set(settings)
    alerts, inlined = plan_rules(client, rules, mode, start, end)
    warm = max((a.for_s for a in alerts), default=0)
    total = len(alerts) * chunk_count(start, end, rules.interval_s, warm, chunk_steps)
    with progress(total, label) as tick:
        return backtest(client, rules, alerts, start, end, chunk_steps=chunk_steps, workers=workers,
                        inlined=inlined, tick=tick)


def _connect(url: str, timeout: float) -> PrometheusClient:
    client = PrometheusClient(url, timeout=timeout)
    client.probe()
    return client


_common = [
    click.option("--prometheus", "url", envvar="PROMETHEUS_URL", default=DEFAULT_URL, show_default=True,
                 help="Prometheus (or a compatible server) holding the history; default $PROMETHEUS_URL."),
    click.option("--recording-rules", "mode", type=click.Choice(RECORDING_MODES), default="auto", show_default=True,
                 help="How alerts read recorded series: auto inlines those the history lacks, inline always "
                      "inlines (exact over any history), recorded reads them as stored."),
    click.option("--chunk", "chunk_steps", type=click.IntRange(1, MAX_POINTS - 1), default=DEFAULT_CHUNK_STEPS,
                 show_default=True, help="Evaluations per range query (Prometheus answers at most 11,000)."),
    click.option("--workers", type=click.IntRange(1, 64), default=4, show_default=True,
                 help="Rules evaluated at once (range queries in flight)."),
    click.option("--timeout", type=click.FloatRange(min=1), default=120.0, show_default=True,
                 help="Seconds one range query may take."),
]


def common_options(command: Callable[..., None]) -> Callable[..., None]:
    for option in reversed(_common):
        command = option(command)
    return command


@click.command("backtest")
@click.option("--since", default="7d", show_default=True, help="How far back from now (the server's clock).")
@click.option("--start", default=None, help="Start instead of --since: Unix seconds or RFC 3339.")
@click.option("--end", default=None, help="End, with --start.")
@click.option("--compare", "compare", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="A second thresholds.yaml, shown side by side on the same history (a Markdown table).")
@click.option("--json", "as_json_flag", is_flag=True, help="Print JSON instead of a table.")
@common_options
@config_options()
def backtest_command(since: str, start: str | None, end: str | None, compare: Path | None, as_json_flag: bool,
                     url: str, mode: str, chunk_steps: int, workers: int, timeout: float,
                     thresholds: Path | None, site: Path | None) -> None:
    """What the alert rules of a thresholds.yaml would have done over the stored history.

    Renders the alerting rules as `gpudash rules` does, evaluates them at the rule interval over the
    history with range queries, applies `for:` (and keep_firing_for) as Prometheus's rules manager does,
    and replays the generated Alertmanager routes (grouping, inhibitions, group_wait / group_interval /
    repeat_interval) to estimate the notifications. Per alert and severity: incidents (firing episodes),
    notifications that carry it, time firing, and the GPUs with the most incidents.

    \b
    Examples:
      gpudash backtest --prometheus http://prom:9090 --since 7d
      gpudash backtest --since 14d --compare proposed-thresholds.yaml   # paste into the pull request
      gpudash backtest --start 2026-11-01T00:00:00Z --end 2026-11-08T00:00:00Z --json
    """
    explicit = explicit_range(start, end)
    since_seconds(since)
    settings = load_settings(thresholds, site)
    other = load_settings(compare, site) if compare is not None else None
    client = _connect(url, timeout)
    lo, hi = time_range(client, since, explicit)
    check_history(client, presence_metric(settings.site.profile), lo, hi)
    first = run_backtest(client, settings, lo, hi, mode, chunk_steps, workers, str(settings.thresholds_path))
    if other is None:
        click.echo(as_json(first.summary) if as_json_flag else render(first.summary, str(settings.thresholds_path)))
        _inline_note(first)
        return
    second = run_backtest(client, other, lo, hi, mode, chunk_steps, workers, str(other.thresholds_path))
    if as_json_flag:
        click.echo(as_json(first.summary, second.summary))
    else:
        click.echo(render_compare(first.summary, second.summary, str(settings.thresholds_path),
                                  str(other.thresholds_path)))
    _inline_note(first)


def _inline_note(result: Result) -> None:
    s = result.stats
    inlined = f"; recorded series read from raw samples: {', '.join(result.inlined)}" if result.inlined else ""
    click.echo(f"({s.queries} range queries in {s.seconds:.1f} s{inlined})", err=True)


@click.command("tune")
@click.option("--since", default="14d", show_default=True, help="How much history to learn from.")
@click.option("--write", is_flag=True, help="Write the proposals into thresholds.yaml (comments and order kept).")
@common_options
@config_options()
def tune_command(since: str, write: bool, url: str, mode: str, chunk_steps: int, workers: int, timeout: float,
                 thresholds: Path | None, site: Path | None) -> None:
    """Propose thresholds.yaml values from the fleet's own history, and backtest them against the current ones.

    Each proposal comes with one line of reasoning (per GPU model where the series carry modelName);
    then the diff of thresholds.yaml and a backtest of old against new on the same history. Nothing is
    written without --write; with it, only the proposed values change, every comment and the order of the
    file kept, and the result must load before it replaces the file.

    \b
    Examples:
      gpudash tune --prometheus http://prom:9090 --since 14d
      gpudash tune --since 14d --write && git diff thresholds.yaml
    """
    from gpudash.backtest.tune import changes, propose
    from gpudash.backtest.yamledit import edited, write_validated

    since_seconds(since)
    settings = load_settings(thresholds, site)
    client = _connect(url, timeout)
    lo, hi = time_range(client, since, None)
    check_history(client, presence_metric(settings.site.profile), lo, hi)
    proposals = propose(client, settings, lo, hi)
    if not proposals:
        click.echo(f"no change proposed: {settings.thresholds_path} fits the last {since} of this fleet")
        return
    for p in proposals:
        click.echo(f"{p.key}: {p.old:g} -> {p.value_text()}  ({p.reason})")
    path = settings.thresholds_path
    old_text = path.read_text(encoding="utf-8")
    new_text = edited(old_text, changes(proposals))
    click.echo()
    click.echo("".join(difflib.unified_diff(old_text.splitlines(keepends=True), new_text.splitlines(keepends=True),
                                            f"a/{path}", f"b/{path}")))
    with tempfile.TemporaryDirectory(prefix="gpudash-tune-") as tmp:
        proposed_path = Path(tmp) / path.name
        write_validated(proposed_path, new_text)
        proposed = load_settings(proposed_path, site)
        old = run_backtest(client, settings, lo, hi, mode, chunk_steps, workers, "current")
        new = run_backtest(client, proposed, lo, hi, mode, chunk_steps, workers, "proposed")
    click.echo(render_compare(old.summary, new.summary, str(path), "proposed"))
    if write:
        write_validated(path, new_text)
        click.echo(f"wrote {path}")
    else:
        click.echo(f"(nothing written; --write changes {path})")
