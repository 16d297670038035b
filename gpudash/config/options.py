"""The two options every command that reads the config takes: --thresholds and --site (gpudash.yaml)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click

from gpudash.config.durations import parse_seconds
from gpudash.errors import UsageError

F = TypeVar("F", bound=Callable[..., object])

THRESHOLDS_HELP = "thresholds.yaml to read (default: ./thresholds.yaml or $GPUDASH_THRESHOLDS)."
SITE_HELP = "Site config file (gpudash.yaml) to read (default: ./gpudash.yaml when present, or $GPUDASH_SITE)."


def config_options(dir_okay: bool = False, thresholds_help: str = THRESHOLDS_HELP,
                   site_help: str = SITE_HELP) -> Callable[[F], F]:
    """`--thresholds PATH` and `--site PATH`, passed to the command as `thresholds` and `site` (None: default)."""

    def decorate(command: F) -> F:
        kind = click.Path(dir_okay=dir_okay, path_type=Path)
        command = click.option("--site", type=kind, default=None, help=site_help)(command)
        return click.option("--thresholds", type=kind, default=None, help=thresholds_help)(command)

    return decorate


def option_seconds(flag: str, text: str, *, minimum: float, examples: str) -> float:
    """A command-line duration (``500ms``, ``5s``, ``1m``) in seconds, or UsageError naming the flag."""
    try:
        value = parse_seconds(text, milliseconds=True)
    except ValueError:
        raise UsageError(f"{flag} {text!r}: expected a duration such as {examples}") from None
    if value < minimum:
        raise UsageError(f"{flag} {text!r}: must be at least {minimum * 1000:g}ms")
    return value
