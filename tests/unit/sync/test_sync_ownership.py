"""Whose a remote dashboard is, and what sync may do with it: pure functions of the JSON, its history and the site."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from grafana_standin.testkit import make_dashboard

from gpudash.compare.content import MARKER_KEY, Marker, marked, read_marker
from gpudash.sync.plan import Action, History, Owner, RemoteDashboard, claim_of, plan_dashboard, plan_prune

OURS, THEIRS = "alpha-1a2b3c", "beta-4d5e6f"


def remote(body: dict[str, Any], uid: str = "", version: int = 3, history: History | None = None,
           folder: str = "gpu") -> RemoteDashboard:
    data = copy.deepcopy(body)
    data.update(id=7, version=version)
    return RemoteDashboard(uid or str(body["uid"]), data, version, folder, updated_by="carol",
                           updated="2026-01-02T03:04:05Z", history=history)


def legacy(local: dict[str, Any]) -> dict[str, Any]:
    """What a gpudash without sites wrote: the marker has only the hash and the commit."""
    body = marked(local, "abc", OURS)
    body[MARKER_KEY] = {"contentHash": body[MARKER_KEY]["contentHash"], "commit": "abc"}
    return body


def test_the_marker_names_the_site_and_the_uid() -> None:
    body = marked(make_dashboard("a", "A"), "abc", OURS)
    assert read_marker(body) == Marker(body[MARKER_KEY]["contentHash"], "abc", OURS, "a")
    assert read_marker(legacy(make_dashboard("a", "A"))) == Marker(body[MARKER_KEY]["contentHash"], "abc", None, None)
    assert read_marker(make_dashboard("a", "A")) is None


@pytest.mark.parametrize(("body", "uid", "history", "owner", "detail"), [
    (marked(make_dashboard("a", "A"), "c", OURS), "a", None, Owner.THIS_SITE, ""),
    (marked(make_dashboard("a", "A"), "c", THEIRS), "a", None, Owner.OTHER_SITE, THEIRS),
    (marked(make_dashboard("a", "A"), "c", OURS), "copy-of-a", None, Owner.COPY, "a"),
    (legacy(make_dashboard("a", "A")), "a", None, Owner.LEGACY, ""),
    (make_dashboard("a", "A"), "a", None, Owner.UNPROVEN, ""),
    (make_dashboard("a", "A"), "a", History(), Owner.UNPROVEN, ""),
    (make_dashboard("a", "A"), "a", History(sites=(OURS,)), Owner.THIS_SITE, ""),
    (make_dashboard("a", "A"), "a", History(sites=(THEIRS,)), Owner.OTHER_SITE, THEIRS),
    (make_dashboard("a", "A"), "a", History(oldest_marker=Marker("h", "c", OURS, "a")), Owner.THIS_SITE, ""),
    (make_dashboard("a", "A"), "b", History(oldest_marker=Marker("h", "c", OURS, "a")), Owner.COPY, "a"),
    (make_dashboard("a", "A"), "a", History(oldest_marker=Marker("h", "c", THEIRS, "a")), Owner.OTHER_SITE, THEIRS),
    (make_dashboard("a", "A"), "a", History(legacy_message=True), Owner.LEGACY, ""),
], ids=["ours", "other-site", "api-copy", "legacy", "unmarked", "no-evidence", "our-message", "their-message",
        "our-oldest", "copy-oldest", "their-oldest", "legacy-message"])
def test_claim(body: dict[str, Any], uid: str, history: History | None, owner: Owner, detail: str) -> None:
    claim = claim_of(remote(body, uid, history=history), OURS)
    assert (claim.owner, claim.detail) == (owner, detail)


@pytest.mark.parametrize("force", [False, True])
def test_a_uid_holding_another_sites_dashboard_is_a_conflict_even_forced(force: bool) -> None:
    local = make_dashboard("a", "A", threshold=90)
    for theirs in (remote(marked(make_dashboard("a", "A"), "c", THEIRS)),
                   remote(make_dashboard("a", "A"), history=History(sites=(THEIRS,))),
                   remote(make_dashboard("a", "A"), history=History(oldest_marker=Marker("h", "c", THEIRS, "a")))):
        step = plan_dashboard(local, theirs, "gpu", OURS, force=force)
        assert step.action is Action.CONFLICT and not step.writes
        assert f"pushed by gpudash for site {THEIRS!r}, not this site ({OURS!r})" in step.reason
        assert "never written, even with --force" in step.reason and "need distinct dashboard uids" in step.reason
    same = plan_dashboard(make_dashboard("a", "A"), remote(marked(make_dashboard("a", "A"), "c", THEIRS)), "gpu",
                          OURS, force=force)
    assert same.action is Action.CONFLICT  # equal content too: both sites think the uid is theirs


@pytest.mark.parametrize("force", [False, True])
def test_what_is_not_provably_ours_is_never_overwritten(force: bool) -> None:
    local = make_dashboard("a", "A", threshold=90)
    copy_of_b = remote(marked(make_dashboard("b", "B"), "c", OURS), uid="a")
    step = plan_dashboard(local, copy_of_b, "gpu", OURS, force=force)
    assert step.action is Action.CONFLICT and "was written for uid b" in step.reason
    by_hand = remote(make_dashboard("a", "A"), history=History())
    step = plan_dashboard(local, by_hand, "gpu", OURS, force=force)
    assert step.action is Action.CONFLICT
    assert f"no gpudash marker and no version gpudash wrote for site {OURS!r}" in step.reason
    assert "(version 3, saved by carol at 2026-01-02T03:04:05Z)" in step.reason


def test_a_ui_saved_dashboard_proven_ours_by_its_history_is_drift_then_forced() -> None:
    local = make_dashboard("a", "A", threshold=90)
    ui_saved = remote(make_dashboard("a", "A"), history=History(oldest_marker=Marker("h", "c", OURS, "a")))
    assert plan_dashboard(local, ui_saved, "gpu", OURS).action is Action.DRIFTED
    forced = plan_dashboard(local, ui_saved, "gpu", OURS, force=True)
    assert forced.action is Action.UPDATE and forced.forced


def test_legacy_markers_on_local_uids_keep_working_and_are_restamped() -> None:
    local = make_dashboard("a", "A")
    restamp = plan_dashboard(local, remote(legacy(local)), "gpu", OURS)
    assert restamp.action is Action.UPDATE and not restamp.forced
    assert f"re-stamped for site {OURS!r}" in restamp.reason
    moved = plan_dashboard(local, remote(legacy(local), folder="gpudash"), "gpu", OURS)
    assert moved.action is Action.UPDATE and "folder gpudash -> gpu" in moved.reason
    changed = plan_dashboard(make_dashboard("a", "A", threshold=90), remote(legacy(local)), "gpu", OURS)
    assert changed.action is Action.UPDATE and "content changed" in changed.reason
    edited = legacy(local)
    edited["description"] = "edited"
    assert plan_dashboard(local, remote(edited), "gpu", OURS).action is Action.DRIFTED
    assert plan_dashboard(local, remote(marked(local, "c", OURS)), "gpu", OURS).action is Action.UNCHANGED


@pytest.mark.parametrize("force", [False, True])
def test_prune_keeps_what_is_not_this_sites_and_says_why(force: bool) -> None:
    old = make_dashboard("old", "Old")
    kept = {
        "theirs": (remote(marked(old, "c", THEIRS)), f"pushed by gpudash for site {THEIRS!r}, not this site"),
        "copy": (remote(marked(old, "c", OURS), uid="copy"), "a copy made in Grafana, no site's under this uid: "
                                                             "its gpudash marker was written for uid old"),
        "legacy": (remote(legacy(old)), "marked by an older gpudash without a site identity: cannot tell which "
                                        "site pushed it; delete it in Grafana if it is yours"),
        "by hand": (remote(old, history=History()), "no site's as far as Grafana shows: no gpudash marker and no "
                                                    "version gpudash wrote"),
        "their UI save": (remote(old, history=History(sites=(THEIRS,))), f"site {THEIRS!r}"),
        "our UI save": (remote(old, history=History(sites=(OURS,))), f"this site's ({OURS!r}), changed in Grafana "
                                                                     "since gpudash pushed it"),
    }
    for name, (candidate, why) in kept.items():
        if force and name == "our UI save":
            continue  # this site's own: --force deletes it (below)
        step = plan_prune(candidate, OURS, force=force)
        assert step.action is Action.KEEP, name
        assert why in step.reason, name
    assert plan_prune(remote(marked(old, "c", OURS)), OURS, force=force).action is Action.PRUNE
    our_ui_save = remote(old, history=History(sites=(OURS,)))
    assert plan_prune(our_ui_save, OURS, force=force).action is (Action.PRUNE if force else Action.KEEP)
