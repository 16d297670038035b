"""`gpudash diff --git REF` and `gpudash diff --textconv FILE`: reviewing dashboards in git, without Grafana.

The `diff` command itself lives with the Grafana sync (gpudash.sync.cli); these are its two offline modes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from gpudash.errors import ConfigError, UsageError
from gpudash.review.git import dashboards_at, repository_root, resolve
from gpudash.review.revisions import compare
from gpudash.review.textconv import render


def _read_dashboard(file: Path) -> dict[str, Any]:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{file}: no such dashboard file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{file}: not a readable dashboard JSON file: {exc}") from None
    if isinstance(data, dict) and isinstance(data.get("dashboard"), dict):
        data = data["dashboard"]  # an export wrapped the way Grafana's API returns it
    if not isinstance(data, dict):
        raise ConfigError(f"{file}: not a Grafana dashboard (not a JSON object)")
    return data


def textconv(file: Path) -> None:
    """Print the reviewer's rendering of one dashboard JSON file (git's textconv calls this per file)."""
    click.echo(render(_read_dashboard(file)), nl=False)


def working_tree(directory: Path) -> dict[str, dict[str, Any]]:
    """File name -> dashboard for every *.json in `directory` as it is on disk."""
    return {file.name: _read_dashboard(file) for file in sorted(directory.glob("*.json"))}


def _within(directory: Path, root: Path) -> Path:
    """`directory` relative to the repository root, as git names paths."""
    try:
        return directory.resolve().relative_to(root.resolve())
    except ValueError:
        raise UsageError(f"{directory}: not inside the git repository at {root}") from None


def _only(dashboards: dict[str, dict[str, Any]], paths: Sequence[Path]) -> dict[str, dict[str, Any]]:
    names = {path.name for path in paths}
    return {name: data for name, data in dashboards.items() if not names or name in names}


def diff_revisions(ref: str, to: str | None, directory: Path, paths: Sequence[Path]) -> int:
    """Print the summary from `ref` to `to` (default: the working tree); return how many dashboards differ."""
    cwd = Path.cwd()
    root = repository_root(cwd)
    inside = _within(directory, root)
    before = dashboards_at(resolve(ref, cwd), inside, root)
    if to is None:
        if not directory.is_dir():
            raise ConfigError(f"{directory}: no such directory of dashboard JSON")
        after, to_name = working_tree(directory), "the working tree"
    else:
        after, to_name = dashboards_at(resolve(to, cwd), inside, root), to
    if not before and not after:
        raise ConfigError(f"{inside}: no dashboard JSON files at {ref} nor in {to_name}")
    result = compare(_only(before, paths), _only(after, paths))
    for line in result.lines:
        click.echo(line)
    click.echo(f"diff {ref}..{to or '(working tree)'}: {result.differ} of {result.total} dashboards differ "
               f"in {inside}")
    return result.differ
