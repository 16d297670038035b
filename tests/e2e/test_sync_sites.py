"""Two sites sharing one Grafana, copies made through the API, and changes made while gpudash works.

A dashboard is a site's only when gpudash can prove it for that site: each site's sync, prune and
--force leave the other's dashboards alone, a copy survives `sync --prune --force`, and --force
overwrites only the version it read (and printed).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from grafana_standin import StandIn
from grafana_standin.testkit import THRESHOLDS, GrafanaUnderTest, Result, make_dashboard, run_gpudash, write_set

from gpudash.compare.content import MARKER_KEY, marked
from gpudash.config.loading import load_site

pytest_plugins = ["grafana_standin.fixtures"]


def server(grafana: GrafanaUnderTest) -> StandIn:
    assert grafana.standin is not None
    return grafana.standin


@dataclass
class Site:
    """One site's checkout: its gpudash.yaml, its generated dashboards, and the Grafana they go to."""

    name: str
    grafana: GrafanaUnderTest
    site_file: Path
    local_dir: Path
    dashboards: list[dict[str, Any]]

    @property
    def site_id(self) -> str:
        return load_site(self.site_file).site_id

    @property
    def uids(self) -> list[str]:
        return [d["uid"] for d in self.dashboards]

    def keep_only(self, *uids: str) -> None:
        write_set(self.local_dir, [d for d in self.dashboards if d["uid"] in uids])

    def gpudash(self, *args: str) -> Result:
        command, *rest = args
        return run_gpudash([command, "--dir", self.local_dir, "--site", self.site_file, "--thresholds", THRESHOLDS,
                            "--retries", "1", *rest], self.grafana.env())


def make_site(grafana: GrafanaUnderTest, name: str, address: str, folder: str = "") -> Site:
    """A site whose gpudash.yaml names no site_id (its first push writes one), with three dashboards of its own."""
    root = grafana.workdir / name
    root.mkdir()
    grafana_section = f"  folder: GPU {name}\n" + (f"  folder_uid: {folder}\n" if folder else "")
    grafana_section += "  schema: v1\n"  # the classic schema on every version, as grafana_standin.fixtures
    site_file = root / "gpudash.yaml"
    site_file.write_text(f"clusters:\n  - name: {name}\n    targets:\n      - address: {address}\n"
                         f"grafana:\n{grafana_section}")
    dashboards = [make_dashboard(f"{name}-d{n}", f"{name} dashboard {n}") for n in range(3)]
    return Site(name, grafana, site_file, write_set(root / "json", dashboards), dashboards)


def stored(grafana: GrafanaUnderTest, uids: list[str]) -> dict[str, Any]:
    """The stand-in's rows as they are now (versions included): equal before and after means untouched."""
    return {uid: server(grafana).dashboard(uid) for uid in uids}


def rename_panel(title: str) -> Callable[[dict[str, Any]], None]:
    return lambda d: d["panels"][1].update(title=title)


def panel_title(grafana: GrafanaUnderTest, uid: str) -> str:
    found = server(grafana).dashboard(uid)
    assert found is not None
    return str(found["panels"][1]["title"])


