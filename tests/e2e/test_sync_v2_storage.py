"""Sync against Grafana 13 with dynamic dashboards on (the stand-in's 13.x default): a save from the editor
stores the dashboard as v2, through an update without resourceVersion. gpudash reads the stored version from
`status.conversion`, compares in it, and never writes v1 over a v2-stored dashboard without --force.

gpudash compares a v2-stored dashboard with its own v1 -> v2 conversion; these tests install the stand-in's
conversion (what 13's editor does to a v1 dashboard) in its place.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from grafana_standin import StandIn
from grafana_standin.testkit import GrafanaUnderTest, write_set
from grafana_standin.v2_schema import v1_to_v2

from gpudash.compare.content_v2 import canonical_v2
from gpudash.sync import schema

VERSION = "13.2.0"
V1 = "/apis/dashboard.grafana.app/v1/namespaces/default/dashboards"
V2 = "/apis/dashboard.grafana.app/v2/namespaces/default/dashboards"


@pytest.fixture
def conversion() -> Iterator[None]:
    schema.use_v2_converter(v1_to_v2)
    yield
    schema.use_v2_converter(None)


def _grafana(tmp_path: Path, site_schema: str) -> Iterator[GrafanaUnderTest]:
    with StandIn(VERSION) as standin:
        grafana = GrafanaUnderTest(standin.url, standin.token, VERSION, tmp_path, standin)
        grafana.site.write_text(grafana.site.read_text() + f"  schema: {site_schema}\n")
        yield grafana


@pytest.fixture
def grafana(tmp_path: Path, conversion: None) -> Iterator[GrafanaUnderTest]:
    """gpudash pushing v1 (grafana.schema: v1) to a 13.2 whose editor saves v2."""
    yield from _grafana(tmp_path, "v1")


def stored_as(grafana: GrafanaUnderTest, uid: str) -> str:
    assert grafana.standin is not None
    return grafana.standin.store.dashboards[uid].stored_version


def v2_resource(grafana: GrafanaUnderTest, uid: str) -> dict[str, Any]:
    resource = grafana._person().get(grafana.url + f"{V2}/{uid}", timeout=10).json()
    assert "conversion" not in resource["status"], resource["status"]  # stored as v2: not converted
    return dict(resource)


def thresholds_v2(resource: dict[str, Any]) -> list[Any]:
    elements = resource["spec"]["elements"]
    return [e["spec"]["vizConfig"]["spec"]["fieldConfig"]["defaults"]["thresholds"]["steps"][1]["value"]
            for e in elements.values()]


def puts(grafana: GrafanaUnderTest, prefix: str) -> list[str]:
    assert grafana.standin is not None
    return [path for method, path in grafana.standin.received if method == "PUT" and path.startswith(prefix)]


def in_tabs(spec: dict[str, Any]) -> None:
    """A person moving the rows into two tabs in 13's editor."""
    rows = spec["layout"]["spec"]["rows"]
    spec["layout"] = {"kind": "TabsLayout", "spec": {"tabs": [
        {"kind": "TabsLayoutTab", "spec": {"title": "GPUs", "layout": {"kind": "RowsLayout", "spec": {"rows": rows}}}},
        {"kind": "TabsLayoutTab", "spec": {"title": "Jobs", "layout": {"kind": "GridLayout",
                                                                       "spec": {"items": []}}}}]}}


def test_a_ui_save_stores_v2_without_resource_version_and_an_unchanged_one_is_not_drift(
        grafana: GrafanaUnderTest) -> None:
    local = grafana.dashboards(2)
    assert grafana.push(local).code == 0
    uid = local[0]["uid"]
    assert stored_as(grafana, uid) == "v1"
    grafana.ui_save(uid)
    assert stored_as(grafana, uid) == "v2"
    read = grafana.resource(uid)  # at v1: converted, and it says so
    assert read is not None and read["status"]["conversion"]["storedVersion"] == "v2"
    assert read["metadata"]["annotations"]["gpudash/schema"] == "v1"  # the person's save kept gpudash's record
    assert grafana.standin is not None
    grafana.standin.add_dashboard({"uid": "aa-someone", "title": "Someone's", "panels": []})
    grafana.standin.ui_save("aa-someone", lambda model: None)  # stored as v2 too, and not gpudash's
    grafana.standin.reset_log()
    synced = grafana.gpudash("sync")
    assert synced.code == 0, synced.text
    assert synced.writes == 0 and "2 unchanged" in synced.out and grafana.standin.writes == 0
    assert [p for m, p in grafana.standin.received if m == "GET" and p.startswith(V2)] == [f"{V2}/{uid}"]
    assert "4 requests" in synced.out  # settings, discovery, one list page, the stored v2 of the saved one
    diff = grafana.gpudash("diff")
    assert diff.code == 0, diff.text
    assert stored_as(grafana, uid) == "v2"


