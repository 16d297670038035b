"""`gpudash report`: the week's GPU-hours by team (busy, idle, down, unallocated), goodput and interruptions."""

from __future__ import annotations

import importlib
import time
from datetime import datetime, timezone
from pathlib import Path

import click

from gpudash.backtest.cli import DEFAULT_URL, explicit_range, progress, since_seconds, time_range
from gpudash.backtest.engine import MAX_POINTS
from gpudash.check.prometheus_api import PrometheusClient
from gpudash.config.durations import parse_duration
from gpudash.config.loading import Settings, load_settings
from gpudash.config.options import config_options
from gpudash.errors import UsageError
from gpudash.files import write_tree
from gpudash.report.collect import DEFAULT_CHUNK_STEPS, Collector, RangeQueries, chunks, step_times
from gpudash.report.figures import Report, build_report
from gpudash.report.range_queries import GPU_COUNT, report_queries
from gpudash.report.render import FORMATS, RENDER, SUFFIX


def step_seconds(text: str, rule_interval_s: int) -> int:
    try:
        step = parse_duration(text).seconds
    except ValueError as exc:
        raise UsageError(f"--step {text!r}: {exc}") from None
    if step < rule_interval_s or step % rule_interval_s:
        raise UsageError(f"--step {text!r}: must be a multiple of the rule interval ({rule_interval_s}s, "
                         "gpudash.yaml scrape.interval)")
    return step


def make_report(client: RangeQueries, settings: Settings, step: int, start: float, end: float, *,
                chunk_steps: int = DEFAULT_CHUNK_STEPS, workers: int = 4) -> tuple[Report, int, float]:
    """The report of [start, end]; also the number of range queries asked and the seconds they took."""
    queries = report_queries(settings, step)
    first, last, count = step_times(start, end, step)
    if count < 1:
        raise UsageError(f"the range ({end - start:.0f} s) is shorter than one step ({step} s)")
    collector = Collector(client, queries, workers=workers)
    total = len(collector.names) * len(list(chunks(first, last, step, chunk_steps)))
    began = time.monotonic()
    with progress(total, "report") as tick:
        collector.tick = tick
        totals = collector.run(start, end, chunk_steps)
    if not totals.fleet_gpus:
        raise UsageError(f"Prometheus holds no {GPU_COUNT} from {_day(start)} to {_day(end)}: load gpudash's "
                         "recording rules (generated/prometheus/gpu-recording.rules.yml) or pick a range they cover")
    report = build_report(totals, start=start, step_s=step, team_label=queries.team_label,
                          job_label=queries.job_label)
    return report, totals.queries, time.monotonic() - began


def _charts(wanted: bool, out: Path | None) -> object | None:
    """gpudash.report.charts when --charts asks for it, checked before any query; None otherwise."""
    if not wanted:
        return None
    if out is None:
        raise UsageError("--charts writes a PNG beside the other files: give --out DIR")
    try:
        return importlib.import_module("gpudash.report.charts")
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] in ("matplotlib", "numpy", "PIL"):
            raise UsageError("--charts needs matplotlib, which is not installed: pip install 'gpudash[preview]'") \
                from None
        raise


def _day(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@click.command("report")
@click.option("--since", default="7d", show_default=True, help="How far back from now (the server's clock).")
@click.option("--start", default=None, help="Start instead of --since: Unix seconds or RFC 3339.")
@click.option("--end", default=None, help="End, with --start.")
@click.option("--prometheus", "url", envvar="PROMETHEUS_URL", default=DEFAULT_URL, show_default=True,
              help="Prometheus (or a compatible server) holding the history; default $PROMETHEUS_URL.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="markdown", show_default=True,
              help="What is printed (without --out).")
@click.option("--out", "out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write gpu-report-<end date>.md, .csv and .json into this folder instead of printing.")
@click.option("--charts", is_flag=True, help="With --out, also gpu-report-<end date>.png (needs matplotlib: the "
              "preview extra).")
@click.option("--step", default="5m", show_default=True,
              help="Resolution: each step's GPU-seconds are added up (a multiple of the rule interval).")
@click.option("--chunk", "chunk_steps", type=click.IntRange(1, MAX_POINTS - 1), default=DEFAULT_CHUNK_STEPS,
              show_default=True, help="Steps per range query.")
@click.option("--workers", type=click.IntRange(1, 16), default=4, show_default=True,
              help="Range queries in flight.")
@click.option("--timeout", type=click.FloatRange(min=1), default=120.0, show_default=True,
              help="Seconds one range query may take.")
@config_options()
def report(since: str, start: str | None, end: str | None, url: str, fmt: str, out: Path | None, charts: bool,
           step: str, chunk_steps: int, workers: int, timeout: float, thresholds: Path | None,
           site: Path | None) -> None:
    """GPU-hours per team split into busy, idle, down and unallocated; goodput; interruptions per 1,000
    GPU-days beside Llama 3's; the top idle holders and the GPUs interrupted most (docs/report.md).

    Teams are the gpudash_job_info label gpudash.yaml names (jobs.team: account, user, partition, namespace).

    \b
    Examples:
      gpudash report --prometheus http://prom:9090 --since 7d
      gpudash report --start 2026-11-23T00:00:00Z --end 2026-11-30T00:00:00Z --format csv
      gpudash report --since 7d --out /srv/reports      # gpu-report-2026-11-30.md, .csv, .json
      gpudash report --since 7d --out /srv/reports --charts   # and gpu-report-2026-11-30.png
    """
    explicit = explicit_range(start, end)
    since_seconds(since)
    drawing = _charts(charts, out)
    settings = load_settings(thresholds, site)
    step_s = step_seconds(step, settings.site.scrape_interval.seconds)
    client = PrometheusClient(url, timeout=timeout)
    client.probe()
    lo, hi = time_range(client, since, explicit)
    result, asked, seconds = make_report(client, settings, step_s, lo, hi, chunk_steps=chunk_steps,
                                         workers=workers)
    if out is None:
        click.echo(RENDER[fmt](result), nl=False)
    else:
        day = datetime.fromtimestamp(result.end, timezone.utc).strftime("%Y-%m-%d")
        files = {f"gpu-report-{day}.{SUFFIX[name]}": RENDER[name](result).encode() for name in FORMATS}
        if drawing is not None:
            files[f"gpu-report-{day}.png"] = drawing.png(result)  # type: ignore[attr-defined]
        write_tree(out, files)
        for name in sorted(files):
            click.echo(str(out / name))
    click.echo(f"({asked} range queries in {seconds:.1f} s)", err=True)