@pytest.mark.parametrize("shared_folder", [False, True], ids=["default-folders", "one-shared-folder"])
def test_two_sites_sharing_one_grafana_never_touch_each_other(standin: GrafanaUnderTest, shared_folder: bool) -> None:
    folder = f"{standin.prefix}-shared" if shared_folder else ""
    alpha = make_site(standin, "alpha", "10.0.0.1:9400", folder)
    beta = make_site(standin, "beta", "10.0.9.1:9400", folder)
    for site in (alpha, beta):
        pushed = site.gpudash("push")
        assert pushed.code == 0, pushed.text
    assert alpha.site_id and beta.site_id and alpha.site_id != beta.site_id
    for site in (alpha, beta):
        edited, kept, gone = site.uids
        standin.ui_edit(edited, rename_panel(f"Renamed by the {site.name} team"))
        site.keep_only(edited, kept)

    for site, other in ((alpha, beta), (beta, alpha)):
        edited, kept, gone = site.uids
        theirs = stored(standin, other.uids)
        diff = site.gpudash("diff")
        assert diff.code == 1, diff.text
        assert not [line for line in diff.out.splitlines() if "this site" in line and site.name not in line]
        pruned = site.gpudash("sync", "--prune")
        assert pruned.code == 3, pruned.text  # the UI edit is drift
        assert f"drifted    {edited}" in pruned.out
        assert server(standin).dashboard(gone) is None
        assert panel_title(standin, edited) == f"Renamed by the {site.name} team"
        assert stored(standin, other.uids) == theirs
        if shared_folder:
            for uid in other.uids[:2]:  # one marked, one saved from the UI (the history names the site)
                line = next(line for line in pruned.out.splitlines() if line.startswith(f"kept       {uid}"))
                assert f"pushed by gpudash for site {other.site_id!r}, not this site ({site.site_id!r})" in line

    for site, other in ((alpha, beta), (beta, alpha)):
        edited, kept, gone = site.uids
        theirs = stored(standin, other.uids)
        forced = site.gpudash("sync", "--prune", "--force")
        assert forced.code == 0, forced.text
        out = forced.out
        shown = out.index(f"about to overwrite {edited}")
        gpudash_identity = "service-account:sa-1-gpudash" if standin.on_apis else "sa-1-gpudash"
        assert f"Grafana's version 2, saved by {gpudash_identity} at " in out[shown:]
        diff_line = f"title 'Renamed by the {site.name} team' -> 'Panel 2'"
        assert shown < out.index(diff_line) < out.index(f"--- grafana/{edited}") < out.index(f"updated  {edited}")
        assert panel_title(standin, edited) == "Panel 2"
        assert stored(standin, other.uids) == theirs
        marker = standin.marker(edited) or {}
        assert (marker["site"], marker["uid"]) == (site.site_id, edited)
    assert server(standin).dashboard(beta.uids[0]) is not None and server(standin).dashboard(beta.uids[2]) is None


def test_default_folder_titles_clash_on_old_grafana_with_advice(standin: GrafanaUnderTest) -> None:
    alpha = make_site(standin, "alpha", "10.0.0.1:9400")
    beta = make_site(standin, "beta", "10.0.9.1:9400")
    for site in (alpha, beta):
        site.site_file.write_text(site.site_file.read_text().replace(f"GPU {site.name}", "GPU"))
    assert alpha.gpudash("push").code == 0
    second = beta.gpudash("push")
    if server(standin).flavor.folder_title_rule == "none":
        assert second.code == 0, second.text
        return
    assert second.code == 4
    assert f"set grafana.folder in gpudash.yaml to a title of this site's own (e.g. 'GPU {beta.site_id}')" \
           in second.err
    assert stored(standin, alpha.uids) == stored(standin, alpha.uids) and server(standin).dashboard(alpha.uids[0])


def test_an_api_copy_survives_prune_force(standin: GrafanaUnderTest) -> None:
    local = standin.dashboards(3)
    assert standin.push(local).code == 0
    copy_uid = standin.uid("copy")
    standin.api_copy(local[0]["uid"], copy_uid, f"{standin.prefix} copy of dashboard 0")
    write_set(standin.local_dir, local[:2])

    diff = standin.gpudash("diff")
    assert f"keep        {copy_uid}" in diff.out and f"was written for uid {local[0]['uid']}" in diff.out
    forced = standin.gpudash("sync", "--prune", "--force")
    assert forced.code == 0, forced.text
    assert standin.get(copy_uid) is not None
    assert standin.get(local[2]["uid"]) is None  # what is provably this site's is still pruned
    line = next(line for line in forced.out.splitlines() if line.startswith(f"kept       {copy_uid}"))
    assert f"marker was written for uid {local[0]['uid']}" in line and "never deleted" in line


