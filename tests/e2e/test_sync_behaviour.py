"""push / sync / diff behaviour on every Grafana version (the stand-in), or on a real one (--real-grafana).

Write counts come from two places that must agree: the run's own summary line, and (on the stand-in) the
server's request log.
"""

from __future__ import annotations

import subprocess
from typing import Any

from grafana_standin.testkit import GrafanaUnderTest, make_dashboard, write_set

from gpudash.compare.content import content_hash

pytest_plugins = ["grafana_standin.fixtures"]


def server_writes(grafana: GrafanaUnderTest) -> int | None:
    return grafana.standin.writes if grafana.standin is not None else None


def set_threshold(dashboard: dict[str, Any], value: float) -> None:
    for panel in dashboard["panels"][1:]:
        panel["fieldConfig"]["defaults"]["thresholds"]["steps"][1]["value"] = value


def test_first_push_creates_folder_and_every_dashboard(grafana: GrafanaUnderTest) -> None:
    local = grafana.dashboards(5)
    result = grafana.push(local)
    assert result.code == 0, result.text
    assert result.writes == 6  # the folder, then five dashboards
    assert server_writes(grafana) in (None, 6)
    assert "5 created" in result.out
    for item in local:
        remote = grafana.get(item["uid"])
        assert remote is not None
        assert remote["meta"]["folderUid"] == grafana.folder_uid
        assert (grafana.marker(item["uid"]) or {})["contentHash"] == content_hash(item)
        assert remote["dashboard"]["panels"] == item["panels"]


def test_second_sync_writes_nothing(grafana: GrafanaUnderTest) -> None:
    local = grafana.dashboards(5)
    assert grafana.push(local).code == 0
    before = server_writes(grafana)
    again = grafana.gpudash("sync")
    assert again.code == 0, again.text
    assert again.writes == 0
    assert "5 unchanged" in again.out
    assert server_writes(grafana) == before
    assert grafana.gpudash("push").writes == 0  # push compares first too


def test_changed_thresholds_write_exactly_the_changed_dashboards(grafana: GrafanaUnderTest) -> None:
    local = grafana.dashboards(5)
    assert grafana.push(local).code == 0
    for item in local[1:3]:
        set_threshold(item, 85.0)
    write_set(grafana.local_dir, local)
    result = grafana.gpudash("sync")
    assert result.code == 0, result.text
    assert result.writes == 2
    assert "2 updated, 3 unchanged" in result.out
    for item in local:
        remote = grafana.get(item["uid"])
        assert remote is not None
        step = remote["dashboard"]["panels"][1]["fieldConfig"]["defaults"]["thresholds"]["steps"][1]
        assert step["value"] == item["panels"][1]["fieldConfig"]["defaults"]["thresholds"]["steps"][1]["value"]
    assert grafana.gpudash("sync").writes == 0


def test_ui_edit_is_detected_shown_and_kept_until_forced(grafana: GrafanaUnderTest) -> None:
    local = grafana.dashboards(3)
    assert grafana.push(local).code == 0
    edited = local[0]["uid"]
    grafana.ui_edit(edited, lambda d: d["panels"][1].update(title="Renamed in the UI"))
    set_threshold(local[2], 90.0)  # an ordinary local change in the same run still goes through
    write_set(grafana.local_dir, local)

    refused = grafana.gpudash("sync")
    assert refused.code == 3, refused.text
    assert refused.writes == 1
    assert f"drifted    {edited}" in refused.out
    assert "~ panel 2 'Panel 2': title 'Renamed in the UI' -> 'Panel 2'" in refused.out
    assert f"--- grafana/{edited}" in refused.out
    assert refused.err.count("\n") == 1 and edited in refused.err and "--force" in refused.err
    remote = grafana.get(edited)
    assert remote is not None and remote["dashboard"]["panels"][1]["title"] == "Renamed in the UI"

    assert grafana.gpudash("push").code == 3  # push refuses too

    forced = grafana.gpudash("sync", "--force")
    assert forced.code == 0, forced.text
    assert forced.writes == 1
    remote = grafana.get(edited)
    assert remote is not None and remote["dashboard"]["panels"][1]["title"] == "Panel 2"
    assert grafana.gpudash("sync").writes == 0


