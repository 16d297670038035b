"""What gpudash compares (canonical form, marker) and what it decides to do: pure functions, no server."""

from __future__ import annotations

import copy
from typing import Any

from grafana_standin.testkit import make_dashboard

from gpudash.compare.content import MARKER_KEY, Marker, canonical, content_hash, marked, provenance, same_content
from gpudash.sync.plan import Action, History, RemoteDashboard, plan_dashboard, plan_prune, plan_sync

SITE = "lab-a1b2c3"
OUR_HISTORY = History(oldest_marker=Marker("sha256:x", "abc", SITE, "a"))


def stored(local: dict[str, Any], version: int = 1, folder: str = "gpu", pushed: bool = True, site: str = SITE,
           **fields: Any) -> RemoteDashboard:
    """What Grafana holds after `site`'s gpudash pushed `local` (pushed=True) or after someone saved it by hand."""
    body = marked(local, "abc", site) if pushed else copy.deepcopy(local)
    body.update(id=7, version=version)
    return RemoteDashboard(str(local["uid"]), body, version, folder, **fields)


def test_canonical_drops_what_the_server_owns_and_normalises_like_grafana() -> None:
    local = {"uid": " a ", "title": "  GPU  ", "refresh": "1s", "panels": [{"v": 80.0, "w": 0.5}]}
    remote = {"uid": "a", "title": "GPU", "refresh": "5s", "panels": [{"v": 80, "w": 0.5}], "id": 3, "version": 9,
              MARKER_KEY: {"contentHash": "x"}}
    assert canonical(local) == canonical(remote)
    assert same_content(local, remote)
    assert "id" not in canonical(remote) and MARKER_KEY not in canonical(remote)
    assert canonical({"refresh": "30s"})["refresh"] == "30s"
    assert canonical({"refresh": ""})["refresh"] == ""
    assert local["title"] == "  GPU  "  # not changed in place


def test_content_hash_ignores_key_order_but_not_values() -> None:
    a = {"uid": "a", "title": "A", "panels": [{"x": 1, "y": 2}]}
    b = {"panels": [{"y": 2, "x": 1}], "title": "A", "uid": "a"}
    assert content_hash(a) == content_hash(b)
    assert content_hash(a) != content_hash({**a, "panels": [{"x": 1, "y": 3}]})
    assert content_hash(a).startswith("sha256:")


def test_marker_and_provenance() -> None:
    local = make_dashboard("a", "A")
    body = marked(local, "0123abc", SITE)
    assert body[MARKER_KEY] == {"contentHash": content_hash(local), "commit": "0123abc", "site": SITE, "uid": "a"}
    assert MARKER_KEY not in local and "id" not in body
    assert provenance(body) == "pushed"
    edited = copy.deepcopy(body)
    edited["panels"][1]["title"] = "edited"
    assert provenance(edited) == "edited"
    assert provenance(local) == "unmarked"


def test_plan_each_local_dashboard() -> None:
    local = make_dashboard("a", "A")
    changed = make_dashboard("a", "A", threshold=90)
    assert plan_dashboard(local, None, "gpu", SITE).action is Action.CREATE
    assert plan_dashboard(local, stored(local), "gpu", SITE).action is Action.UNCHANGED
    update = plan_dashboard(changed, stored(local), "gpu", SITE)
    assert update.action is Action.UPDATE and update.reason == "content changed" and not update.forced
    moved = plan_dashboard(local, stored(local, folder=""), "gpu", SITE)
    assert moved.action is Action.UPDATE and moved.reason == "folder General -> gpu"


def test_plan_refuses_what_was_changed_outside_gpudash_unless_forced() -> None:
    local = make_dashboard("a", "A")
    changed = make_dashboard("a", "A", threshold=90)
    ui_saved = stored(local, version=4, pushed=False, updated_by="alice", updated="2025-01-02T03:04:05Z",
                      history=OUR_HISTORY)
    drifted = plan_dashboard(changed, ui_saved, "gpu", SITE)
    assert drifted.action is Action.DRIFTED
    assert "(version 4, saved by alice at 2025-01-02T03:04:05Z) (saved from the Grafana UI" in drifted.reason
    forced = plan_dashboard(changed, ui_saved, "gpu", SITE, force=True)
    assert forced.action is Action.UPDATE and forced.forced
    json_edit = stored(local)
    json_edit.dashboard["description"] = "edited in the JSON model"
    assert plan_dashboard(changed, json_edit, "gpu", SITE).action is Action.DRIFTED
    assert "since gpudash pushed it" in plan_dashboard(changed, json_edit, "gpu", SITE).reason
    assert plan_dashboard(local, stored(local, pushed=False), "gpu", SITE).action is Action.UNCHANGED


def test_prune_only_with_proof_that_gpudash_wrote_it() -> None:
    local = make_dashboard("old", "Old")
    assert plan_prune(stored(local), SITE).action is Action.PRUNE
    edited = stored(local)
    edited.dashboard["description"] = "edited"
    assert plan_prune(edited, SITE).action is Action.KEEP
    assert plan_prune(edited, SITE, force=True).action is Action.PRUNE
    by_hand = stored(local, pushed=False, history=History())
    assert plan_prune(by_hand, SITE).action is Action.KEEP
    assert plan_prune(by_hand, SITE, force=True).action is Action.KEEP
    ui_saved = stored(local, pushed=False, history=History(sites=(SITE,)))
    assert plan_prune(ui_saved, SITE).action is Action.KEEP and "use --force" in plan_prune(ui_saved, SITE).reason
    assert plan_prune(ui_saved, SITE, force=True).action is Action.PRUNE
    provisioned = stored(local, provisioned=True)
    assert plan_prune(provisioned, SITE, force=True).action is Action.KEEP


def test_plan_sync_orders_and_counts() -> None:
    a, b = make_dashboard("a", "A"), make_dashboard("b", "B")
    old = make_dashboard("old", "Old")
    plan = plan_sync([a, b], {"a": stored(a)}, "gpu", SITE, prune_candidates=[stored(old), stored(a)],
                     gone={"gone": "Gone"})
    assert [(s.uid, s.action) for s in plan.steps] == [("a", Action.UNCHANGED), ("b", Action.CREATE),
                                                       ("gone", Action.GONE), ("old", Action.PRUNE)]
    assert [s.uid for s in plan.writes] == ["b", "old"]
    assert plan.summary() == "create 1, update 0, prune 1; 1 unchanged, 1 gone"


def test_remote_from_api_reads_meta() -> None:
    body = {"dashboard": {"uid": "a", "title": "A", "version": 3},
            "meta": {"version": 3, "folderUid": "f", "provisioned": True, "updatedBy": "bob", "updated": "t"}}
    remote = RemoteDashboard.from_api("a", body)
    assert (remote.version, remote.folder_uid, remote.provisioned, remote.updated_by) == (3, "f", True, "bob")
    root = RemoteDashboard.from_api("a", {"dashboard": {"title": "A"}, "meta": {"folderUid": ""}})
    assert root.folder_uid == ""
