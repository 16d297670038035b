"""Decide what to do with each dashboard: a pure function of the local set, what Grafana holds, and the site.

create     the uid does not exist in Grafana
unchanged  Grafana holds the same content in the right folder: nothing is written
update     content or folder differ (or an old marker needs the site), and Grafana holds exactly what this
           site's gpudash last pushed
drifted    content differs and this site's dashboard was changed in Grafana since: not written unless forced
conflict   the uid holds a dashboard that is not provably this site's (another site's, a copy, one with no
           gpudash evidence at all): never written, even when forced
prune      (only when asked) a dashboard this site pushed that no longer exists locally
keep       (only when asked to prune) a remote-only dashboard that is not this site's to delete
gone       (only when asked to prune) listed by search, deleted in Grafana before gpudash could read it

A dashboard is this site's only when its marker names this site and the uid it sits under, or, when a
save from the UI dropped the marker, when its version history shows a version gpudash wrote for this site.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from gpudash.compare.content import Marker, canonical, provenance, read_marker
from gpudash.compare.content_v2 import v2_only
from gpudash.sync.schema import CLASSIC, Schema
from gpudash.sync.stored import Storage, canonical_in


class Action(str, Enum):
    CREATE = "create"
    UPDATE = "update"
    UNCHANGED = "unchanged"
    DRIFTED = "drifted"
    CONFLICT = "conflict"
    PRUNE = "prune"
    KEEP = "keep"
    GONE = "gone"


WRITES = (Action.CREATE, Action.UPDATE, Action.PRUNE)


@dataclass(frozen=True)
class History:
    """What a dashboard's version history says about who wrote it; read only when its JSON has no marker."""

    sites: tuple[str, ...] = ()  # sites named by gpudash version messages, newest first
    legacy_message: bool = False  # a version message from a gpudash without sites
    oldest_marker: Marker | None = None  # the marker in the oldest version Grafana kept (what it was created as)


@dataclass(frozen=True)
class RemoteDashboard:
    """One dashboard as Grafana returned it (GET /api/dashboards/uid/:uid, or its /apis resource)."""

    uid: str
    dashboard: dict[str, Any]
    version: int
    folder_uid: str  # "" for the root ("General") folder
    provisioned: bool = False
    updated_by: str = ""
    updated: str = ""
    history: History | None = None  # read only when the JSON has no marker and the verdict depends on it
    resource_version: str = ""  # /apis only: what an update sends back, so a save in between answers 409
    annotations: dict[str, str] = field(default_factory=dict, compare=False)  # /apis only: kept on update
    storage: Storage | None = field(default=None, compare=False)  # /apis only: stored, read and written schemas

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


class Owner(str, Enum):
    THIS_SITE = "this site"
    LEGACY = "legacy"  # marked by a gpudash without sites: this site's for its local uids, nobody's to prune
    OTHER_SITE = "other site"
    COPY = "copy"  # this site's marker, written for another uid: a copy made in Grafana
    UNPROVEN = "unproven"  # no marker, and no gpudash version in the history Grafana kept


@dataclass(frozen=True)
class Claim:
    owner: Owner
    detail: str = ""  # the other site, or the uid the marker was written for
    evidence: str = "its gpudash marker"


def _claim_of_marker(marker: Marker, uid: str, site: str, evidence: str) -> Claim:
    if marker.site is None:
        return Claim(Owner.LEGACY, "", evidence)
    if marker.site != site:
        return Claim(Owner.OTHER_SITE, marker.site, evidence)
    if marker.uid != uid:
        return Claim(Owner.COPY, marker.uid or "(none)", evidence)
    return Claim(Owner.THIS_SITE, "", evidence)


def claim_of(remote: RemoteDashboard, site: str) -> Claim:
    """Whose the remote dashboard provably is: its marker first, then its version history."""
    marker = read_marker(remote.dashboard)
    if marker is not None:
        return _claim_of_marker(marker, remote.uid, site, "its gpudash marker")
    history = remote.history
    if history is None:
        return Claim(Owner.UNPROVEN)
    if site in history.sites:
        return Claim(Owner.THIS_SITE, "", "a gpudash version message in its history")
    if history.sites:
        return Claim(Owner.OTHER_SITE, history.sites[0], "a gpudash version message in its history")
    if history.oldest_marker is not None:
        return _claim_of_marker(history.oldest_marker, remote.uid, site, "the gpudash marker of its oldest version")
    if history.legacy_message:
        return Claim(Owner.LEGACY, "", "a gpudash version message in its history")
    return Claim(Owner.UNPROVEN)


