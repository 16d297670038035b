"""Decide what to do with each dashboard: a pure function of the local set and what Grafana holds.

create     the uid does not exist in Grafana
unchanged  Grafana holds the same content in the right folder: nothing is written
update     content or folder differ, and Grafana holds exactly what gpudash last pushed
drifted    content differs and Grafana's copy was changed outside gpudash (or was never gpudash's):
           not written unless forced
prune      (only when asked) a dashboard gpudash pushed that no longer exists locally
keep       (only when asked to prune) a remote-only dashboard that is not gpudash's to delete
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from gpudash.sync.content import canonical, provenance


class Action(str, Enum):
    CREATE = "create"
    UPDATE = "update"
    UNCHANGED = "unchanged"
    DRIFTED = "drifted"
    PRUNE = "prune"
    KEEP = "keep"


WRITES = (Action.CREATE, Action.UPDATE, Action.PRUNE)


@dataclass(frozen=True)
class RemoteDashboard:
    """One dashboard as Grafana returned it (GET /api/dashboards/uid/:uid)."""

    uid: str
    dashboard: dict[str, Any]
    version: int
    folder_uid: str  # "" for the root ("General") folder
    provisioned: bool = False
    updated_by: str = ""
    updated: str = ""
    pushed_before: bool = False  # the version history shows gpudash wrote it once (read only when pruning)

    @property
    def title(self) -> str:
        return str(self.dashboard.get("title", ""))

    @classmethod
    def from_api(cls, uid: str, body: Mapping[str, Any]) -> RemoteDashboard:
        dashboard = body.get("dashboard")
        meta = body.get("meta")
        if not isinstance(dashboard, dict) or not isinstance(meta, dict):
            raise ValueError("expected {dashboard, meta}")
        return cls(
            uid=uid,
            dashboard=dashboard,
            version=int(meta.get("version", dashboard.get("version", 0)) or 0),
            folder_uid=str(meta.get("folderUid") or ""),
            provisioned=bool(meta.get("provisioned", False)),
            updated_by=str(meta.get("updatedBy", "")),
            updated=str(meta.get("updated", "")),
        )


@dataclass(frozen=True)
class Step:
    action: Action
    uid: str
    title: str
    local: dict[str, Any] | None = None
    remote: RemoteDashboard | None = None
    reason: str = ""
    forced: bool = False

    @property
    def writes(self) -> bool:
        return self.action in WRITES


@dataclass(frozen=True)
class Plan:
    steps: tuple[Step, ...]
    folder_uid: str
    counts: Counter[Action] = field(default_factory=Counter, compare=False)

    def __post_init__(self) -> None:
        self.counts.update(step.action for step in self.steps)

    def of(self, *actions: Action) -> list[Step]:
        return [step for step in self.steps if step.action in actions]

    @property
    def writes(self) -> list[Step]:
        return [step for step in self.steps if step.writes]

    def summary(self) -> str:
        """e.g. "create 2, update 1, prune 0 | 197 unchanged, 1 drifted" as one phrase."""
        writes = [f"{action.value} {self.counts[action]}" for action in WRITES]
        rest = [f"{self.counts[action]} {action.value}" for action in Action
                if action not in WRITES and self.counts[action]]
        return ", ".join(writes) + (f"; {', '.join(rest)}" if rest else "")


def _edited_reason(remote: RemoteDashboard) -> str:
    who = f" by {remote.updated_by}" if remote.updated_by else ""
    when = f" at {remote.updated}" if remote.updated else ""
    if provenance(remote.dashboard) == "edited" or remote.pushed_before:
        return f"changed in Grafana{who}{when} (version {remote.version}) since gpudash pushed it"
    return (f"Grafana's copy has no gpudash marker (version {remote.version}, last saved{who}{when}): "
            "saved from the Grafana UI, or not created by gpudash")


def _folder_name(uid: str) -> str:
    return uid or "General"


def plan_dashboard(local: dict[str, Any], remote: RemoteDashboard | None, folder_uid: str,
                   force: bool = False) -> Step:
    uid, title = str(local["uid"]), str(local["title"])
    if remote is None:
        return Step(Action.CREATE, uid, title, local, None, f"new in folder {_folder_name(folder_uid)}")
    remote_canonical = canonical(remote.dashboard)
    equal = canonical(local) == remote_canonical
    moved = remote.folder_uid != folder_uid
    if equal and not moved:
        return Step(Action.UNCHANGED, uid, title, local, remote)
    why = "content changed" if not equal else ""
    if moved:
        why = ", ".join(filter(None, [why, f"folder {_folder_name(remote.folder_uid)} -> "
                                          f"{_folder_name(folder_uid)}"]))
    if equal or provenance(remote.dashboard, remote_canonical) == "pushed":
        return Step(Action.UPDATE, uid, title, local, remote, why)
    edited = _edited_reason(remote)
    if force:
        return Step(Action.UPDATE, uid, title, local, remote, f"{why}; overwriting: {edited}", forced=True)
    return Step(Action.DRIFTED, uid, title, local, remote, edited)


def plan_prune(candidate: RemoteDashboard, force: bool = False) -> Step:
    """A remote-only dashboard found while pruning: delete it only when gpudash provably wrote it."""
    uid, title = candidate.uid, candidate.title
    if candidate.provisioned:
        return Step(Action.KEEP, uid, title, None, candidate, "provisioned from files on the Grafana server")
    state = provenance(candidate.dashboard)
    if state == "unmarked" and candidate.pushed_before:
        state = "edited"
    if state == "pushed":
        return Step(Action.PRUNE, uid, title, None, candidate, "no longer defined locally")
    if state == "edited":
        if force:
            return Step(Action.PRUNE, uid, title, None, candidate,
                        f"no longer defined locally; deleting although {_edited_reason(candidate)}", forced=True)
        return Step(Action.KEEP, uid, title, None, candidate, f"{_edited_reason(candidate)}; use --force to delete")
    return Step(Action.KEEP, uid, title, None, candidate, "not created by gpudash (no marker); never deleted")


def plan_sync(local: Sequence[dict[str, Any]], remote: Mapping[str, RemoteDashboard], folder_uid: str,
              force: bool = False, prune_candidates: Iterable[RemoteDashboard] = ()) -> Plan:
    """The plan for every local dashboard, then for each remote-only prune candidate (by uid order)."""
    steps = [plan_dashboard(item, remote.get(str(item["uid"])), folder_uid, force) for item in local]
    local_uids = {str(item["uid"]) for item in local}
    candidates = sorted((c for c in prune_candidates if c.uid not in local_uids), key=lambda c: c.uid)
    steps += [plan_prune(candidate, force) for candidate in candidates]
    return Plan(tuple(steps), folder_uid)
