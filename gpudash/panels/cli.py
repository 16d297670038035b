"""`gpudash dashboards`: generate the dashboard JSON from dashboards/*.py."""

from __future__ import annotations

from pathlib import Path

import click

from gpudash.catalog import PROFILES
from gpudash.config.loading import load_settings
from gpudash.config.options import config_options
from gpudash.panels.build import build_all, check_all, write_all
from gpudash.repository import DEFINITIONS_DIR, JSON_DIR_NAME


@click.command("dashboards")
@click.option("--definitions", type=click.Path(path_type=Path), default=DEFINITIONS_DIR, show_default=True,
              help="Directory of dashboard definitions (*.py, one per dashboard).")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Write the JSON here instead of <definitions>/json.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 naming the files that are stale.")
@config_options(dir_okay=True)
@click.option("--profile", "profile_name", type=click.Choice(sorted(PROFILES)), default=None,
              help="Metric profile, overriding the site config: dcgm (dcgm-exporter and gpudash exporter) "
                   "or nvidia_smi (nvidia_gpu_exporter).")
@click.option("--no-recording-rules", is_flag=True,
              help="Inline the raw expressions instead of reading recording rules (for comparison).")
def dashboards(definitions: Path, out: Path | None, check: bool, thresholds: Path | None, site: Path | None,
               profile_name: str | None, no_recording_rules: bool) -> None:
    """Generate the Grafana dashboards as JSON from their Python definitions.

    Reads thresholds.yaml (colour steps) and the metric catalog, builds each dashboards/*.py with
    grafanalib, and writes modern Grafana 10-12 JSON with sorted keys, all or nothing: nothing is written
    when thresholds.yaml or a definition is invalid, or when the output folder cannot be written (exit 2).

    The folder keeps a record (.gpudash-files) of what gpudash wrote. A JSON file no definition produces
    is removed only when it is in that record and unchanged; any other file is kept and named. A file
    of the same name as a dashboard that is not in the record is never replaced: the run stops (exit 2).

    \b
    Examples:
      gpudash dashboards                      # rewrite dashboards/json/*.json
      gpudash dashboards --check              # CI: fail if the committed JSON is stale
      gpudash dashboards --profile nvidia_smi --out /tmp/smi
    """
    settings = load_settings(thresholds, site)
    built = build_all(settings, definitions, recorded=not no_recording_rules, profile_name=profile_name)
    target = out or definitions / JSON_DIR_NAME
    if check:
        check_all(built, target)
        click.echo(f"{len(built)} dashboards in {target} are up to date")
        return
    outcome = write_all(built, target)
    for path in outcome.written:
        click.echo(f"wrote {path}")
    for path in outcome.removed:
        click.echo(f"removed {path} (no definition)")
    for path, why in outcome.kept:
        click.echo(f"kept {path}: {why}")
    if outcome.kept and not outcome.recorded:
        click.echo(f"{target} had no record of the files gpudash wrote, so nothing was removed: delete the "
                   "kept files above by hand if gpudash left them behind")
    if not outcome.written and not outcome.removed:
        click.echo(f"{len(built)} dashboards in {target} already up to date")
