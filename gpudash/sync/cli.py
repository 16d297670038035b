"""`gpudash push`, `diff`, `sync` and `provision`: thin click shells over gpudash.sync."""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from gpudash.config.loading import load_settings
from gpudash.config.options import config_options
from gpudash.errors import UsageError
from gpudash.redaction import Secrets
from gpudash.repository import DASHBOARDS_JSON_DIR, DEFINITIONS_DIR, PROVISIONING_DIR
from gpudash.sync.apply import diff_of, read_plan
from gpudash.sync.grafana_api import Connection, connection_from
from gpudash.sync.local import load_local
from gpudash.sync.plan import Action
from gpudash.sync.provision import (
    DEFAULT_DASHBOARDS_PATH,
    ProvisioningFiles,
    datasource_spec,
    provision_files,
    provision_grafana,
)
from gpudash.sync.session import Session, open_session, write_plan
from gpudash.sync.watch import regenerate, watch

F = Callable[..., Any]


def _echo(text: str) -> None:
    click.echo(text)


class _Redacting(logging.Filter):
    def __init__(self, secrets: Secrets) -> None:
        super().__init__()
        self.secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = self.secrets.redact(record.getMessage()), None
        return True


def _logging(verbose: int, secrets: Secrets) -> None:
    """-v: retries and progress details from gpudash; -vv: every request, HTTP libraries included."""
    if not verbose:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handler.addFilter(_Redacting(secrets))
    root, ours = logging.getLogger(), logging.getLogger("gpudash")
    levels = root.level, ours.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose > 1 else logging.WARNING)
    ours.setLevel(logging.DEBUG)

    def restore() -> None:
        root.removeHandler(handler)
        root.setLevel(levels[0])
        ours.setLevel(levels[1])

    click.get_current_context().call_on_close(restore)


