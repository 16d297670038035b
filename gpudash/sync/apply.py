"""Read the remote side, write a plan, and say what was and was not written.

Writes never use Grafana's `overwrite: true`: an update carries the version gpudash just read, so a save
that happened in between answers 412 instead of being clobbered, and a title clash on Grafana <= 11.2
answers 412 instead of silently taking over the other dashboard. `--force` only means "overwrite the
version I just read": a 412 on a forced write is a conflict to review, never a reason to write again.
Grafana's DELETE takes no version, so a prune reads the dashboard again right before deleting it and
deletes only the version it planned with.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gpudash.compare import diffing
from gpudash.compare.content import marked, read_marker, same_content
from gpudash.config.site import Site
from gpudash.errors import GpudashError
from gpudash.repository import TAG
from gpudash.sync.grafana_api import ChangedMeanwhile, GrafanaFailure
from gpudash.sync.plan import (
    Action,
    Plan,
    RemoteDashboard,
    Step,
    by_at,
    plan_dashboard,
    plan_sync,
    saved,
    vanished,
)
from gpudash.sync.remote import GrafanaRemote, dashboard_label
from gpudash.sync.schema import Schema
from gpudash.sync.stored import stored_diff

Echo = Callable[[str], None]


@dataclass(frozen=True)
class Target:
    """Where the dashboards go: a folder by uid ("" = the root "General" folder) and its title; and the site
    they are pushed for, which every marker and version message names."""

    folder_uid: str
    folder_title: str
    site_id: str

    @classmethod
    def from_site(cls, folder_uid: str, folder_title: str, site_id: str) -> Target:
        root = folder_uid.strip().lower() in ("", "general")
        return cls("" if root else folder_uid.strip(), folder_title, site_id)

    @classmethod
    def for_site(cls, site: Site) -> Target:
        """The site's folder and id; the id must be settled first (gpudash.sync.identity), or the folder is unknown."""
        if not site.site_id:
            raise ValueError("the site has no id yet: settle it with gpudash.sync.identity first")
        return cls.from_site(site.grafana_folder_uid, site.grafana_folder, site.site_id)


@dataclass
class Outcome:
    written: list[Step] = field(default_factory=list)
    failed: list[tuple[Step, GpudashError]] = field(default_factory=list)
    not_attempted: list[Step] = field(default_factory=list)
    drifted: list[Step] = field(default_factory=list)
    conflicts: list[Step] = field(default_factory=list)
    kept: list[Step] = field(default_factory=list)
    gone: list[Step] = field(default_factory=list)
    unchanged: int = 0

    def summary(self) -> str:
        done = Counter(step.action for step in self.written)
        parts = [(done[Action.CREATE], "created"), (done[Action.UPDATE], "updated"), (done[Action.PRUNE], "deleted"),
                 (self.unchanged, "unchanged"), (len(self.drifted), "drifted (not written)"),
                 (len(self.conflicts), "in conflict (not written)"), (len(self.kept), "kept"),
                 (len(self.gone), "deleted meanwhile"), (len(self.failed), "failed"),
                 (len(self.not_attempted), "not attempted")]
        return ", ".join(f"{n} {label}" for n, label in parts if n) or "nothing to do"


def _evidenced(remote: GrafanaRemote, found: RemoteDashboard, needed: bool) -> RemoteDashboard | None:
    """`found` with its version history when `needed`; None when it was deleted meanwhile."""
    if not needed:
        return found
    history = remote.history(found.uid, found.title)
    return None if history is None else replace(found, history=history)


def _unmarked(found: RemoteDashboard) -> bool:
    return read_marker(found.dashboard) is None


def _for_local(remote: GrafanaRemote, local: dict[str, Any], found: RemoteDashboard,
               folder_uid: str) -> RemoteDashboard | None:
    """Grafana's copy of a local dashboard, with its history when the verdict depends on who wrote it."""
    # cheap tests first: canonicalising both dashboards is the costly part of a no-op sync
    needed = _unmarked(found) and not (found.folder_uid == folder_uid and same_content(local, found.dashboard))
    return _evidenced(remote, found, needed)


def read_remote(remote: GrafanaRemote, local: dict[str, Any], folder_uid: str) -> RemoteDashboard | None:
    found = remote.dashboard(str(local["uid"]), str(local["title"]))
    return None if found is None else _for_local(remote, local, found, folder_uid)


