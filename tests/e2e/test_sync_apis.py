"""Sync on Grafana 13's /apis (the stand-in's 13.x flavour, or a real Grafana with --real-grafana): push, a
no-op sync that reads list pages only, a UI save that is not drift, a UI edit that is, prune, provision,
and the resourceVersion conflict; and the fall back to /api where /apis is not served.

gpudash writes v1 here (grafana.schema: v1; `auto` writes v2 on 13: tests/e2e/test_sync_v2_conversion.py), and
the stand-in runs with dynamic dashboards turned off, so its editor saves v1 as 12.2+ does; with them on (13's
default) a save stores v2: tests/e2e/test_sync_v2_storage.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from grafana_standin import TESTED_VERSIONS, Flavor, StandIn
from grafana_standin.testkit import GrafanaUnderTest, write_set

from gpudash.sync import remote_apis

pytest_plugins = ["grafana_standin.fixtures"]
APIS_VERSIONS = [v for v in TESTED_VERSIONS if Flavor(v).apis_versions]
DASHBOARDS = "/apis/dashboard.grafana.app/v1/namespaces/default/dashboards"


def on_v1(grafana: GrafanaUnderTest) -> GrafanaUnderTest:
    """gpudash writing the classic schema to this Grafana (gpudash.yaml grafana.schema: v1)."""
    grafana.site.write_text(grafana.site.read_text() + "  schema: v1\n")
    return grafana


@pytest.fixture(params=APIS_VERSIONS, ids=lambda v: f"grafana{v}")
def grafana13(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[GrafanaUnderTest]:
    if request.config.getoption("--real-grafana", default=False):
        target = on_v1(GrafanaUnderTest(os.environ.get("GRAFANA_URL", ""), os.environ.get("GRAFANA_TOKEN", ""),
                                        "real", tmp_path))
        if target.apis_path() is None:
            pytest.skip("this Grafana does not serve dashboard.grafana.app/v1")
        yield target
        target.cleanup()
        return
    with StandIn(request.param, dynamic_dashboards=False) as standin:
        yield on_v1(GrafanaUnderTest(standin.url, standin.token, request.param, tmp_path, standin))


def dashboard_gets(grafana: GrafanaUnderTest) -> int | None:
    """GETs of single dashboards on /apis (the list is not one)."""
    if grafana.standin is None:
        return None
    return sum(1 for method, path in grafana.standin.received if method == "GET" and path.startswith(DASHBOARDS + "/"))


def steps(resource: dict[str, object]) -> list[dict[str, object]]:
    spec = resource["spec"]
    assert isinstance(spec, dict)
    return list(spec["panels"][1]["fieldConfig"]["defaults"]["thresholds"]["steps"])


def test_push_writes_resources_with_the_folder_message_and_marker_as_annotations(grafana13: GrafanaUnderTest) -> None:
    local = grafana13.dashboards(3)
    result = grafana13.push(local)
    assert result.code == 0, result.text
    assert "(/apis v1)" in result.out.splitlines()[0] and "3 created" in result.out
    for item in local:
        resource = grafana13.resource(item["uid"])
        assert resource is not None
        annotations = resource["metadata"]["annotations"]
        assert annotations["grafana.app/folder"] == grafana13.folder_uid
        assert annotations["grafana.app/message"].startswith("gpudash ") and grafana13.site_id in \
            annotations["grafana.app/message"]
        assert (annotations["grafana.app/managedBy"], annotations["grafana.app/managerId"]) == ("kubectl", "gpudash")
        assert annotations["gpudash/uid"] == item["uid"] and annotations["gpudash/site"] == grafana13.site_id
        assert not {"id", "uid", "version", "gpudashSync"} & set(resource["spec"])
        assert resource["spec"]["schemaVersion"] == 42  # the v1 write migrated what gpudash sent (39)
    if grafana13.standin is not None:
        assert grafana13.standin.count("POST", "/apis/dashboard.grafana.app/v1/") == 3
        assert grafana13.standin.count("POST", "/apis/folder.grafana.app/v1/") == 1


def test_no_op_sync_reads_list_pages_and_writes_nothing(grafana13: GrafanaUnderTest,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    local = grafana13.dashboards(5)
    assert grafana13.push(local).code == 0
    monkeypatch.setattr(remote_apis, "LIST_PAGE", 2)  # five dashboards: three pages
    if grafana13.standin is not None:
        for n in (1, 2):  # listed after gpudash's (names sort): a fourth page, which is never read
            grafana13.standin.add_dashboard({"uid": f"zz-other-{n}", "title": f"Someone else's {n}"})
        grafana13.standin.reset_log()
    again = grafana13.gpudash("sync")
    assert again.code == 0, again.text
    assert again.writes == 0 and "5 unchanged" in again.out
    if grafana13.standin is not None:
        assert grafana13.standin.writes == 0
        assert dashboard_gets(grafana13) == 0
        lists = [entry for entry in grafana13.standin.log if entry.path == DASHBOARDS]
        assert len(lists) == 3 and "continue=" in lists[1].query and "continue=" in lists[2].query
        assert len(grafana13.standin.store.dashboards) == 7  # four pages of two
        assert "5 requests" in again.out  # frontend settings, discovery, three pages, and nothing else
    assert grafana13.gpudash("push").writes == 0


def test_an_unchanged_ui_save_is_not_drift(grafana13: GrafanaUnderTest) -> None:
    if grafana13.editor_saves_v2():  # a real 13 with dynamic dashboards on
        pytest.skip("this Grafana's editor saves v2: tests/e2e/test_sync_v2_storage.py")
    local = grafana13.dashboards(2)
    assert grafana13.push(local).code == 0
    uid = local[0]["uid"]
    before = grafana13.resource(uid)
    grafana13.ui_save(uid)
    after = grafana13.resource(uid)
    assert before is not None and after is not None
    assert after["spec"] != before["spec"]  # Grafana did rewrite it: plugin versions, defaults, no nulls
    assert all(panel.get("pluginVersion") for panel in after["spec"]["panels"] if panel["type"] != "row")
    assert after["metadata"]["generation"] == before["metadata"]["generation"] + 1
    assert "conversion" not in after["status"]  # dynamic dashboards off: the editor stored v1
    assert after["metadata"]["annotations"]["grafana.app/updatedBy"] != before["metadata"]["annotations"].get(
        "grafana.app/updatedBy")
    synced = grafana13.gpudash("sync")
    assert synced.code == 0, synced.text
    assert synced.writes == 0 and "2 unchanged" in synced.out
    diff = grafana13.gpudash("diff")
    assert diff.code == 0, diff.text


def test_a_changed_threshold_in_the_ui_is_refused_until_forced(grafana13: GrafanaUnderTest) -> None:
    if grafana13.editor_saves_v2():  # a real 13 with dynamic dashboards on
        pytest.skip("this Grafana's editor saves v2: tests/e2e/test_sync_v2_storage.py")
    local = grafana13.dashboards(2)
    assert grafana13.push(local).code == 0
    uid = local[0]["uid"]
    grafana13.ui_change_threshold(uid, 97.0)
    refused = grafana13.gpudash("sync")
    assert refused.code == 3, refused.text
    assert refused.writes == 0
    assert f"drifted    {uid}" in refused.out and "1 unchanged" in refused.out
    assert "thresholds green, 97 red -> green, 80 red" in refused.out
    resource = grafana13.resource(uid)
    assert resource is not None and steps(resource)[1]["value"] == 97
    forced = grafana13.gpudash("sync", "--force")
    assert forced.code == 0, forced.text
    assert forced.writes == 1
    resource = grafana13.resource(uid)
    assert resource is not None and steps(resource)[1]["value"] == 80
    assert grafana13.gpudash("sync").writes == 0


def test_prune_deletes_only_this_sites_dashboards(grafana13: GrafanaUnderTest) -> None:
    local = grafana13.dashboards(3)
    assert grafana13.push(local).code == 0
    foreign = dict(local[0], uid=grafana13.uid("by-hand"), title=f"{grafana13.prefix} by hand")
    grafana13.add_foreign(foreign)
    write_set(grafana13.local_dir, local[:1])
    pruned = grafana13.gpudash("sync", "--prune")
    assert pruned.code == 0, pruned.text
    assert "2 deleted" in pruned.out
    assert grafana13.resource(local[1]["uid"]) is None and grafana13.resource(local[2]["uid"]) is None
    assert grafana13.resource(foreign["uid"]) is not None
    if grafana13.standin is not None:
        assert grafana13.standin.count("DELETE", "/apis/dashboard.grafana.app/v1/") == 2


def test_a_resource_version_conflict_is_refused_like_a_version_conflict(grafana13: GrafanaUnderTest) -> None:
    if grafana13.standin is None:
        pytest.skip("needs a save to land between gpudash's read and its write")
    local = grafana13.dashboards(1)
    assert grafana13.push(local).code == 0
    uid = local[0]["uid"]
    local[0]["description"] = "changed locally"
    write_set(grafana13.local_dir, local)
    grafana13.standin.fault("PUT", f"{DASHBOARDS}/{uid}", before=lambda s: s.ui_save(
        uid, lambda d: d.update(description="saved in the UI meanwhile"), login="bob"))
    refused = grafana13.gpudash("sync")
    assert refused.code == 3, refused.text
    assert "(409 Conflict: Operation cannot be fulfilled on dashboards.dashboard.grafana.app" in refused.out
    assert f"drifted    {uid}" in refused.out and uid in refused.err
    resource = grafana13.resource(uid)
    assert resource is not None and resource["spec"]["description"] == "saved in the UI meanwhile"
    grafana13.standin.fault("PUT", f"{DASHBOARDS}/{uid}", before=lambda s: s.ui_save(
        uid, lambda d: d.update(description="saved again while gpudash was overwriting"), login="bob"))
    grafana13.standin.reset_log()
    forced = grafana13.gpudash("sync", "--force")
    assert forced.code == 3, forced.text
    assert "changed again in Grafana by user:bob" in forced.err and "not overwritten" in forced.err
    assert grafana13.standin.count("PUT", DASHBOARDS) == 1  # refused once, never written blindly
    resource = grafana13.resource(uid)
    assert resource is not None and resource["spec"]["description"] == "saved again while gpudash was overwriting"


def test_provision_creates_the_folder_and_dashboards_over_apis(grafana13: GrafanaUnderTest) -> None:
    local = grafana13.dashboards(2)
    write_set(grafana13.local_dir, local)
    grafana13.created += [item["uid"] for item in local]
    result = grafana13.gpudash("provision", "--prometheus-url", "http://prometheus:9090", "--no-files")
    assert result.code == 0, result.text
    assert f"created    folder '{grafana13.folder_title}' ({grafana13.folder_uid})" in result.out
    for item in local:
        resource = grafana13.resource(item["uid"])
        assert resource is not None
        assert resource["metadata"]["annotations"]["grafana.app/folder"] == grafana13.folder_uid
    if grafana13.standin is not None:
        assert grafana13.standin.count("POST", "/apis/folder.grafana.app/v1/") == 1


def test_a_dashboard_pushed_over_api_before_the_upgrade_is_not_drift(tmp_path: Path) -> None:
    with StandIn(APIS_VERSIONS[-1]) as standin:
        grafana = on_v1(GrafanaUnderTest(standin.url, standin.token, standin.version, tmp_path, standin))
        local = grafana.dashboards(2)
        standin.version = "12.1.0"  # what the first push saw: no /apis
        standin.flavor = standin.store.flavor = Flavor("12.1.0")
        first = grafana.push(local)
        assert first.code == 0 and "(/api)" in first.out, first.text
        standin.version = APIS_VERSIONS[-1]
        standin.flavor = standin.store.flavor = Flavor(APIS_VERSIONS[-1])
        upgraded = grafana.gpudash("sync")
        assert upgraded.code == 0, upgraded.text
        assert "(/apis v1)" in upgraded.out and upgraded.writes == 0 and "2 unchanged" in upgraded.out


def test_older_grafana_falls_back_to_api(tmp_path: Path) -> None:
    with StandIn("12.1.0") as standin:  # grafana.schema: auto, the default
        grafana = GrafanaUnderTest(standin.url, standin.token, standin.version, tmp_path, standin)
        result = grafana.push(grafana.dashboards(1))
        assert result.code == 0, result.text
        assert "(/api)" in result.out.splitlines()[0]
        assert standin.count("POST", "/api/dashboards/db") == 1
        assert not [path for _, path in standin.received if path.startswith("/apis/dashboard.grafana.app/v")]


def test_the_namespace_of_a_grafana_cloud_stack(tmp_path: Path) -> None:
    with StandIn(APIS_VERSIONS[-1], namespace="stacks-12") as standin:
        grafana = on_v1(GrafanaUnderTest(standin.url, standin.token, standin.version, tmp_path, standin))
        write_set(grafana.local_dir, grafana.dashboards(1))
        wrong = grafana.gpudash("push")
        assert wrong.code == 4, wrong.text
        assert 'dashboard list: Grafana answered 404 NotFound: namespaces "default" not found' in wrong.err
        pushed = grafana.gpudash("push", env=grafana.env(GRAFANA_NAMESPACE="stacks-12"))
        assert pushed.code == 0, pushed.text
        assert standin.count("POST", "/apis/dashboard.grafana.app/v1/namespaces/stacks-12/dashboards") == 1