def connection_options(command: F) -> F:
    options = [
        click.option("--dir", "directory", type=click.Path(path_type=Path), default=DASHBOARDS_JSON_DIR,
                     show_default=True, help="Directory of generated dashboard JSON."),
        click.option("--url", default=None, help="Grafana root URL (default: $GRAFANA_URL)."),
        click.option("--user", default=None, help="Basic-auth login (default: $GRAFANA_USER); password from "
                                                  "$GRAFANA_PASSWORD or --password-file."),
        click.option("--token-file", type=click.Path(path_type=Path), default=None,
                     help="Read the service-account token from this file (default: $GRAFANA_TOKEN)."),
        click.option("--password-file", type=click.Path(path_type=Path), default=None,
                     help="Read the basic-auth password from this file."),
        click.option("--ca-file", type=click.Path(path_type=Path), default=None,
                     help="CA bundle to verify Grafana's TLS certificate (verification is always on)."),
        click.option("--timeout", type=click.FloatRange(min=0.1), default=None,
                     help="Seconds to wait for each answer (default 10)."),
        click.option("--retries", type=click.IntRange(0, 10), default=None,
                     help="Retries of reads and of 5xx answers, with backoff (default 3)."),
        click.option("--org-id", type=int, default=None, help="Grafana organisation (default: $GRAFANA_ORG_ID)."),
        config_options(dir_okay=True, thresholds_help="thresholds.yaml (default: ./thresholds.yaml or "
                                                      "$GPUDASH_THRESHOLDS).",
                       site_help="Site config file (gpudash.yaml) with grafana.folder/folder_uid (default: "
                                 "./gpudash.yaml or $GPUDASH_SITE)."),
        click.option("-v", "--verbose", count=True,
                     help="-v: each request, retries, unchanged dashboards; -vv: the HTTP libraries too."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _open(kwargs: dict[str, Any], persist: bool) -> tuple[Session, list[dict[str, Any]]]:
    """Connection settings first (the most likely thing a new user lacks), then files, then one probe.
    `persist`: a command that writes to Grafana writes a new site_id into the site config, if it needs one."""
    connection, verbose = _connect(kwargs)
    settings = load_settings(kwargs.pop("thresholds"), kwargs.pop("site"))
    return open_session(connection, settings, kwargs.pop("directory"), verbose, _echo, persist=persist)


def _connect(kwargs: dict[str, Any]) -> tuple[Connection, int]:
    """The connection from flags and environment, and -v's count, with logging set up to redact its secrets."""
    connection = connection_from(
        os.environ, url=kwargs.pop("url"), user=kwargs.pop("user"), token_file=kwargs.pop("token_file"),
        password_file=kwargs.pop("password_file"), ca_file=kwargs.pop("ca_file"), timeout=kwargs.pop("timeout"),
        org_id=kwargs.pop("org_id"), retries=kwargs.pop("retries"))
    verbose = int(kwargs.pop("verbose"))
    _logging(verbose, connection.secrets)
    return connection, verbose


@click.command("push")
@connection_options
@click.option("--dry-run", is_flag=True, help="Print the plan; write nothing.")
@click.option("--force", is_flag=True, help="Overwrite this site's dashboards changed in Grafana since gpudash "
                                            "pushed them, each the version read and shown first.")
def push(dry_run: bool, force: bool, **kwargs: Any) -> None:
    """Create or update every generated dashboard in its Grafana folder.

    Reads Grafana first and writes only dashboards that are new or differ, each with a version message
    naming the source commit. A dashboard changed in the Grafana UI since gpudash pushed it is not
    overwritten (exit 3) unless --force.

    \b
    Examples:
      GRAFANA_URL=https://grafana.example.com GRAFANA_TOKEN=glsa_... gpudash push
      gpudash push --dry-run
    """
    session, local = _open(kwargs, persist=not dry_run)
    write_plan("push", session, local, force=force, prune=False, dry_run=dry_run, show_drift=False)


@click.command("diff")
@connection_options
@click.option("--git", "git_ref", metavar="REF", default=None,
              help="Compare the dashboards committed at git revision REF with the working tree; no Grafana.")
@click.option("--git-to", metavar="REF2", default=None, help="With --git: compare with revision REF2 instead.")
@click.option("--textconv", "textconv_file", type=click.Path(path_type=Path), default=None,
              help="Print one dashboard JSON file as text, for git's diff driver (docs/reviewing.md).")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
def diff(git_ref: str | None, git_to: str | None, textconv_file: Path | None, paths: tuple[Path, ...],
         **kwargs: Any) -> None:
    """Show how Grafana's dashboards differ from the local ones; exit 0 when equal, 1 when not.

    Ignores what Grafana owns (id, version), what it rewrites on load and save (schemaVersion,
    pluginVersion, the defaults it fills in, nulls) and gpudash's marker. For each difference: a summary
    (panels added, removed, changed; thresholds and queries moved), then a unified diff of canonical JSON
    from Grafana's copy to the local file. Dashboards only in Grafana are listed as this site's (what
    `sync --prune` deletes) or kept, with the reason (another site's, a copy, changed since).

    With --git REF, the same summary between the dashboards committed at REF and the working tree (or
    --git-to REF2), optionally only for the given dashboard files; no Grafana is contacted.

    \b
    Examples:
      gpudash dashboards && gpudash diff
      gpudash diff --git main                       # what this branch changes in dashboards/json
      gpudash diff --git HEAD~3 --git-to HEAD dashboards/json/gpudash-node.json
      gpudash diff --textconv dashboards/json/gpudash-node.json
    """
    if textconv_file is not None or git_ref is not None or git_to is not None or paths:
        _offline_diff(git_ref, git_to, textconv_file, paths, kwargs["directory"])
        return
    session, local = _open(kwargs, persist=False)
    plan = read_plan(session.remote, local, session.target, prune=True)
    differ = 0
    for step in plan.steps:
        if step.action is Action.CREATE:
            click.echo(f"only local  {step.uid}  {step.title!r}: not in Grafana")
        elif step.action is Action.PRUNE:
            click.echo(f"only in Grafana  {step.uid}  {step.title!r}: pushed for this site "
                       f"({session.target.site_id}); `gpudash sync --prune` deletes it")
        elif step.action is Action.CONFLICT:
            click.echo(f"conflict    {step.uid}  {step.title!r}: {step.reason}")
        elif step.action in (Action.KEEP, Action.GONE):  # not counted: nothing for this site to change
            click.echo(f"{step.action.value:<11} {step.uid}  {step.title!r}: {step.reason}")
            continue
        elif step.action in (Action.UPDATE, Action.DRIFTED):
            state = step.reason if step.action is Action.DRIFTED else f"local changes not pushed yet ({step.reason})"
            assert step.remote is not None and step.local is not None
            if step.remote.folder_uid != session.target.folder_uid:
                state += f"; in folder {step.remote.folder_uid or 'General'}"
            click.echo(f"differs     {step.uid}  {step.title!r}: {state}")
            click.echo(diff_of(step.remote, step.local, session.remote.schema), nl=False)
        else:
            if step.action is Action.UNCHANGED and session.verbose:
                click.echo(f"equal       {step.uid}  {step.title!r}")
            continue
        differ += 1
    click.echo(f"diff: {differ} of {len(local)} dashboards differ ({session.stats()})")
    if differ:
        sys.exit(1)  # not ctx.exit(): under standalone_mode=False click returns that code instead of raising


def _offline_diff(git_ref: str | None, git_to: str | None, textconv_file: Path | None, paths: tuple[Path, ...],
                  directory: Path) -> None:
    from gpudash.review.cli import diff_revisions, textconv

    if textconv_file is not None:
        if git_ref or git_to or paths:
            raise UsageError("--textconv takes one file and no other diff option")
        textconv(textconv_file)
        return
    if git_ref is None:
        raise UsageError("--git-to and dashboard paths need --git REF")
    if diff_revisions(git_ref, git_to, directory, paths):
        sys.exit(1)


@click.command("sync")
@connection_options
@click.option("--dry-run", is_flag=True, help="Print the plan; write nothing.")
@click.option("--force", is_flag=True, help="Overwrite (and with --prune, delete) this site's dashboards changed "
                                            "in Grafana, each the version read and shown first.")
@click.option("--prune", is_flag=True, help="Delete dashboards this site's gpudash pushed that no longer exist "
                                            "locally.")
@click.option("--watch", "watching", is_flag=True, help="Regenerate and sync whenever a definition or "
                                                        "thresholds.yaml changes.")
@click.option("--definitions", type=click.Path(path_type=Path), default=DEFINITIONS_DIR, show_default=True,
              help="With --watch: dashboard definitions to watch and regenerate from (v2 into <definitions>/v2).")
@click.option("--interval", type=click.FloatRange(min=0.05), default=1.0, show_default=True,
              help="With --watch: seconds between polls.")
@click.option("--watch-polls", type=int, default=None, hidden=True)
def sync(dry_run: bool, force: bool, prune: bool, watching: bool, definitions: Path, interval: float,
         watch_polls: int | None, **kwargs: Any) -> None:
    """Write only what changed; never overwrite a dashboard edited in the Grafana UI.

    Compares every local dashboard with Grafana's copy: a no-op sync writes nothing. A dashboard
    changed in Grafana since gpudash pushed it is shown as a diff and left alone (exit 3) unless
    --force, which shows the version it read and overwrites only that one. --prune deletes dashboards
    that this site's gpudash pushed and that are gone locally; nothing else is ever deleted. A uid that
    holds another site's dashboard, or a copy, is never written (exit 3).

    \b
    Examples:
      gpudash sync                    # after `gpudash dashboards`
      gpudash sync --prune --dry-run  # what would be deleted
      gpudash sync --watch            # edit thresholds.yaml, see Grafana follow
    """
    thresholds, site, directory = kwargs["thresholds"], kwargs["site"], kwargs["directory"]
    session, local = _open(kwargs, persist=not dry_run)
    if not watching:
        write_plan("sync", session, local, force=force, prune=prune, dry_run=dry_run, show_drift=True)
        return
    def cycle() -> None:
        regenerate(definitions, directory, thresholds, site)
        session.started = time.monotonic()
        write_plan("sync", session, load_local(directory), force=force, prune=prune, dry_run=dry_run,
                    show_drift=True)

    paths = [definitions, thresholds or Path(os.environ.get("GPUDASH_THRESHOLDS", "thresholds.yaml"))]
    paths += [site] if site else [Path("gpudash.yaml")]
    try:
        watch(paths, cycle, _echo, interval, watch_polls)
    except KeyboardInterrupt:
        click.echo("watch: stopped")


@click.command("provision")
@connection_options
@click.option("--prometheus-url", envvar="PROMETHEUS_URL", default=None,
              help="URL Grafana uses to reach Prometheus (default: $PROMETHEUS_URL).")
@click.option("--files-dir", type=click.Path(path_type=Path), default=PROVISIONING_DIR, show_default=True,
              help="Where to write Grafana's file-provisioning YAML.")
@click.option("--no-files", is_flag=True, help="Do not write the provisioning YAML.")
@click.option("--files-only", is_flag=True, help="Only write the provisioning YAML; do not contact Grafana.")
@click.option("--dashboards-path", default=DEFAULT_DASHBOARDS_PATH, show_default=True,
              help="Path on the Grafana server where the dashboard JSON files are copied (provider YAML).")
@click.option("--dry-run", is_flag=True, help="Print what would be created; write nothing.")
def provision(prometheus_url: str | None, files_dir: Path, no_files: bool, files_only: bool, dashboards_path: str,
              dry_run: bool, **kwargs: Any) -> None:
    """Bring an empty Grafana to a working state: data source, folder, every dashboard.

    The Prometheus data source gets a fixed uid (grafana.datasource_uid), so the dashboards find it.
    Also writes provisioning YAML (data source + dashboard provider) for Grafana's own file provisioning.

    \b
    Examples:
      gpudash provision --prometheus-url http://prometheus:9090
      gpudash provision --files-only --prometheus-url http://prometheus:9090 --files-dir /etc/grafana/provisioning
    """
    if no_files and files_only:
        raise UsageError("--no-files and --files-only exclude each other")
    if not prometheus_url:
        raise UsageError("no Prometheus URL: pass --prometheus-url or set PROMETHEUS_URL (the URL Grafana uses "
                         "to reach Prometheus, e.g. http://prometheus:9090)")
    settings = load_settings(kwargs.pop("thresholds"), kwargs.pop("site"))
    spec = datasource_spec(settings.site, prometheus_url)
    files = None if no_files else ProvisioningFiles(files_dir, dashboards_path)
    if files is not None and files_only:
        provision_files(settings, spec, files, dry_run=dry_run, echo=_echo)
        return
    connection, verbose = _connect(kwargs)
    provision_grafana(connection, settings, spec, kwargs.pop("directory"), dry_run=dry_run, verbose=verbose,
                      echo=_echo, files=files)
