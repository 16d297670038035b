"""Read the remote side, write a plan, and say what was and was not written.

Writes never use Grafana's `overwrite: true`: an update carries the version gpudash just read, so a save
that happened in between answers 412 instead of being clobbered, and a title clash on Grafana <= 11.2
answers 412 instead of silently taking over the other dashboard. `--force` only means "overwrite the
version I just read".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gpudash.errors import GpudashError
from gpudash.sync.client import ChangedMeanwhile, GrafanaFailure
from gpudash.sync.content import marked, provenance
from gpudash.sync.plan import Action, Plan, RemoteDashboard, Step, plan_dashboard, plan_sync
from gpudash.sync.remote import GrafanaRemote, dashboard_label

TAG = "gpudash"
Echo = Callable[[str], None]


@dataclass(frozen=True)
class Target:
    """Where the dashboards go: a folder by uid ("" = the root "General" folder) and its title."""

    folder_uid: str
    folder_title: str

    @classmethod
    def from_site(cls, folder_uid: str, folder_title: str) -> Target:
        root = folder_uid.strip().lower() in ("", "general")
        return cls("" if root else folder_uid.strip(), folder_title)


@dataclass
class Outcome:
    written: list[Step] = field(default_factory=list)
    failed: list[tuple[Step, GpudashError]] = field(default_factory=list)
    not_attempted: list[Step] = field(default_factory=list)
    drifted: list[Step] = field(default_factory=list)
    kept: list[Step] = field(default_factory=list)
    unchanged: int = 0

    def summary(self) -> str:
        done = Counter(step.action for step in self.written)
        parts = [(done[Action.CREATE], "created"), (done[Action.UPDATE], "updated"), (done[Action.PRUNE], "deleted"),
                 (self.unchanged, "unchanged"), (len(self.drifted), "drifted (not written)"),
                 (len(self.kept), "kept"), (len(self.failed), "failed"),
                 (len(self.not_attempted), "not attempted")]
        return ", ".join(f"{n} {label}" for n, label in parts if n) or "nothing to do"


def read_plan(remote: GrafanaRemote, local: Sequence[dict[str, Any]], target: Target, *, force: bool = False,
              prune: bool = False) -> Plan:
    """Compare first: search for what exists, read it, and plan; with `prune`, also gpudash's remote-only ones."""
    wanted = {str(d["uid"]): str(d["title"]) for d in local}
    existing = remote.dashboards(wanted)
    candidates: list[RemoteDashboard] = []
    if prune:
        for hit in remote.tagged(TAG):
            uid = str(hit.get("uid", ""))
            if uid and uid not in wanted and str(hit.get("folderUid") or "") == target.folder_uid:
                found = remote.dashboard(uid, str(hit.get("title", "")))
                if found is not None and not found.provisioned and provenance(found.dashboard) == "unmarked":
                    found = replace(found, pushed_before=remote.pushed_before(uid, found.title))
                if found is not None:
                    candidates.append(found)
    return plan_sync(local, existing, target.folder_uid, force, candidates)


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
            raise GrafanaFailure(f"{exc.message}; set grafana.folder_uid in gpudash.yaml to the uid of the "
                                 f"existing folder titled {target.folder_title!r}, or rename one of them",
                                 exc.status, exc.keyword) from None
        raise
    echo(f"created    {label}")


def _save_body(step: Step, target: Target, commit: str, message: str, version: int | None) -> dict[str, Any]:
    assert step.local is not None
    dashboard = marked(step.local, commit)
    if version is not None:
        dashboard["version"] = version
    body: dict[str, Any] = {"dashboard": dashboard, "message": message, "overwrite": False}
    if target.folder_uid:
        body["folderUid"] = target.folder_uid
    return body


class Applier:
    """Writes the steps of a plan in order; one failing dashboard does not stop the others."""

    def __init__(self, remote: GrafanaRemote, target: Target, commit: str, message: str, echo: Echo,
                 force: bool = False) -> None:
        self.remote = remote
        self.target = target
        self.commit = commit
        self.message = message
        self.echo = echo
        self.force = force

    def _write(self, step: Step) -> Step:
        """Do one step; on 412 version-mismatch read again and re-plan once (search lag, a retried save)."""
        what = dashboard_label(step.uid, step.title)
        if step.action is Action.PRUNE:
            self.remote.delete(step.uid, what)
            return step
        version = step.remote.version if step.remote is not None else None
        try:
            answer = self.remote.save(_save_body(step, self.target, self.commit, self.message, version), what)
        except ChangedMeanwhile as conflict:
            assert step.local is not None
            fresh = self.remote.dashboard(step.uid, step.title)
            again = plan_dashboard(step.local, fresh, self.target.folder_uid, self.force)
            if again.action is Action.UNCHANGED:
                return Step(Action.UNCHANGED, step.uid, step.title, step.local, fresh, "already as local")
            if again.action is Action.DRIFTED:
                said = conflict.format_message().partition(": ")[2]
                return Step(Action.DRIFTED, step.uid, step.title, step.local, fresh, f"{said}; {again.reason}")
            new_version = fresh.version if fresh is not None else None
            if new_version == version:
                raise
            answer = self.remote.save(_save_body(again, self.target, self.commit, self.message, new_version), what)
            step = again
        if str(answer.get("uid", step.uid)) != step.uid:
            raise GrafanaFailure(f"{what}: Grafana saved it under another uid ({answer.get('uid')})")
        return Step(step.action, step.uid, step.title, step.local, step.remote,
                    f"{step.reason}; version {answer.get('version', '?')}".lstrip("; "), step.forced)

    def run(self, plan: Plan, dry_run: bool = False, verbose: bool = False) -> Outcome:
        outcome = Outcome()
        writes = plan.writes
        done = 0
        stopped = False
        for step in plan.steps:
            if step.action is Action.UNCHANGED:
                outcome.unchanged += 1
                if verbose:
                    self.echo(f"unchanged  {step.uid}  {step.title!r}")
                continue
            if step.action is Action.DRIFTED:
                outcome.drifted.append(step)
                self.echo(f"drifted    {step.uid}  {step.title!r}: {step.reason}; not overwritten")
                continue
            if step.action is Action.KEEP:
                outcome.kept.append(step)
                self.echo(f"kept       {step.uid}  {step.title!r}: {step.reason}")
                continue
            done += 1
            counter = f"[{done}/{len(writes)}]"
            verb = {Action.CREATE: "create", Action.UPDATE: "update", Action.PRUNE: "delete"}[step.action]
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
            if result.action is Action.DRIFTED:
                outcome.drifted.append(result)
                self.echo(f"drifted    {step.uid}  {step.title!r}: {result.reason}; not overwritten")
            elif result.action is Action.UNCHANGED:
                outcome.unchanged += 1
            else:
                outcome.written.append(result)
                past = {"create": "created", "update": "updated", "delete": "deleted"}[verb]
                self.echo(f"{counter:>9} {past:<8} {step.uid}  {step.title!r}: {result.reason}".rstrip(": "))
        return outcome