def by_at(remote: RemoteDashboard) -> str:
    """e.g. " by alice at 2025-01-02T03:04:05Z": who saved the version gpudash read, and when."""
    who = f" by {remote.updated_by}" if remote.updated_by else ""
    return who + (f" at {remote.updated}" if remote.updated else "")


def saved(remote: RemoteDashboard) -> str:
    return f"version {remote.version}, saved{by_at(remote)}"


def _edited_reason(remote: RemoteDashboard) -> str:
    lost = "" if read_marker(remote.dashboard) is not None else " (saved from the Grafana UI: the marker is gone)"
    return f"changed in Grafana since gpudash pushed it ({saved(remote)}){lost}"


def _not_ours(claim: Claim, site: str) -> str:
    if claim.owner is Owner.OTHER_SITE:
        return f"pushed by gpudash for site {claim.detail!r}, not this site ({site!r}), says {claim.evidence}"
    if claim.owner is Owner.COPY:
        return f"a copy made in Grafana, no site's under this uid: {claim.evidence} was written for uid {claim.detail}"
    if claim.owner is Owner.LEGACY:
        return ("marked by an older gpudash without a site identity: cannot tell which site pushed it; "
                "delete it in Grafana if it is yours")
    return (f"no site's as far as Grafana shows: no gpudash marker and no version gpudash wrote for site {site!r} "
            "in its history")


def _conflict_reason(remote: RemoteDashboard, claim: Claim, site: str) -> str:
    advice = ("two sites sharing one Grafana need distinct dashboard uids" if claim.owner is Owner.OTHER_SITE
              else "delete it in Grafana, or give the local dashboard another uid")
    return (f"the uid holds a dashboard that is not this site's ({saved(remote)}): {_not_ours(claim, site)}; "
            f"never written, even with --force; {advice}")


def _folder_name(uid: str) -> str:
    return uid or "General"


def v2_structure(storage: Storage) -> str:
    """The v2-only structure of a v2-stored dashboard, as a refusal and --force name it."""
    found = v2_only(storage.spec) if storage.spec is not None else []
    return ", ".join(found) if found else "no tabs, auto grids or conditional rendering"


def _plan_as_stored(local: dict[str, Any], remote: RemoteDashboard, storage: Storage, folder_uid: str, site: str,
                    force: bool, schema: Schema) -> Step:
    """A dashboard whose comparison needs the schema Grafana stores it in (v2 anywhere, or a failed conversion):
    compared there and only there; a person's save is an edit unless its content is the same as local's."""
    uid, title = str(local["uid"]), str(local["title"])
    claim = claim_of(remote, site)
    if claim.owner not in (Owner.THIS_SITE, Owner.LEGACY):
        return Step(Action.CONFLICT, uid, title, local, remote, _conflict_reason(remote, claim, site))
    local_spec = schema.spec_of(local, storage.stored)
    comparable = storage.spec is not None and local_spec is not None
    equal = comparable and canonical_in(storage.stored, storage.spec or {}) == canonical_in(storage.stored,
                                                                                             local_spec or {})
    moved = remote.folder_uid != folder_uid
    upgrade = schema.writes == "v2" and storage.stored == "v1" and storage.as_gpudash_wrote
    if equal and not moved and not upgrade:
        return Step(Action.UNCHANGED, uid, title, local, remote)
    why = ", ".join((["content changed"] if not equal else [])
                    + ([f"folder {_folder_name(remote.folder_uid)} -> {_folder_name(folder_uid)}"] if moved else [])
                    + (["stored as v1, written as v2 now (grafana.schema)"] if upgrade else []))
    over_v2 = storage.stored == "v2" and schema.writes == "v1"
    if storage.as_gpudash_wrote and not over_v2:
        return Step(Action.UPDATE, uid, title, local, remote, why)
    if storage.failed:
        edited = f"Grafana could not convert it from {storage.stored} ({storage.failed}; {saved(remote)})"
    elif storage.person_saved:
        edited = (f"saved as {storage.stored} in Grafana's editor since gpudash pushed it as {storage.written} "
                  f"({saved(remote)})")
        if not comparable:
            edited += f"; gpudash cannot write {storage.stored} to compare it there"
    elif not storage.as_gpudash_wrote:
        edited = f"changed in Grafana since gpudash pushed it as {storage.written} ({saved(remote)})"
    else:
        edited = f"stored as {storage.stored}, as gpudash wrote it; gpudash writes {schema.writes} now (grafana.schema)"
    if force:
        replaced = f"; replaces its v2 storage ({v2_structure(storage)}) with v1" if over_v2 else ""
        return Step(Action.UPDATE, uid, title, local, remote, f"{why}; overwriting: {edited}{replaced}", forced=True)
    refused = f"; a v1 write would replace its v2 storage ({v2_structure(storage)})" if over_v2 else ""
    return Step(Action.DRIFTED, uid, title, local, remote, edited + refused)


