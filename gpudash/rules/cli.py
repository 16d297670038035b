"""`gpudash rules`: render the rule files, alertmanager.yml and the scrape config into one folder."""

from __future__ import annotations

from pathlib import Path

import click

from gpudash.config.loading import load_settings
from gpudash.config.options import config_options
from gpudash.errors import StaleOutputError
from gpudash.files import write_text_tree
from gpudash.layout import GENERATED_DIR
from gpudash.rules.render import render_all, stale_files


@click.command("rules")
@click.option("--out", "out", type=click.Path(file_okay=False, path_type=Path), default=GENERATED_DIR,
              show_default=True, help="Folder to write prometheus/ and alertmanager/ into.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 naming every file that is stale.")
@config_options()
def rules(out: Path, check: bool, thresholds: Path | None, site: Path | None) -> None:
    """Render alerting and recording rules, alertmanager.yml and the scrape config.

    Writes only the files that changed, all or nothing, and never deletes a file; exit 2 naming the
    path when the folder cannot be written.

    \b
    Example:
      gpudash rules                 # regenerate generated/
      gpudash rules --check         # CI: fail if generated/ is out of date
    """
    files = render_all(load_settings(thresholds, site))
    if check:
        stale = stale_files(out, files)
        if stale:
            names = ", ".join(str(out / rel) for rel in stale)
            raise StaleOutputError(f"stale generated files (run `gpudash rules`): {names}")
        click.echo(f"{len(files)} files in {out} are up to date")
        return
    written = write_text_tree(out, files)
    for path in written:
        click.echo(f"wrote {path}")
    click.echo(f"{len(written)} of {len(files)} files changed in {out}")