def test_a_changed_threshold_saved_as_v2_is_refused_kept_and_shown_in_v2(grafana: GrafanaUnderTest) -> None:
    local = grafana.dashboards(2)
    assert grafana.push(local).code == 0
    uid = local[0]["uid"]
    grafana.ui_change_threshold(uid, 97.0)
    assert grafana.standin is not None
    grafana.standin.reset_log()
    refused = grafana.gpudash("sync")
    assert refused.code == 3, refused.text
    assert refused.writes == 0 and grafana.standin.writes == 0
    assert f"drifted    {uid}" in refused.out and "saved as v2 in Grafana's editor" in refused.out
    assert "a v1 write would replace its v2 storage" in refused.out
    assert stored_as(grafana, uid) == "v2" and set(thresholds_v2(v2_resource(grafana, uid))) == {97}
    diff = grafana.gpudash("diff")
    assert diff.code == 1, diff.text
    assert f"{uid}: compared as Grafana stores it (v2)" in diff.out
    assert re.search(r'^-\s+"value": 97$', diff.out, re.M) and re.search(r'^\+\s+"value": 80$', diff.out, re.M)
    assert '"panels"' not in diff.out  # the v2 spec, not a v1 conversion of it


def test_force_replaces_the_v2_dashboard_and_names_what_it_replaced(grafana: GrafanaUnderTest) -> None:
    local = grafana.dashboards(1)
    assert grafana.push(local).code == 0
    uid = local[0]["uid"]
    grafana.ui_save(uid, lambda model: None, in_tabs)
    assert grafana.standin is not None
    assert grafana.standin.store.dashboards[uid].data["layout"]["kind"] == "TabsLayout"
    refused = grafana.gpudash("sync")
    assert refused.code == 3 and "2 tabs ('GPUs', 'Jobs')" in refused.out, refused.text
    grafana.standin.reset_log()
    forced = grafana.gpudash("sync", "--force")
    assert forced.code == 0, forced.text
    assert forced.writes == 1
    assert "replaces its v2 storage (2 tabs ('GPUs', 'Jobs')) with v1" in forced.out
    assert "about to overwrite" in forced.out and "compared as Grafana stores it (v2)" in forced.out
    assert puts(grafana, V1) == [f"{V1}/{uid}"] and puts(grafana, V2) == []
    assert stored_as(grafana, uid) == "v1"
    again = grafana.gpudash("sync")
    assert again.code == 0 and again.writes == 0, again.text


def test_nothing_writes_v1_over_v2_without_force(grafana: GrafanaUnderTest) -> None:
    local = grafana.dashboards(2)
    assert grafana.push(local).code == 0
    uid = local[0]["uid"]
    grafana.ui_save(uid)  # unchanged, but stored as v2 now
    for item in local:
        item["description"] = "changed locally"
    write_set(grafana.local_dir, local)
    assert grafana.standin is not None
    grafana.standin.reset_log()
    for command, other in (("sync", "1 updated"), ("push", "1 unchanged")):
        refused = grafana.gpudash(command)
        assert refused.code == 3, refused.text
        assert other in refused.out and f"drifted    {uid}" in refused.out
        assert "no tabs, auto grids or conditional rendering" in refused.out
    assert f"{V1}/{uid}" not in puts(grafana, V1) and puts(grafana, V2) == []
    assert stored_as(grafana, uid) == "v2"


def test_a_save_of_a_dashboard_someone_else_holds_is_still_a_conflict(grafana: GrafanaUnderTest) -> None:
    local = grafana.dashboards(1)
    assert grafana.push(local).code == 0
    uid = local[0]["uid"]
    assert grafana.standin is not None
    grafana.standin.store.dashboards[uid].annotations["gpudash/site"] = "another-site"
    grafana.ui_save(uid)
    refused = grafana.gpudash("sync", "--force")
    assert refused.code == 3 and f"conflict   {uid}" in refused.out, refused.text
    assert stored_as(grafana, uid) == "v2"


@pytest.fixture
def grafana_v2(tmp_path: Path, conversion: None) -> Iterator[GrafanaUnderTest]:
    """gpudash with grafana.schema: auto against 13.2: it pushes v2."""
    yield from _grafana(tmp_path, "auto")


