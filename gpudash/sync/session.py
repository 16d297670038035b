"""One run against Grafana: read the local dashboards, probe Grafana, write the plan, say how it went.

`push`, `sync` and `provision` (the command and the demo's) go through here; the commands add their
options on top. What it prints goes through `echo`; what went wrong is raised, one GpudashError.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpudash.catalog import profile
from gpudash.config.loading import Settings
from gpudash.errors import DriftError
from gpudash.schema_v2.resource import to_v2
from gpudash.sync.apply import Applier, Echo, Outcome, Target, diff_of, ensure_folder, read_plan
from gpudash.sync.grafana_api import ChangedMeanwhile, Connection, Grafana, GrafanaFailure
from gpudash.sync.identity import Sighting, site_from_grafana
from gpudash.sync.local import load_local, version_message
from gpudash.sync.plan import Action, Plan
from gpudash.sync.remote import GrafanaRemote
from gpudash.sync.schema import V2Converter, choose


@dataclass
class Session:
    remote: GrafanaRemote
    target: Target
    directory: Path
    verbose: int
    started: float
    echo: Echo

    @property
    def grafana(self) -> Grafana:
        return self.remote.grafana

    def stats(self) -> str:
        requests = sum(self.grafana.requests.values())
        return f"{requests} requests, {self.grafana.writes} writes, {time.monotonic() - self.started:.2f} s"


def open_session(connection: Connection, settings: Settings, directory: Path, verbose: int, echo: Echo, *,
                 persist: bool, seen: Sequence[Sighting] = ()) -> tuple[Session, list[dict[str, Any]]]:
    """The local dashboards first, then one probe of Grafana, then which site this is (a site config without
    site_id gets one, written into it when `persist`; `seen`: what else may show an identity from before);
    says where they will go."""
    local = load_local(directory)
    remote = GrafanaRemote(Grafana(connection))
    started = time.monotonic()
    version = remote.probe()
    remote.use_schema(choose(settings.site.grafana_schema, version, remote.v2_served,
                             f"{settings.site_path}: grafana.schema", own=own_conversion(settings)))
    target = Target.for_site(site_from_grafana(remote, settings, local, persist=persist, echo=echo, seen=seen))
    folder = f"folder {target.folder_title!r} ({target.folder_uid})" if target.folder_uid else "the General folder"
    echo(f"Grafana {version} at {connection.url} ({remote.api_name}): {len(local)} dashboards from {directory} "
         f"-> {folder}, as site {target.site_id}, schema {remote.schema.writes}")
    return Session(remote, target, directory, verbose, started, echo), local


def own_conversion(settings: Settings) -> V2Converter:
    """gpudash's v1 -> v2 conversion for this site: what `gpudash dashboards` writes to dashboards/v2."""
    site_profile = profile(settings.site.profile)
    return lambda dashboard: to_v2(dashboard, profile=site_profile)


def write_plan(verb: str, session: Session, local: list[dict[str, Any]], *, force: bool, prune: bool,
               dry_run: bool, show_drift: bool) -> None:
    """Plan, write what changed, and raise when something was not written (failed, drifted, in conflict)."""
    plan = read_plan(session.remote, local, session.target, force=force, prune=prune)
    if plan.of(Action.CREATE, Action.UPDATE):
        ensure_folder(session.remote, session.target, dry_run, session.echo)
    commit, message = version_message(session.directory, session.target.site_id)
    applier = Applier(session.remote, session.target, commit, message, session.echo)
    outcome = applier.run(plan, dry_run=dry_run, verbose=session.verbose > 0)
    if show_drift:
        for step in outcome.drifted:
            if step.remote is not None and step.local is not None:
                shown = diff_of(step.remote, step.local, session.remote.schema)
                if shown:
                    session.echo(shown.rstrip("\n"))
    _finish(verb, session, plan, outcome, dry_run)


def _finish(verb: str, session: Session, plan: Plan, outcome: Outcome, dry_run: bool) -> None:
    total = len(plan.writes)
    if dry_run:
        session.echo(f"{verb} --dry-run: would {plan.summary()}; nothing written ({session.stats()})")
    else:
        session.echo(f"{verb}: {outcome.summary()} ({session.stats()})")
    not_written = [s.uid for s, _ in outcome.failed] + [s.uid for s in outcome.not_attempted]
    drifted = [s.uid for s in outcome.drifted]
    conflicts = [s.uid for s in outcome.conflicts]
    if outcome.failed:
        first = outcome.failed[0][1]
        extra = f"; drifted, not overwritten: {', '.join(drifted)}" if drifted else ""
        extra += f"; in conflict, not written: {', '.join(conflicts)}" if conflicts else ""
        message = (f"{first.format_message()} ({len(outcome.written)} of {total} written; not written: "
                   f"{', '.join(not_written)}{extra})")
        raise (ChangedMeanwhile(message) if isinstance(first, ChangedMeanwhile)
               else GrafanaFailure(message, getattr(first, "status", 0)))
    problems = []
    if conflicts:
        first_conflict = outcome.conflicts[0]
        problems.append(f"dashboard {first_conflict.title!r} ({conflicts[0]}) not written: {first_conflict.reason}"
                        if len(conflicts) == 1 else
                        f"{len(conflicts)} dashboards ({', '.join(conflicts)}) not written: in conflict, "
                        "each says why above")
    if drifted:
        which = (f"dashboard {outcome.drifted[0].title!r} ({drifted[0]}) was" if len(drifted) == 1
                 else f"{len(drifted)} dashboards ({', '.join(drifted)}) were")
        problems.append(f"{which} changed in Grafana outside gpudash and not overwritten; review with "
                        "`gpudash diff`, then `gpudash sync --force` to overwrite")
    if problems:
        raise DriftError("; ".join(problems))
