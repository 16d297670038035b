"""The `gpudash` command: a thin shell over library functions.

Subcommands live beside the code they drive and are imported only when used, so `gpudash exporter`
on a GPU node never imports grafanalib or grafana-client. Every GpudashError is a click exception that
shows itself as one line on stderr and exits with its code (gpudash.errors).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

import click

from gpudash import __version__

# name -> (module, attribute, one-line summary shown by `gpudash --help` without importing the module)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "dashboards": ("gpudash.panels.cli", "dashboards", "Generate the Grafana dashboards as JSON."),
    "rules": ("gpudash.rules.cli", "rules", "Render alert/recording rules, Alertmanager and scrape config."),
    "exporter": ("gpudash.exporter.cli", "exporter", "Run the NVML (or simulated) GPU exporter."),
    "push": ("gpudash.sync.cli", "push", "Create or update every dashboard in Grafana."),
    "diff": ("gpudash.sync.cli", "diff", "Show how Grafana's dashboards differ from the local ones."),
    "sync": ("gpudash.sync.cli", "sync", "Write only what changed to Grafana; refuse to clobber UI edits."),
    "provision": ("gpudash.sync.cli", "provision", "Bring an empty Grafana to a working state."),
    "check": ("gpudash.check.cli", "check", "Run every panel and rule query against a live Prometheus."),
    "doctor": ("gpudash.doctor.cli", "doctor", "Check the chain from NVML to the pager, link by link."),
    "backtest": ("gpudash.backtest.cli", "backtest_command", "What thresholds.yaml would have paged in the past."),
    "tune": ("gpudash.backtest.cli", "tune_command", "Propose thresholds.yaml values from the fleet's history."),
    "report": ("gpudash.report.cli", "report", "GPU-hours by team, busy / idle / down, goodput, interruptions."),
    "demo": ("gpudash.stack.demo", "demo", "Start exporter, Prometheus and Alertmanager locally and check it all."),
    "preview": ("gpudash.preview.cli", "preview", "Draw each dashboard as a PNG from live Prometheus data."),
    "init": ("gpudash.init.cli", "init", "Create a site repository (configs, dashboards, Makefile, CI) in DIR."),
}


def _module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self._available()))

    def _available(self) -> dict[str, tuple[str, str, str]]:
        return {name: spec for name, spec in COMMANDS.items() if _module_exists(spec[0])}

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None or cmd_name not in self._available():
            return command
        module_name, attribute, _ = COMMANDS[cmd_name]
        loaded = getattr(importlib.import_module(module_name), attribute)
        assert isinstance(loaded, click.Command)
        return loaded

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Summaries come from the table, so `gpudash --help` stays fast and imports nothing heavy.
        rows = [(name, spec[2]) for name, spec in sorted(self._available().items())]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)



@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="gpudash")
def cli() -> None:
    """GPU fleet monitoring as code: dashboards, alerts and an exporter from one thresholds.yaml.

    \b
    Typical use, from the repository root:
      gpudash dashboards            # regenerate dashboards/*.json from dashboards/*.py
      gpudash rules                 # regenerate generated/ (rules, alertmanager.yml, scrape config)
      gpudash exporter --simulate 8 # serve a simulated 8-GPU node on :9400
      GRAFANA_URL=http://grafana:3000 GRAFANA_TOKEN=... gpudash sync

    Run `gpudash COMMAND --help` for each command's options and an example.
    """


def usage_line(exc: click.UsageError, argv: list[str]) -> str:
    """click's usage error as one line naming the command, the problem and where the help is, instead of
    click's three (usage, hint, error): log parsers and CI annotations read one line per error."""
    command = exc.ctx.command_path.partition(" ")[2] if exc.ctx is not None else ""
    if not command:  # click gives some parse errors (a flag without its value) no context of the subcommand
        command = next((arg for arg in argv if arg in COMMANDS), "")
    problem = " ".join(exc.format_message().split())
    return f"{command + ': ' if command else ''}{problem} (see 'gpudash {command + ' ' if command else ''}--help')"


def main(argv: list[str] | None = None) -> None:
    try:
        result = cli.main(args=argv, prog_name="gpudash", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:  # `gpudash` alone: the help, as click shows it
        exc.show()
        sys.exit(exc.exit_code)
    except click.UsageError as exc:  # click's own (a bad flag or value): one line, like every gpudash error
        click.echo(f"gpudash: {usage_line(exc, sys.argv[1:] if argv is None else argv)}", err=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:  # a GpudashError shows itself as `gpudash: <message>`
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("gpudash: aborted", err=True)
        sys.exit(130)
    # Without standalone mode click returns the code of `ctx.exit(n)` instead of raising it.
    if isinstance(result, int) and not isinstance(result, bool):
        sys.exit(result)