def test_a_ui_save_during_a_forced_overwrite_is_reported_not_overwritten(standin: GrafanaUnderTest) -> None:
    local = standin.dashboards(2)
    assert standin.push(local).code == 0
    uid = local[0]["uid"]
    standin.ui_edit(uid, rename_panel("first UI edit"))
    for item in local:
        item["description"] = "changed locally"
    write_set(standin.local_dir, local)
    server(standin).fault("POST", "/api/dashboards/db", before=lambda s: s.ui_save(
        uid, lambda d: d.update(description="saved while gpudash was writing"), login="bob"))
    server(standin).reset_log()

    result = standin.gpudash("sync", "--force")
    assert result.code == 3, result.text
    out = result.out
    bob = "user:bob" if standin.on_apis else "bob"
    assert out.index(f"about to overwrite {uid}") < out.index("title 'first UI edit' -> 'Panel 2'")
    assert (f"conflict   {uid}  {local[0]['title']!r}: changed again in Grafana by {bob} at " in out
            and "(version 3) while gpudash was overwriting version 2; not overwritten; run again to review" in out)
    assert f"changed again in Grafana by {bob}" in result.err and result.err.count("\n") == 1
    saved = standin.get(uid)
    assert saved is not None and saved["dashboard"]["description"] == "saved while gpudash was writing"
    assert saved["dashboard"]["panels"][1]["title"] == "first UI edit"
    assert server(standin).count("POST", "/api/dashboards/db") == 2  # the one refused, not retried; the other
    other = standin.get(local[1]["uid"])
    assert other is not None and other["dashboard"]["description"] == "changed locally"


def test_a_prune_never_deletes_a_version_it_did_not_plan_with(standin: GrafanaUnderTest) -> None:
    local = standin.dashboards(2)
    assert standin.push(local).code == 0
    uid = local[1]["uid"]
    standin.ui_edit(uid, rename_panel("edited"))
    write_set(standin.local_dir, local[:1])
    reads = itertools.count(1)

    def save_on_the_second_read(s: StandIn) -> None:
        read = s.received[-1][1]  # the dashboard itself (/api or /apis), not its version history
        if read.endswith((f"/dashboards/uid/{uid}", f"/dashboards/{uid}")) and next(reads) == 2:
            s.ui_save(uid, rename_panel("edited again"), login="bob")

    server(standin).fault("GET", f"/api/dashboards/uid/{uid}", times=-1, before=save_on_the_second_read)
    result = standin.gpudash("sync", "--prune", "--force")
    assert result.code == 3, result.text
    assert f"about to delete {uid}" in result.out
    bob = "user:bob" if standin.on_apis else "bob"
    assert f"changed again in Grafana by {bob}" in result.out and "while gpudash was deleting version 2" in result.out
    assert server(standin).count("DELETE") == 0
    assert panel_title(standin, uid) == "edited again"


def test_the_same_uid_from_another_site_is_refused_even_forced(standin: GrafanaUnderTest) -> None:
    local = standin.dashboards(1)
    assert standin.push(local).code == 0
    uid = local[0]["uid"]
    other = make_site(standin, "beta", "10.0.9.1:9400", standin.folder_uid)
    other.dashboards = [make_dashboard(uid, "beta's own dashboard", threshold=95.0)]
    write_set(other.local_dir, other.dashboards)
    before = stored(standin, [uid])
    asked = other.gpudash("push")  # no site_id yet, and its uid holds a site's dashboard: which site is it?
    assert asked.code == 2 and f"site {standin.site_id!r}: {uid} " in asked.err, asked.text
    assert stored(standin, [uid]) == before and other.site_id == ""
    other.site_file.write_text(other.site_file.read_text() + "site_id: beta-0a1b2c3d\n")  # not that site, as told

    for args in (("push",), ("push", "--force"), ("sync", "--force")):
        refused = other.gpudash(*args)
        assert refused.code == 3, refused.text
        assert f"conflict   {uid}" in refused.out
        assert f"pushed by gpudash for site {standin.site_id!r}, not this site ({other.site_id!r})" in refused.err
        assert "two sites sharing one Grafana need distinct dashboard uids" in refused.err
        assert stored(standin, [uid]) == before

    standin.ui_edit(uid, rename_panel("edited in the UI"))  # the marker is gone; the history still names the site
    before = stored(standin, [uid])
    refused = other.gpudash("sync", "--force")
    assert refused.code == 3, refused.text
    assert f"for site {standin.site_id!r}" in refused.err and stored(standin, [uid]) == before


