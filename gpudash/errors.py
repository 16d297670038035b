"""One error family for the whole tool: each class knows its exit code and shows itself as one line.

Every GpudashError is a click.ClickException, so click (the `gpudash` command, or a CliRunner in a test)
shows it as `gpudash: <message>` on stderr and exits with its code; anything else is a bug and keeps its
traceback.
"""

from __future__ import annotations

from typing import IO, Any

import click


class GpudashError(click.ClickException):
    """Base of every error gpudash reports to a person."""

    exit_code = 2

    def format_message(self) -> str:
        # One line, always: a multi-line message would break log parsers and CI annotations.
        return " ".join(self.message.split("\n"))

    def show(self, file: IO[Any] | None = None) -> None:
        # gpudash's own prefix instead of click's "Error: ".
        click.echo(f"gpudash: {self.format_message()}", file=file, err=file is None)


class ConfigError(GpudashError):
    """thresholds.yaml or a site config is missing, unreadable or invalid."""

    exit_code = 2


class UsageError(GpudashError):
    """A flag or argument combination that cannot work."""

    exit_code = 2


class StaleOutputError(GpudashError):
    """Committed generated files differ from what the code generates now."""

    exit_code = 1


class DriftError(GpudashError):
    """A remote object was edited outside gpudash since gpudash last wrote it."""

    exit_code = 3


class RemoteError(GpudashError):
    """A server (Grafana, Prometheus) refused, failed or could not be reached."""

    exit_code = 4


class CheckFailed(GpudashError):
    """A live check found queries that fail or return nothing."""

    exit_code = 1


class ExporterError(GpudashError):
    """The exporter cannot start (NVML missing, bad collectors file, port in use)."""

    exit_code = 2


class OutputError(GpudashError):
    """A generated file cannot be written (not a directory, permission denied, read-only, disk full)."""

    exit_code = 2