def test_pushed_as_v2_read_back_as_v2_equal_and_a_no_op_sync_writes_nothing(grafana_v2: GrafanaUnderTest) -> None:
    local = grafana_v2.dashboards(3)
    pushed = grafana_v2.push(local)
    assert pushed.code == 0, pushed.text
    assert "schema v2" in pushed.out.splitlines()[0] and "3 created" in pushed.out and ", as v2" in pushed.out
    for item in local:
        assert stored_as(grafana_v2, item["uid"]) == "v2"
        resource = v2_resource(grafana_v2, item["uid"])
        assert canonical_v2(resource["spec"]) == canonical_v2(v1_to_v2(item))
        assert resource["metadata"]["annotations"]["gpudash/schema"] == "v2"
    assert grafana_v2.standin is not None
    grafana_v2.standin.reset_log()
    again = grafana_v2.gpudash("sync")
    assert again.code == 0 and again.writes == 0 and "3 unchanged" in again.out, again.text
    assert "3 requests" in again.out  # settings, discovery, one list page at v2
    grafana_v2.ui_save(local[0]["uid"])  # an unchanged save from the editor: v2 over v2
    assert grafana_v2.gpudash("sync").writes == 0
    grafana_v2.standin.reset_log()
    local[1]["description"] = "changed locally"
    write_set(grafana_v2.local_dir, local)
    updated = grafana_v2.gpudash("sync")
    assert updated.code == 0 and "1 updated" in updated.out, updated.text
    assert puts(grafana_v2, V2) == [f"{V2}/{local[1]['uid']}"] and puts(grafana_v2, V1) == []


def test_auto_without_an_installed_conversion_pushes_v2_and_v2_where_it_is_not_served_is_refused(
        tmp_path: Path) -> None:
    for grafana in _grafana(tmp_path, "auto"):
        pushed = grafana.push(grafana.dashboards(1))  # gpudash's own conversion
        assert pushed.code == 0 and "schema v2" in pushed.out.splitlines()[0], pushed.text
        assert puts(grafana, V1) == [] and stored_as(grafana, grafana.uid("d000")) == "v2"
    with StandIn("12.1.0") as standin:
        grafana = GrafanaUnderTest(standin.url, standin.token, "12.1.0", tmp_path / "12", standin)
        grafana.workdir.mkdir()
        grafana.site.write_text(grafana.site.read_text() + "  schema: v2\n")
        write_set(grafana.local_dir, grafana.dashboards(1))
        refused = grafana.gpudash("sync")
        assert refused.code == 2, refused.text
        assert "grafana.schema: v2, but Grafana 12.1.0 does not serve dashboard.grafana.app/v2" in refused.err
        assert standin.writes == 0 and standin.store.dashboards == {}


def test_provisioning_files_refuse_v2_and_take_classic_json(tmp_path: Path) -> None:
    with StandIn(VERSION) as standin:
        classic = {"uid": "gpu-node", "title": "GPU node", "panels": []}
        envelope = {"apiVersion": "dashboard.grafana.app/v2", "kind": "Dashboard", "metadata": {"name": "gpu-v2"},
                    "spec": v1_to_v2(classic)}
        (tmp_path / "classic.json").write_text(json.dumps(classic))
        (tmp_path / "v2.json").write_text(json.dumps(envelope))
        assert standin.provision_file(tmp_path / "classic.json").provisioned
        with pytest.raises(ValueError, match=re.escape("dashboard appears to be in v2 format. Please use the "
                                                       "/apis/dashboard.grafana.app/v2 API")):
            standin.provision_file(tmp_path / "v2.json")
        assert "gpu-v2" not in standin.store.dashboards


def test_a_site_moving_to_v2_rewrites_its_own_v1_dashboards_once(grafana: GrafanaUnderTest) -> None:
    local = grafana.dashboards(2)
    assert grafana.push(local).code == 0
    grafana.ui_save(local[1]["uid"], lambda model: model.update(description="a person's"))  # v2, changed
    grafana.site.write_text(grafana.site.read_text().replace("schema: v1", "schema: auto"))
    moved = grafana.gpudash("sync")
    assert moved.code == 3, moved.text  # the person's dashboard is drift, not rewritten
    assert "1 updated" in moved.out and "stored as v1, written as v2 now" in moved.out
    assert stored_as(grafana, local[0]["uid"]) == "v2" and f"drifted    {local[1]['uid']}" in moved.out
    assert grafana.resource(local[0]["uid"])["metadata"]["annotations"]["gpudash/schema"] == "v2"
    again = grafana.gpudash("sync")
    assert again.writes == 0 and "1 unchanged" in again.out, again.text