def test_dashboards_deleted_meanwhile_are_reported_and_the_run_goes_on(standin: GrafanaUnderTest) -> None:
    keep, ui_saved, listed = standin.dashboards(3)
    assert standin.push([keep, ui_saved, listed]).code == 0
    standin.ui_edit(ui_saved["uid"], rename_panel("edited"))  # no marker: prune reads its version history
    write_set(standin.local_dir, [keep])
    # on /apis the marker annotations survive a UI save: the history is not read, the dashboard's read is
    history = "" if standin.on_apis else "/versions"

    def delete_both_meanwhile() -> None:
        server(standin).fault("GET", f"/api/dashboards/uid/{ui_saved['uid']}{history}",
                              before=lambda s: s.remove_dashboard(ui_saved["uid"]))
        server(standin).fault("GET", f"/api/dashboards/uid/{listed['uid']}",
                              before=lambda s: s.remove_dashboard(listed["uid"]))

    delete_both_meanwhile()
    diff = standin.gpudash("diff")
    assert diff.code == 0, diff.text
    for uid in (ui_saved["uid"], listed["uid"]):
        assert f"gone        {uid}" in diff.out and "deleted in Grafana meanwhile" in diff.out

    standin.add_foreign(ui_saved)  # both again, to be lost again while sync reads them
    standin.add_foreign(marked(listed, "abc", standin.site_id))
    delete_both_meanwhile()
    pruned = standin.gpudash("sync", "--prune")
    assert pruned.code == 0, pruned.text
    for uid in (ui_saved["uid"], listed["uid"]):
        assert f"gone       {uid}" in pruned.out
    assert "2 deleted meanwhile" in pruned.out
    assert standin.get(keep["uid"]) is not None


def test_versions_404_for_a_local_dashboard_plans_it_as_new(standin: GrafanaUnderTest) -> None:
    if standin.on_apis:
        pytest.skip("on /apis the marker annotations survive a UI save, so the version history is never read")
    local = standin.dashboards(1)
    assert standin.push(local).code == 0
    uid = local[0]["uid"]
    standin.ui_edit(uid, rename_panel("edited"))
    server(standin).fault("GET", f"/api/dashboards/uid/{uid}/versions", before=lambda s: s.remove_dashboard(uid))
    result = standin.gpudash("sync")
    assert result.code == 0, result.text
    assert "1 created" in result.out
    saved = standin.get(uid)
    assert saved is not None and saved["dashboard"]["panels"][1]["title"] == "Panel 2"


def test_legacy_markers_are_restamped_and_moved_but_never_pruned(standin: GrafanaUnderTest) -> None:
    local = standin.dashboards(2)
    old_folder = f"{standin.prefix}-old"
    server(standin).add_folder(old_folder, f"GPU old {standin.prefix}")
    for item in local:
        body = marked(item, "abc", standin.site_id)
        body[MARKER_KEY] = {"contentHash": body[MARKER_KEY]["contentHash"], "commit": "abc"}  # before sites
        server(standin).add_dashboard(body, old_folder)
    write_set(standin.local_dir, local[:1])
    standin.site.write_text(standin.site.read_text().replace(f"folder_uid: {standin.folder_uid}",
                                                             f"folder_uid: {old_folder}"))
    kept = standin.gpudash("sync", "--prune", "--force")
    assert kept.code == 0, kept.text
    assert f"kept       {local[1]['uid']}" in kept.out
    assert "marked by an older gpudash without a site identity: cannot tell which site pushed it" in kept.out
    assert f"re-stamped for site {standin.site_id!r}" in kept.out
    assert standin.get(local[1]["uid"]) is not None
    standin.site.write_text(standin.site.read_text().replace(f"folder_uid: {old_folder}",
                                                             f"folder_uid: {standin.folder_uid}"))
    moved = standin.gpudash("sync")
    assert moved.code == 0 and moved.writes == 2, moved.text  # the folder, then the move
    assert f"folder {old_folder} -> {standin.folder_uid}" in moved.out
    saved = standin.get(local[0]["uid"])
    assert saved is not None and saved["meta"]["folderUid"] == standin.folder_uid
    assert (standin.marker(local[0]["uid"]) or {})["site"] == standin.site_id
    assert standin.gpudash("sync").writes == 0
