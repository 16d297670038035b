"""The stand-in's 13.x /apis answers as shared/reference/grafana-13-apis.md says (section numbers refer to it),
so the /apis sync tests prove something about real Grafana 13."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import niquests
import pytest
from grafana_standin import TESTED_VERSIONS, Flavor, StandIn
from grafana_standin.migrate import ui_save_model
from support.slack import budget

APIS_VERSIONS = [v for v in TESTED_VERSIONS if Flavor(v).apis_versions]
DASHBOARDS = "/apis/dashboard.grafana.app/v1/namespaces/default/dashboards"


class Client:
    def __init__(self, standin: StandIn) -> None:
        self.standin = standin
        self.session = niquests.Session()
        self.session.headers["Authorization"] = f"Bearer {standin.token}"

    def __call__(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        answer = self.session.request(method, self.standin.url + path, json=body, timeout=budget(5))
        return answer.status_code, answer.json() if answer.content else None


@pytest.fixture(params=APIS_VERSIONS, ids=lambda v: f"grafana{v}")
def apis(request: pytest.FixtureRequest) -> Iterator[Client]:
    with StandIn(request.param) as standin:
        yield Client(standin)


def resource(name: str, spec: dict[str, Any], rv: str = "", **annotations: str) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "annotations": annotations}
    if rv:
        metadata["resourceVersion"] = rv
    return {"apiVersion": "dashboard.grafana.app/v1", "kind": "Dashboard", "metadata": metadata, "spec": spec}


def test_discovery_lists_v1_first(apis: Client) -> None:
    status, group = apis("GET", "/apis/dashboard.grafana.app/")
    assert status == 200 and group["kind"] == "APIGroup" and group["name"] == "dashboard.grafana.app"
    assert group["preferredVersion"]["version"] == "v1"
    assert [v["version"] for v in group["versions"]] == ["v1", "v1beta1", "v0alpha1", "v2", "v2beta1"]
    assert apis("GET", "/apis")[1]["kind"] == "APIGroupList"


def test_create_strips_the_legacy_keys_migrates_and_answers_201(apis: Client) -> None:  # §1.4, §1.5
    spec = {"id": 9, "uid": "a", "version": 4, "title": "A", "schemaVersion": 39, "refresh": None,
            "timepicker": {"time_options": ["5m"]}}
    status, made = apis("POST", DASHBOARDS, resource("a", spec, **{"grafana.app/message": "first"}))
    assert status == 201
    metadata = made["metadata"]
    assert (metadata["name"], metadata["namespace"], metadata["generation"]) == ("a", "default", 1)
    assert metadata["uid"] != "a" and metadata["labels"]["grafana.app/deprecatedInternalID"].isdigit()
    assert metadata["annotations"]["grafana.app/createdBy"] == "service-account:sa-1-gpudash"
    assert "grafana.app/updatedBy" not in metadata["annotations"]
    assert made["spec"] == {"title": "A", "schemaVersion": 42, "refresh": "", "timepicker": {}}
    again = apis("POST", DASHBOARDS, resource("a", {"title": "A"}))
    assert again[0] == 409 and again[1]["reason"] == "AlreadyExists" and again[1]["kind"] == "Status"
    assert apis("POST", DASHBOARDS, resource("b", {"title": "B"}, rv="5"))[0] == 400  # §1.4.6
    legacy = apis("GET", "/api/dashboards/uid/a")[1]
    assert legacy["dashboard"]["version"] == 1 and legacy["dashboard"]["schemaVersion"] == 42  # §2: the same store


def test_update_locks_on_resource_version_and_raises_generation_only_on_change(apis: Client) -> None:  # §1.6
    made = apis("POST", DASHBOARDS, resource("a", {"title": "A"}))[1]
    rv = made["metadata"]["resourceVersion"]
    same = apis("PUT", f"{DASHBOARDS}/a", resource("a", {"title": "A"}, rv=rv))[1]
    assert same["metadata"]["generation"] == 1 and same["metadata"]["resourceVersion"] == rv  # nothing written
    noted = apis("PUT", f"{DASHBOARDS}/a", resource("a", {"title": "A"}, rv=rv, **{"team/x": "y"}))[1]
    assert noted["metadata"]["generation"] == 1 and noted["metadata"]["resourceVersion"] != rv  # metadata only
    stale = apis("PUT", f"{DASHBOARDS}/a", resource("a", {"title": "A2"}, rv=rv))
    assert stale[0] == 409 and stale[1]["reason"] == "Conflict" and stale[1]["code"] == 409
    assert "the object has been modified" in stale[1]["message"]
    status, changed = apis("PUT", f"{DASHBOARDS}/a", resource("a", {"title": "A2"},
                                                              rv=noted["metadata"]["resourceVersion"]))
    assert status == 200 and changed["metadata"]["generation"] == 2
    assert changed["metadata"]["annotations"]["grafana.app/updatedBy"] == "service-account:sa-1-gpudash"
    unconditional = apis("PUT", f"{DASHBOARDS}/a", resource("a", {"title": "A3"}))
    assert unconditional[0] == 200 and unconditional[1]["metadata"]["generation"] == 3
    assert apis("PUT", f"{DASHBOARDS}/a", resource("b", {"title": "B"}))[0] == 400  # name mismatch
    assert apis("PUT", f"{DASHBOARDS}/new", resource("new", {"title": "New"}))[0] == 201  # create on update


def test_the_manager_cannot_be_changed_or_removed(apis: Client) -> None:  # §4.2
    manager = {"grafana.app/managedBy": "kubectl", "grafana.app/managerId": "gpudash"}
    apis("POST", DASHBOARDS, resource("a", {"title": "A"}, **manager))
    removed = apis("PUT", f"{DASHBOARDS}/a", resource("a", {"title": "A"}))
    assert removed[0] == 403 and removed[1]["message"] == "Can not remove resource manager from resource"
    other = apis("PUT", f"{DASHBOARDS}/a", resource("a", {"title": "A"}, **{**manager,
                                                                          "grafana.app/managerId": "grafanactl"}))
    assert other[0] == 403


def test_list_pages_with_limit_and_continue_and_delete_answers_a_status(apis: Client) -> None:  # §1.8, §1.9
    for name in ("c", "a", "b"):
        apis("POST", DASHBOARDS, resource(name, {"title": name.upper()}))
    first = apis("GET", f"{DASHBOARDS}?limit=2")[1]
    assert first["kind"] == "DashboardList" and [i["metadata"]["name"] for i in first["items"]] == ["a", "b"]
    token = first["metadata"]["continue"]
    last = apis("GET", f"{DASHBOARDS}?limit=2&continue={token}")[1]
    assert [i["metadata"]["name"] for i in last["items"]] == ["c"] and "continue" not in last["metadata"]
    status, gone = apis("DELETE", f"{DASHBOARDS}/a")
    assert status == 200 and gone["status"] == "Success" and gone["details"]["name"] == "a"
    missing = apis("GET", f"{DASHBOARDS}/a")
    assert missing == (404, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                             "message": 'dashboards.dashboard.grafana.app "a" not found', "reason": "NotFound",
                             "details": {"name": "a", "group": "dashboard.grafana.app", "kind": "dashboards"},
                             "code": 404})
    assert apis("GET", "/apis/dashboard.grafana.app/v1/namespaces/stacks-1/dashboards")[0] == 404


def test_a_legacy_save_is_stored_unmigrated_and_read_migrated_on_v1(apis: Client) -> None:  # §1.11, §2
    apis("POST", "/api/dashboards/db", {"dashboard": {"uid": "a", "title": "A", "schemaVersion": 39}})
    assert apis("GET", "/api/dashboards/uid/a")[1]["dashboard"]["schemaVersion"] == 39
    read = apis("GET", f"{DASHBOARDS}/a")[1]
    assert read["spec"]["schemaVersion"] == 42 and read["status"]["conversion"]["storedVersion"] == "v0alpha1"
    assert apis("GET", "/apis/dashboard.grafana.app/v0alpha1/namespaces/default/dashboards/a")[1]["spec"][
        "schemaVersion"] == 39


def test_a_ui_save_model_is_what_grafana_13_writes() -> None:  # §3.3
    stored = {"title": "A", "schemaVersion": 39, "refresh": "30s", "gpudashSync": {"contentHash": "x"},
              "panels": [{"type": "row", "title": "R", "panels": []},
                         {"type": "gauge", "title": "G", "description": None,
                          "fieldConfig": {"defaults": {"unit": "percent"}, "overrides": []}}]}
    saved = ui_save_model(stored, "13.2.0")
    assert saved["schemaVersion"] == 42 and "gpudashSync" not in saved
    row, gauge = saved["panels"]
    assert "pluginVersion" not in row and gauge["pluginVersion"] == "13.2.0"
    assert "description" not in gauge
    assert gauge["fieldConfig"]["defaults"]["min"] == 0 and gauge["fieldConfig"]["defaults"]["max"] == 100
    assert gauge["options"]["reduceOptions"]["calcs"] == ["lastNotNull"]
    assert ui_save_model(saved, "13.2.0") == saved  # saving again changes nothing


V2_DASHBOARDS = "/apis/dashboard.grafana.app/v2/namespaces/default/dashboards"


def classic(uid: str) -> dict[str, Any]:
    """A v1 dashboard: a row, two panels in it, and one panel without an id (grafana#117084 drops it)."""
    panel = {"type": "stat", "title": "Busy", "gridPos": {"h": 4, "w": 6, "x": 0, "y": 1},
             "targets": [{"refId": "A", "expr": "up", "datasource": {"type": "prometheus", "uid": "prom"}}]}
    return {"uid": uid, "title": "GPU node", "schemaVersion": 42, "panels": [
        {"id": 1, "type": "row", "title": "Overview", "collapsed": False, "gridPos": {"h": 1, "w": 24, "x": 0, "y": 0},
         "panels": []},
        {**panel, "id": 2}, {**panel, "id": 3, "title": "Idle", "gridPos": {"h": 4, "w": 6, "x": 6, "y": 1}},
        {**panel, "title": "No id", "gridPos": {"h": 4, "w": 6, "x": 12, "y": 1}}]}


def test_a_read_at_the_other_schema_converts_lossily_and_says_so(apis: Client) -> None:  # §1.11, §1.12
    assert apis("POST", DASHBOARDS, resource("conv", classic("conv")))[0] == 201
    status, read = apis("GET", f"{V2_DASHBOARDS}/conv")
    assert status == 200 and read["apiVersion"] == "dashboard.grafana.app/v2"
    assert read["status"]["conversion"] == {"failed": False, "storedVersion": "v1", "error": "",
                                            "source": "dashboard.grafana.app/v1"}
    assert sorted(read["spec"]["elements"]) == ["panel-2", "panel-3"]  # the panel without an id is gone
    rows = read["spec"]["layout"]["spec"]["rows"]
    assert [row["spec"]["title"] for row in rows] == ["Overview"]
    assert "conversion" not in apis("GET", f"{DASHBOARDS}/conv")[1]["status"]  # stored as v1: no conversion


def test_v2_is_stored_as_sent_and_a_v1_write_over_it_stores_v1_again(apis: Client) -> None:  # §1.11
    status, created = apis("POST", DASHBOARDS, resource("v2d", classic("v2d")))
    spec = apis("GET", f"{V2_DASHBOARDS}/v2d")[1]["spec"]
    grid = spec["layout"]["spec"]["rows"][0]["spec"]["layout"]
    spec["layout"] = {"kind": "TabsLayout", "spec": {"tabs": [
        {"kind": "TabsLayoutTab", "spec": {"title": "GPUs", "layout": grid}},
        {"kind": "TabsLayoutTab", "spec": {"title": "Jobs", "layout": {
            "kind": "AutoGridLayout", "spec": {"items": [{"kind": "AutoGridLayoutItem", "spec": {
                "element": {"kind": "ElementReference", "name": "panel-3"},
                "repeat": {"mode": "variable", "value": "gpu"}}}]}}}}]}}
    unlocked = {"apiVersion": "dashboard.grafana.app/v2", "kind": "Dashboard",
                "metadata": {"name": "v2d", "annotations": {}}, "spec": spec}  # as the editor's v2 save: no RV
    status, saved = apis("PUT", f"{V2_DASHBOARDS}/v2d", unlocked)
    assert status == 200 and saved["metadata"]["generation"] == created["metadata"]["generation"] + 1
    assert apis.standin.store.dashboards["v2d"].stored_version == "v2"
    status, back = apis("GET", f"{V2_DASHBOARDS}/v2d")
    assert back["spec"] == spec and "conversion" not in back["status"]
    status, as_v1 = apis("GET", f"{DASHBOARDS}/v2d")
    assert as_v1["status"]["conversion"]["storedVersion"] == "v2"
    titles = [p["title"] for p in as_v1["spec"]["panels"]]
    assert titles == ["Busy", "Idle", "Idle"]  # the tabs flattened, the repeat and the auto grid gone
    assert "repeat" not in as_v1["spec"]["panels"][-1]
    status, legacy = apis("GET", "/api/dashboards/uid/v2d")
    assert status == 200 and [p["title"] for p in legacy["dashboard"]["panels"]] == titles
    over = resource("v2d", classic("v2d"), as_v1["metadata"]["resourceVersion"])
    status, rewritten = apis("PUT", f"{DASHBOARDS}/v2d", over)  # accepted: the v2 structure is gone
    assert status == 200 and apis.standin.store.dashboards["v2d"].stored_version == "v1"
    assert "conversion" not in rewritten["status"]


def test_the_editor_stores_v2_only_with_dynamic_dashboards_on() -> None:  # §3.3
    for dynamic, stored in ((True, "v2"), (False, "v0alpha1")):
        with StandIn(APIS_VERSIONS[-1], dynamic_dashboards=dynamic) as standin:
            standin.add_dashboard(classic("ed"))
            standin.ui_save("ed", lambda model: model.update(description="saved"))
            assert standin.store.dashboards["ed"].stored_version == stored
            assert standin.dashboard("ed")["description"] == "saved"