def read_plan(remote: GrafanaRemote, local: Sequence[dict[str, Any]], target: Target, *, force: bool = False,
              prune: bool = False) -> Plan:
    """Compare first: search for what exists, read it, and plan; with `prune`, also the remote-only ones.

    The version history is read only for a dashboard whose JSON has no marker and whose verdict depends on
    who wrote it (it differs from the local one, or it is a prune candidate).
    """
    wanted = {str(d["uid"]): d for d in local}
    existing: dict[str, RemoteDashboard] = {}
    for uid, found in remote.dashboards({uid: str(d["title"]) for uid, d in wanted.items()}).items():
        read = _for_local(remote, wanted[uid], found, target.folder_uid)
        if read is not None:  # deleted meanwhile: planned as new
            existing[uid] = read
    candidates: list[RemoteDashboard] = []
    gone: dict[str, str] = {}
    if prune:
        for hit in remote.tagged(TAG):
            uid, title = str(hit.get("uid", "")), str(hit.get("title", ""))
            if uid and uid not in wanted and str(hit.get("folderUid") or "") == target.folder_uid:
                listed = remote.dashboard(uid, title)
                candidate = listed and _evidenced(remote, listed, not listed.provisioned and _unmarked(listed))
                if candidate is None:
                    gone[uid] = title
                else:
                    candidates.append(candidate)
    return plan_sync(local, existing, target.folder_uid, target.site_id, force, candidates, gone, remote.schema)


def diff_of(remote: RemoteDashboard, local: dict[str, Any], schema: Schema) -> str:
    """How Grafana's copy differs from the local dashboard, in the schema Grafana stores it in."""
    storage = remote.storage
    if storage is not None and storage.compared_as_stored:
        return stored_diff(storage, schema.spec_of(local, storage.stored), remote.uid)
    return diffing.report(remote.dashboard, local, remote.uid)


def ensure_folder(remote: GrafanaRemote, target: Target, dry_run: bool, echo: Echo) -> None:
    """Create the target folder by uid when it is missing; never rename or move an existing one."""
    if not target.folder_uid:
        return
    found = remote.folder(target.folder_uid)
    label = f"folder {target.folder_title!r} ({target.folder_uid})"
    if found is not None:
        if found.get("title") != target.folder_title:
            echo(f"note       {label}: exists titled {found.get('title')!r}; left as it is")
        return
    if dry_run:
        echo(f"would create {label}")
        return
    try:
        remote.create_folder(target.folder_uid, target.folder_title)
    except ChangedMeanwhile:
        return  # 412 on create: the uid already exists (created meanwhile, or hidden from this token)
    except GrafanaFailure as exc:
        if exc.status == 409 and "same uid" in exc.said:
            return
        if exc.status == 409:
            raise GrafanaFailure(f"{exc.message}; another folder is titled {target.folder_title!r} (another "
                                 "site's, perhaps): set grafana.folder in gpudash.yaml to a title of this site's "
                                 f"own (e.g. 'GPU {target.site_id}'), or grafana.folder_uid to that folder's uid "
                                 "if it is meant for these dashboards", exc.status, exc.keyword) from None
        raise
    echo(f"created    {label}")


def _save_body(step: Step, target: Target, commit: str, message: str, version: int | None) -> dict[str, Any]:
    assert step.local is not None
    dashboard = marked(step.local, commit, target.site_id)
    if version is not None:
        dashboard["version"] = version
    body: dict[str, Any] = {"dashboard": dashboard, "message": message, "overwrite": False}
    if target.folder_uid:
        body["folderUid"] = target.folder_uid
    return body


def _changed_again(step: Step, fresh: RemoteDashboard | None, doing: str) -> Step:
    """A forced write or a delete that found a version it had not read: reported, never retried."""
    assert step.remote is not None
    read = step.remote.version
    if fresh is None:
        why = f"deleted in Grafana while gpudash was {doing} version {read}; run again to review"
    else:
        why = (f"changed again in Grafana{by_at(fresh)} (version {fresh.version}) while gpudash was {doing} "
               f"version {read}; not {'deleted' if doing == 'deleting' else 'overwritten'}; run again to review")
    return Step(Action.CONFLICT, step.uid, step.title, step.local, fresh, why)