def test_json_model_edit_that_keeps_the_marker_is_drift_too(grafana: GrafanaUnderTest) -> None:
    local = grafana.dashboards(2)
    assert grafana.push(local).code == 0
    grafana.json_model_edit(local[1]["uid"], lambda d: d.update(refresh="1m"))
    set_threshold(local[1], 70.0)
    write_set(grafana.local_dir, local)
    result = grafana.gpudash("sync")
    assert result.code == 3, result.text
    assert result.writes == 0
    assert "changed in Grafana" in result.out and "since gpudash pushed it" in result.out
    assert "~ refresh: 1m -> 30s" in result.out


def test_a_ui_save_without_changes_is_not_drift(grafana: GrafanaUnderTest) -> None:
    local = grafana.dashboards(1)
    assert grafana.push(local).code == 0
    grafana.ui_edit(local[0]["uid"], lambda d: None)
    result = grafana.gpudash("sync")
    assert result.code == 0 and result.writes == 0, result.text


def test_dry_run_writes_nothing(grafana: GrafanaUnderTest) -> None:
    local = grafana.dashboards(3)
    result = grafana.push(local, "--dry-run")
    assert result.code == 0, result.text
    assert result.writes == 0
    assert server_writes(grafana) in (None, 0)
    assert f"would create folder {grafana.folder_title!r} ({grafana.folder_uid})" in result.out
    assert sum(line.startswith("would create ") for line in result.out.splitlines()) == 4
    assert grafana.get(local[0]["uid"]) is None


def test_prune_deletes_only_what_gpudash_pushed(grafana: GrafanaUnderTest) -> None:
    keep, gone, edited = grafana.dashboards(3)
    assert grafana.push([keep, gone, edited]).code == 0
    foreign = make_dashboard(grafana.uid("by-hand"), f"{grafana.prefix} made by hand")  # tagged gpudash, no marker
    grafana.add_foreign(foreign)
    grafana.ui_edit(edited["uid"], lambda d: d.update(description="edited"))
    write_set(grafana.local_dir, [keep])

    without = grafana.gpudash("sync")
    assert without.code == 0 and without.writes == 0, without.text
    assert all(grafana.get(d["uid"]) is not None for d in (gone, edited, foreign))

    dry = grafana.gpudash("sync", "--prune", "--dry-run")
    assert dry.code == 0 and dry.writes == 0, dry.text
    assert f"would delete {gone['uid']}" in dry.out

    pruned = grafana.gpudash("sync", "--prune")
    assert pruned.code == 0, pruned.text
    assert pruned.writes == 1
    assert grafana.get(gone["uid"]) is None
    assert grafana.get(edited["uid"]) is not None and grafana.get(foreign["uid"]) is not None
    assert f"kept       {edited['uid']}" in pruned.out and "use --force to delete" in pruned.out
    assert f"kept       {foreign['uid']}" in pruned.out and "never deleted" in pruned.out

    forced = grafana.gpudash("sync", "--prune", "--force")
    assert forced.code == 0 and forced.writes == 1, forced.text
    assert grafana.get(edited["uid"]) is None
    assert grafana.get(foreign["uid"]) is not None
    assert grafana.get(keep["uid"]) is not None


