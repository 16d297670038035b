"""A secret kept in a file that every user of the machine can read: one warning line, as ssh gives for a private
key, and the command goes on (the file may be meant for a group, or the machine for one person)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import click

_WARNED: set[str] = set()  # each file once per run, however often it is read


def readable_by_others(path: Path, what: str) -> str | None:
    """The warning for `path` when users other than its owner and group may read it, else None (a file that
    cannot be read here, say on another machine, says nothing)."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return None
    if not mode & stat.S_IROTH:
        return None
    return f"warning: {path}: mode {mode:04o} lets every user of this machine read the {what}; chmod o-rwx it"


def warn_if_readable_by_others(path: Path, what: str) -> None:
    """Print `readable_by_others`' warning on stderr, once per file in this process."""
    key = os.path.realpath(path)
    if key in _WARNED:
        return
    warning = readable_by_others(path, what)
    if warning:
        _WARNED.add(key)
        click.echo(f"gpudash: {warning}", err=True)