def plan_dashboard(local: dict[str, Any], remote: RemoteDashboard | None, folder_uid: str, site: str,
                   force: bool = False, schema: Schema = CLASSIC) -> Step:
    uid, title = str(local["uid"]), str(local["title"])
    if remote is None:
        return Step(Action.CREATE, uid, title, local, None, f"new in folder {_folder_name(folder_uid)}")
    if remote.storage is not None and remote.storage.compared_as_stored:
        return _plan_as_stored(local, remote, remote.storage, folder_uid, site, force, schema)
    remote_canonical = canonical(remote.dashboard)
    equal = canonical(local) == remote_canonical
    moved = remote.folder_uid != folder_uid
    marker = read_marker(remote.dashboard)
    if equal and not moved and marker is None:
        return Step(Action.UNCHANGED, uid, title, local, remote)  # nothing to write, so nothing to prove
    claim = claim_of(remote, site)
    if claim.owner not in (Owner.THIS_SITE, Owner.LEGACY):
        return Step(Action.CONFLICT, uid, title, local, remote, _conflict_reason(remote, claim, site))
    restamp = claim.owner is Owner.LEGACY and marker is not None
    if equal and not moved and not restamp:
        return Step(Action.UNCHANGED, uid, title, local, remote)
    reasons = ["content changed"] if not equal else []
    if moved:
        reasons.append(f"folder {_folder_name(remote.folder_uid)} -> {_folder_name(folder_uid)}")
    if restamp:
        reasons.append(f"marker from a gpudash without sites re-stamped for site {site!r}")
    why = ", ".join(reasons)
    if equal or provenance(remote.dashboard, remote_canonical) == "pushed":
        return Step(Action.UPDATE, uid, title, local, remote, why)
    edited = _edited_reason(remote)
    if force:
        return Step(Action.UPDATE, uid, title, local, remote, f"{why}; overwriting: {edited}", forced=True)
    return Step(Action.DRIFTED, uid, title, local, remote, edited)


def plan_prune(candidate: RemoteDashboard, site: str, force: bool = False) -> Step:
    """A remote-only dashboard found while pruning: delete it only when this site's gpudash provably wrote it."""
    uid, title = candidate.uid, candidate.title
    if candidate.provisioned:
        return Step(Action.KEEP, uid, title, None, candidate, "provisioned from files on the Grafana server")
    claim = claim_of(candidate, site)
    if claim.owner is not Owner.THIS_SITE:
        never = "" if claim.owner is Owner.LEGACY else "; never deleted"
        return Step(Action.KEEP, uid, title, None, candidate, _not_ours(claim, site) + never)
    as_written = candidate.storage is not None and candidate.storage.as_gpudash_wrote  # v2: by its v2 hash
    if as_written or provenance(candidate.dashboard) == "pushed":
        return Step(Action.PRUNE, uid, title, None, candidate, "no longer defined locally")
    edited = _edited_reason(candidate)
    if force:
        return Step(Action.PRUNE, uid, title, None, candidate,
                    f"no longer defined locally; deleting although {edited}", forced=True)
    return Step(Action.KEEP, uid, title, None, candidate, f"this site's ({site!r}), {edited}; use --force to delete")


def vanished(uid: str, title: str) -> Step:
    return Step(Action.GONE, uid, title, None, None, "deleted in Grafana meanwhile (listed by search, gone when read)")


def plan_sync(local: Sequence[dict[str, Any]], remote: Mapping[str, RemoteDashboard], folder_uid: str, site: str,
              force: bool = False, prune_candidates: Iterable[RemoteDashboard] = (),
              gone: Mapping[str, str] | None = None, schema: Schema = CLASSIC) -> Plan:
    """The plan for every local dashboard, then for each remote-only prune candidate (by uid order).

    `gone`: uid -> title of candidates that search listed and that were deleted before they could be read.
    """
    steps = [plan_dashboard(item, remote.get(str(item["uid"])), folder_uid, site, force, schema) for item in local]
    local_uids = {str(item["uid"]) for item in local}
    candidates = sorted((c for c in prune_candidates if c.uid not in local_uids), key=lambda c: c.uid)
    pruned = [plan_prune(candidate, site, force) for candidate in candidates]
    pruned += [vanished(uid, title) for uid, title in (gone or {}).items() if uid not in local_uids]
    steps += sorted(pruned, key=lambda step: step.uid)
    return Plan(tuple(steps), folder_uid)