def test_prune_leaves_other_folders_alone(grafana: GrafanaUnderTest, tmp_path: Any) -> None:
    mine, theirs = grafana.dashboards(2)
    assert grafana.push([mine]).code == 0
    other_site = tmp_path / "other.yaml"
    other_site.write_text(f"grafana:\n  folder: Other {grafana.prefix}\n  folder_uid: {grafana.prefix}-other\n")
    write_set(grafana.local_dir, [theirs])
    grafana.created.append(theirs["uid"])
    other = grafana.gpudash("push", "--site", str(other_site))
    assert other.code == 0, other.text
    write_set(grafana.local_dir, [])
    (grafana.local_dir / f"{mine['uid']}.json").write_text(__import__("json").dumps(mine))
    result = grafana.gpudash("sync", "--prune")
    assert result.code == 0 and result.writes == 0, result.text
    assert grafana.get(theirs["uid"]) is not None
    if grafana.real:
        grafana.api().folder.delete_folder(f"{grafana.prefix}-other")


def test_diff_shows_a_summary_then_a_unified_diff(grafana: GrafanaUnderTest) -> None:
    local = grafana.dashboards(2)
    assert grafana.push(local).code == 0
    same = grafana.gpudash("diff")
    assert same.code == 0, same.text
    assert "0 of 2 dashboards differ" in same.out

    set_threshold(local[0], 85.0)
    local[0]["panels"][2]["targets"][0]["expr"] = "max(gpu_util)"
    local[0]["panels"].append({"id": 9, "type": "stat", "title": "New panel", "targets": []})
    del local[0]["panels"][1]
    local.append(make_dashboard(grafana.uid("new"), f"{grafana.prefix} new"))
    write_set(grafana.local_dir, local)
    changed = grafana.gpudash("diff")
    assert changed.code == 1, changed.text
    out = changed.out
    uid = local[0]["uid"]
    assert f"differs     {uid}" in out and "local changes not pushed yet" in out
    assert f"{uid}: 1 panels added, 1 removed, 2 changed" in out
    assert "  - panel 2 'Panel 2'" in out
    assert "  + panel 9 'New panel'" in out
    assert ("~ panel 3 'Panel 3': thresholds green, 80 red -> green, 85 red; "
            "query A: avg(gpu_util) * 3 -> max(gpu_util)") in out
    assert f"--- grafana/{uid}\n+++ local/{uid}.json\n" in out
    assert '-                "value": 80\n' in out and '+                "value": 85\n' in out
    assert f"only local  {grafana.uid('new')}" in out
    assert "2 of 3 dashboards differ" in out
    assert changed.writes == 0


def test_version_message_names_the_source_commit(grafana: GrafanaUnderTest) -> None:
    local = grafana.dashboards(1)
    write_set(grafana.local_dir, local)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q", str(grafana.workdir)], check=True)
    subprocess.run([*git, "-C", str(grafana.workdir), "add", "json"], check=True)
    subprocess.run([*git, "-C", str(grafana.workdir), "commit", "-qm", "dashboards"], check=True)
    head = subprocess.run(["git", "-C", str(grafana.workdir), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    assert grafana.push(local).code == 0
    set_threshold(local[0], 60.0)
    write_set(grafana.local_dir, local)
    assert grafana.gpudash("sync").writes == 1
    versions = grafana.api().dashboard_versions.get_dashboard_versions_by_uid(local[0]["uid"])
    items = versions["versions"] if isinstance(versions, dict) else versions
    assert items[0]["message"] == (f"gpudash 0.1.0 for site {grafana.site_id} from commit {head} "
                                 "with uncommitted changes")


def test_a_dashboard_moved_to_another_folder_is_moved_back(grafana: GrafanaUnderTest) -> None:
    local = grafana.dashboards(1)
    assert grafana.push(local).code == 0
    current = grafana.get(local[0]["uid"])
    assert current is not None
    body = dict(current["dashboard"])
    grafana.api().dashboard.update_dashboard({"dashboard": body, "folderUid": "", "overwrite": False})
    moved = grafana.get(local[0]["uid"])
    assert moved is not None and moved["meta"]["folderUid"] == ""
    result = grafana.gpudash("sync")
    assert result.code == 0 and result.writes == 1, result.text
    assert f"folder General -> {grafana.folder_uid}" in result.out
    back = grafana.get(local[0]["uid"])
    assert back is not None and back["meta"]["folderUid"] == grafana.folder_uid
