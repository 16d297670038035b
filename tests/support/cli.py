"""`gpudash ARGS` run in-process, as the shell would see it: exit code, stdout and stderr."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

from gpudash.cli import main


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str


@contextmanager
def _inside(cwd: Path | None) -> Iterator[None]:
    before = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(before)


def gpudash(*args: str, cwd: Path | None = None, env: Mapping[str, str | None] | None = None) -> Ran:
    """Run `gpudash ARGS` through gpudash.cli.main, its error handling included, in CliRunner's isolation.

    `env` changes the environment for this run only (None removes a variable); `cwd` is the folder it runs in.
    The root logger is put back as it was, so a `-v` run leaves no handler on a stream that is gone.
    """
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    code = 0
    with CliRunner().isolation(env=dict(env or {})) as (out, err, _), _inside(cwd):
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            root.handlers[:] = handlers
            root.setLevel(level)
        return Ran(code, out.getvalue().decode("utf-8", "replace"), err.getvalue().decode("utf-8", "replace"))