class Applier:
    """Writes the steps of a plan in order; one failing dashboard does not stop the others. What --force
    allows is already in the plan (a step's `forced`)."""

    def __init__(self, remote: GrafanaRemote, target: Target, commit: str, message: str, echo: Echo) -> None:
        self.remote = remote
        self.target = target
        self.commit = commit
        self.message = message
        self.echo = echo

    def _delete(self, step: Step, what: str) -> Step:
        """Grafana's DELETE takes no version: read again first, and delete only the version planned with."""
        assert step.remote is not None
        fresh = self.remote.dashboard(step.uid, step.title)
        if fresh is None:
            return vanished(step.uid, step.title)
        if fresh.version != step.remote.version:
            return _changed_again(step, fresh, "deleting")
        try:
            self.remote.delete(step.uid, what)
        except GrafanaFailure as exc:
            if exc.status == 404:
                return vanished(step.uid, step.title)
            raise
        return step

    def _write(self, step: Step) -> Step:
        """Do one step. On 412 version-mismatch: a forced write is reported as a conflict; any other is
        planned once more, unforced, against what Grafana holds now (search lag, a retried save)."""
        what = dashboard_label(step.uid, step.title)
        if step.action is Action.PRUNE:
            return self._delete(step, what)
        version = step.remote.version if step.remote is not None else None
        try:
            answer = self.remote.save(_save_body(step, self.target, self.commit, self.message, version), what,
                                      step.remote)
        except ChangedMeanwhile as conflict:
            assert step.local is not None
            if step.forced:
                return _changed_again(step, self.remote.dashboard(step.uid, step.title), "overwriting")
            fresh = read_remote(self.remote, step.local, self.target.folder_uid)
            again = plan_dashboard(step.local, fresh, self.target.folder_uid, self.target.site_id,
                                   schema=self.remote.schema)
            if again.action is Action.UNCHANGED:
                return Step(Action.UNCHANGED, step.uid, step.title, step.local, fresh, "already as local")
            if again.action in (Action.DRIFTED, Action.CONFLICT):
                said = conflict.format_message().partition(": ")[2]
                return Step(again.action, step.uid, step.title, step.local, fresh, f"{said}; {again.reason}")
            new_version = fresh.version if fresh is not None else None
            if new_version == version:
                raise
            answer = self.remote.save(_save_body(again, self.target, self.commit, self.message, new_version), what,
                                      fresh)
            step = again
        if str(answer.get("uid", step.uid)) != step.uid:
            raise GrafanaFailure(f"{what}: Grafana saved it under another uid ({answer.get('uid')})")
        written = f"version {answer.get('version', '?')}"
        if answer.get("resourceVersion"):  # /apis: what was written, as Grafana stored it
            written += f" (generation), resourceVersion {answer['resourceVersion']}, as {answer.get('schema')}"
        return Step(step.action, step.uid, step.title, step.local, step.remote,
                    f"{step.reason}; {written}".lstrip("; "), step.forced)

    def _show_overwrite(self, step: Step, dry_run: bool) -> None:
        """Before --force overwrites or deletes: which version, whose, and (for an overwrite) the diff."""
        assert step.remote is not None
        verb = {Action.UPDATE: "overwrite", Action.PRUNE: "delete"}[step.action]
        self.echo(f"{'would ' if dry_run else 'about to '}{verb} {step.uid}  {step.title!r}: Grafana's "
                  f"{saved(step.remote)}")
        if step.local is not None:
            self.echo(diff_of(step.remote, step.local, self.remote.schema).rstrip("\n"))

    def _note(self, outcome: Outcome, step: Step) -> bool:
        """Record a step that writes nothing; False for one that writes."""
        label = f"{step.uid}  {step.title!r}"
        if step.action is Action.UNCHANGED:
            outcome.unchanged += 1
            return True
        shown = {Action.DRIFTED: (outcome.drifted, "drifted", "; not overwritten"),
                 Action.CONFLICT: (outcome.conflicts, "conflict", ""), Action.KEEP: (outcome.kept, "kept", ""),
                 Action.GONE: (outcome.gone, "gone", "")}.get(step.action)
        if shown is not None:
            into, word, tail = shown
            into.append(step)
            self.echo(f"{word:<10} {label}: {step.reason}{tail}")
            return True
        return False

    def run(self, plan: Plan, dry_run: bool = False, verbose: bool = False) -> Outcome:
        outcome = Outcome()
        writes = plan.writes
        done = 0
        stopped = False
        for step in plan.steps:
            if step.action is Action.UNCHANGED and verbose:
                self.echo(f"unchanged  {step.uid}  {step.title!r}")
            if self._note(outcome, step):
                continue
            done += 1
            counter = f"[{done}/{len(writes)}]"
            verb = {Action.CREATE: "create", Action.UPDATE: "update", Action.PRUNE: "delete"}[step.action]
            if step.forced and not stopped:
                self._show_overwrite(step, dry_run)
            if dry_run:
                self.echo(f"would {verb:<6} {step.uid}  {step.title!r}: {step.reason}".rstrip(": "))
                continue
            if stopped:
                outcome.not_attempted.append(step)
                continue
            try:
                result = self._write(step)
            except GpudashError as exc:
                outcome.failed.append((step, exc))
                self.echo(f"failed     {step.uid}  {step.title!r}: {exc.format_message()}")
                stopped = not getattr(exc, "per_object", False)
                continue
            if not self._note(outcome, result):
                outcome.written.append(result)
                past = {"create": "created", "update": "updated", "delete": "deleted"}[verb]
                self.echo(f"{counter:>9} {past:<8} {step.uid}  {step.title!r}: {result.reason}".rstrip(": "))
        return outcome
