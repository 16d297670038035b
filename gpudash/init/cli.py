"""`gpudash init DIR`: start a site repository from the installed package."""

from __future__ import annotations

from pathlib import Path

import click

from gpudash.init.sitekit import init_site


@click.command("init")
@click.argument("folder", type=click.Path(path_type=Path), metavar="DIR")
def init(folder: Path) -> None:
    """Create a site repository in DIR from the installed gpudash, never overwriting anything.

    Writes thresholds.yaml and gpudash.yaml (every knob commented), the dashboard definitions
    (dashboards/*.py, yours to change from now on), a Makefile, requirements.txt pinning this gpudash and
    a CI workflow (.github/workflows/gpudash.yml). A file that is already in DIR is kept as it is and
    named; the rest is written all or nothing (exit 2 naming the path when DIR cannot be written).
    docs/adopt.md in gpudash's repository walks through the rest.

    \b
    Example:
      gpudash init gpu-monitoring && cd gpu-monitoring
      $EDITOR gpudash.yaml          # clusters, receivers, data source, job label
      make generate                 # dashboards/json/ and generated/, to commit
      make check                    # what CI runs
    """
    outcome = init_site(folder)
    for path in outcome.written:
        click.echo(f"wrote {path}")
    for path in outcome.kept:
        click.echo(f"kept {path} (already there, left as it is)")
    click.echo(f"{len(outcome.written)} files written, {len(outcome.kept)} kept in {folder}")
    if outcome.written:
        click.echo(f"next: cd {folder}, edit gpudash.yaml, then `make generate` and commit")
