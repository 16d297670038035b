"""`gpudash preview`: a PNG of each dashboard from live Prometheus data, no Grafana needed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from gpudash.check.cli import deadline_option, parse_vars
from gpudash.check.queries import load_dashboards, parse_range
from gpudash.config.durations import parse_duration
from gpudash.deadline import Deadline
from gpudash.errors import UsageError
from gpudash.preview.previewer import Dashboards, PreviewIncomplete, draw_previews
from gpudash.repository import DASHBOARDS_JSON_DIR

DEFAULT_OUT = Path("previews")


def _revision(ref: str, directory: Path) -> list[dict[str, Any]]:
    from gpudash.review.git import dashboards_at, repository_root, resolve

    cwd = Path.cwd()
    root = repository_root(cwd)
    try:
        inside = directory.resolve().relative_to(root.resolve())
    except ValueError:
        raise UsageError(f"{directory}: not inside the git repository at {root}") from None
    return list(dashboards_at(resolve(ref, cwd), inside, root).values())


@click.command("preview")
@click.option("--prometheus", "prometheus_url", envvar="PROMETHEUS_URL", required=True, metavar="URL",
              help="Prometheus (or anything speaking its HTTP API) to read from (default: $PROMETHEUS_URL).")
@click.option("--out", type=click.Path(path_type=Path), default=DEFAULT_OUT, show_default=True,
              help="Folder for the pictures: <uid>.png (with --compare, <uid>.compare.png).")
@click.option("--range", "range_text", default="1h", show_default=True, help="Time range drawn: 30m, 6h, 2d.")
@click.option("--dashboard", "uids", multiple=True, metavar="UID", help="Only this dashboard (repeatable).")
@click.option("--dir", "directory", type=click.Path(path_type=Path), default=DASHBOARDS_JSON_DIR,
              show_default=True, help="Directory of dashboard JSON.")
@click.option("--compare", "ref", default=None, metavar="REF",
              help="Draw the dashboards committed at git revision REF beside the working tree's (before | after).")
@click.option("--var", "pairs", multiple=True, metavar="NAME=VALUE",
              help="Set a dashboard variable instead of its default choice (repeatable).")
@click.option("--scrape-interval", default="15s", show_default=True,
              help="The data source's scrape interval, for $__interval and $__rate_interval.")
@deadline_option("the pictures drawn by then are written, the others named")
def preview(prometheus_url: str, out: Path, range_text: str, uids: tuple[str, ...], directory: Path,
            ref: str | None, pairs: tuple[str, ...], scrape_interval: str, deadline_s: float) -> None:
    """Draw each dashboard as a PNG from live data: the grid, each panel in its own form, no Grafana.

    Variables take Grafana's first-load choice (All where a variable has it, else its first value);
    panels draw lines with legends and units, stat numbers and gauges coloured by their thresholds, bar
    gauges, heatmaps, tables (top rows), state timelines and text; a panel without data says "No data".
    Prints the path of each picture; on stderr, each dashboard drawn and, every 10 s of a long run, how many
    panels are done. Exits 4 when every query failed (the pictures, each panel showing its error, are written)
    or when --deadline passed first (the pictures drawn by then are written, the others named). Needs
    matplotlib: pip install 'gpudash[preview]'.

    \b
    Examples:
      gpudash preview --prometheus http://localhost:9090
      gpudash preview --prometheus http://localhost:9090 --range 6h --dashboard gpudash-node
      gpudash preview --prometheus http://localhost:9090 --compare main   # before | after, side by side
    """
    range_s = parse_range(range_text)
    try:
        scrape_s = max(1, int(parse_duration(scrape_interval).seconds))
    except ValueError as exc:
        raise UsageError(f"--scrape-interval {scrape_interval!r}: {exc}") from None
    variables = parse_vars(pairs, example="instance=gpu-node-01:9400")
    after = Dashboards.of([d for d, _ in load_dashboards([directory])])
    before = Dashboards.of(_revision(ref, directory)) if ref is not None else None
    try:
        paths = draw_previews(prometheus_url, out, after, uids, range_s, scrape_s, variables, before, ref,
                              progress=lambda line: click.echo(line, err=True), deadline=Deadline(deadline_s))
    except PreviewIncomplete as incomplete:
        for path in incomplete.paths:
            click.echo(str(path))
        raise
    for path in paths:
        click.echo(str(path))
