"""`gpudash dashboards`: generate the dashboards, classic JSON and schema v2 resources, from dashboards/*.py."""

from __future__ import annotations

from pathlib import Path

import click

from gpudash.catalog import PROFILES, profile
from gpudash.config.loading import load_settings
from gpudash.config.options import config_options
from gpudash.errors import StaleOutputError, UsageError
from gpudash.files import stale_owned, write_owned
from gpudash.panels.build import build_all
from gpudash.panels.formats import CLASSIC, FORMATS, GIT_SYNC, V2, files_for
from gpudash.repository import DEFINITIONS_DIR, JSON_DIR_NAME, V2_DIR_NAME


def _targets(formats: tuple[str, ...], out: Path | None, definitions: Path) -> list[tuple[str, Path]]:
    """(format, folder) for each format asked; none asked: the committed pair, or the classic JSON into --out."""
    if not formats:
        formats = (CLASSIC,) if out is not None else (CLASSIC, V2)
    chosen = list(dict.fromkeys(formats))
    if out is not None and len(chosen) > 1:
        raise UsageError(f"--out names one folder, and {len(chosen)} formats were asked ({', '.join(chosen)}): "
                         "give one --format with --out")
    if GIT_SYNC in chosen and out is None:
        raise UsageError("--format git-sync: give --out, the folder your Git Sync repository reads")
    committed = {CLASSIC: definitions / JSON_DIR_NAME, V2: definitions / V2_DIR_NAME}
    return [(fmt, out or committed[fmt]) for fmt in chosen]


@click.command("dashboards")
@click.option("--definitions", type=click.Path(path_type=Path), default=DEFINITIONS_DIR, show_default=True,
              help="Directory of dashboard definitions (*.py, one per dashboard).")
@click.option("--format", "formats", type=click.Choice(FORMATS), multiple=True,
              help="What to write (repeatable). classic: dashboard JSON for file provisioning, the sidecar "
                   "and Grafana 11-12 (<definitions>/json). v2: dashboard.grafana.app/v2 resources for "
                   "Grafana 13's /apis (<definitions>/v2). git-sync: the v2 resources into --out, a folder a "
                   "Git Sync repository reads. Default: classic and v2; with --out, classic.")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Write the one format asked here instead of its folder under <definitions>.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 naming the files that are stale.")
@config_options(dir_okay=True)
@click.option("--profile", "profile_name", type=click.Choice(sorted(PROFILES)), default=None,
              help="Metric profile, overriding the site config: dcgm (dcgm-exporter and gpudash exporter) "
                   "or nvidia_smi (nvidia_gpu_exporter).")
@click.option("--no-recording-rules", is_flag=True,
              help="Inline the raw expressions instead of reading recording rules (for comparison).")
def dashboards(definitions: Path, formats: tuple[str, ...], out: Path | None, check: bool, thresholds: Path | None,
               site: Path | None, profile_name: str | None, no_recording_rules: bool) -> None:
    """Generate the Grafana dashboards from their Python definitions, as classic JSON and as schema v2.

    Reads thresholds.yaml (colour steps) and the metric catalog, builds each dashboards/*.py with
    grafanalib, and writes, with sorted keys:

    \b
      classic   <definitions>/json/<uid>.json: the dashboard JSON (schemaVersion 42). File provisioning and
                the sidecar ConfigMaps take only this, also on Grafana 13, which refuses v2 files there.
      v2        <definitions>/v2/<uid>.json: {apiVersion: dashboard.grafana.app/v2, kind: Dashboard,
                metadata: {name: <uid>}, spec}, what Grafana 13 serves and stores. Panels that may have
                no data on the site (signals an exporter publishes only when asked) hide while empty.
      git-sync  the v2 resources into --out: point a Git Sync repository's path at that folder.

    Each folder is written all or nothing: nothing is written when thresholds.yaml or a definition is
    invalid, or when the folder cannot be written (exit 2). A folder keeps a record (.gpudash-files) of what
    gpudash wrote. A JSON file no definition produces is removed only when it is in that record and unchanged;
    any other file is kept and named. A file of the same name as a dashboard that is not in the record is
    never replaced: the run stops (exit 2).

    \b
    Examples:
      gpudash dashboards                      # rewrite dashboards/json and dashboards/v2
      gpudash dashboards --check              # CI: fail if the committed JSON or v2 resources are stale
      gpudash dashboards --format git-sync --out ../grafana-repo/gpu
      gpudash dashboards --profile nvidia_smi --out /tmp/smi
    """
    targets = _targets(formats, out, definitions)
    settings = load_settings(thresholds, site)
    built = build_all(settings, definitions, recorded=not no_recording_rules, profile_name=profile_name)
    site_profile = profile(profile_name or settings.site.profile)
    rendered = [(fmt, target, files_for(fmt, built, site_profile)) for fmt, target in targets]
    if check:
        stale = [path for _, target, files in rendered for path in stale_owned(target, files, "*.json")]
        if stale:
            raise StaleOutputError(f"stale dashboards, run `make dashboards`: {', '.join(stale)}")
        for fmt, target, files in rendered:
            click.echo(f"{len(files)} {_noun(fmt)} in {target} are up to date")
        return
    for fmt, target, files in rendered:
        _report(fmt, target, files)


def _report(fmt: str, target: Path, files: dict[str, bytes]) -> None:
    outcome = write_owned(target, files, "*.json")
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
        click.echo(f"{len(files)} {_noun(fmt)} in {target} already up to date")


def _noun(fmt: str) -> str:
    return "dashboards" if fmt == CLASSIC else "v2 dashboards"
