"""The Grafana stand-in answers as shared/reference/grafana-api-contract.md says, version by version.

These pin the stand-in itself (status codes and exact bodies), so the sync tests that use it prove
something about real Grafana. Section numbers refer to the contract.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import niquests
import pytest
from grafana_standin import TESTED_VERSIONS, StandIn
from support.slack import budget


class Client:
    def __init__(self, standin: StandIn, token: str | None = None) -> None:
        self.standin = standin
        self.session = niquests.Session()
        self.headers = {"Authorization": f"Bearer {token or standin.token}"}

    def __call__(self, method: str, path: str, body: Any = None, raw: bytes | None = None,
                 headers: dict[str, str] | None = None) -> tuple[int, Any]:
        answer = self.session.request(method, self.standin.url + path, json=body, data=raw,
                                      headers=self.headers if headers is None else headers, timeout=budget(5))
        return answer.status_code, answer.json() if answer.content else None

    def save(self, dashboard: dict[str, Any], **extra: Any) -> tuple[int, Any]:
        return self("POST", "/api/dashboards/db", {"dashboard": dashboard, **extra})


@pytest.fixture(params=TESTED_VERSIONS, ids=lambda v: f"grafana{v}")
def api(request: pytest.FixtureRequest) -> Iterator[Client]:
    with StandIn(request.param) as standin:
        yield Client(standin)


def major_minor(api: Client) -> tuple[int, int]:
    return api.standin.flavor.major_minor


# ----------------------------------------------------------------------------- §1 POST /api/dashboards/db


def test_save_new_then_update_with_the_version_handshake(api: Client) -> None:
    status, body = api.save({"uid": "a", "title": "  A  ", "version": 7})
    assert status == 200
    assert body["version"] == 1 and body["uid"] == "a" and body["url"] == "/d/a/a" and body["slug"] == "a"
    assert body["status"] == "success" and isinstance(body["id"], int)
    assert ("folderUid" in body) == (major_minor(api) >= (11, 0))
    assert api.save({"uid": "a", "title": "A"}) == (
        (409, {"message": "Dashboard already exists. Use overwrite flag to update."}) if major_minor(api) >= (13, 1)
        else (412, {"status": "version-mismatch", "message": "The dashboard has been changed by someone else"}))
    status, body = api.save({"uid": "a", "title": "A", "version": 1, "x": 1})
    assert status == 200 and body["version"] == 2
    status, body = api.save({"uid": "a", "title": "A", "version": 1, "x": 2}, overwrite=True)
    assert status == 200 and body["version"] == 3
    status, got = api("GET", "/api/dashboards/uid/a")
    assert got["dashboard"] == {"uid": "a", "title": "A", "version": 3, "id": got["dashboard"]["id"], "x": 2}


def test_identical_resave_raises_the_version_except_on_12(api: Client) -> None:
    api.save({"uid": "a", "title": "A"})
    status, body = api.save({"uid": "a", "title": "A", "version": 1})
    assert status == 200
    assert body["version"] == (1 if major_minor(api) >= (12, 0) else 2)


@pytest.mark.parametrize(("payload", "answer"), [
    (b"{not json", {"message": "bad request data"}),
    (b'{"folderUid": ""}', {"message": "bad request data"}),
    (b'{"dashboard": {"title": "   "}}', {"status": "empty-name", "message": "Dashboard title cannot be empty"}),
    (b'{"dashboard": {"title": "A", "uid": "a b"}}', {"message": "uid contains illegal characters"}),
    (b'{"dashboard": {"title": "A", "uid": "' + b"x" * 41 + b'"}}', {"message": "uid too long, max 40 characters"}),
])
def test_save_validation(api: Client, payload: bytes, answer: dict[str, Any]) -> None:
    assert api("POST", "/api/dashboards/db", raw=payload, headers={**api.headers,
                                                                   "Content-Type": "application/json"}) == (400, answer)


def test_missing_folder_by_version(api: Client) -> None:
    status, body = api.save({"uid": "a", "title": "A"}, folderUid="nope")
    assert status == 400
    if major_minor(api) <= (10, 99):
        assert body == {"message": "Folder not found", "traceID": ""}
    else:
        assert body == {"message": "folder not found"}


def test_message_longer_than_500_from_11(api: Client) -> None:
    status, _ = api.save({"uid": "a", "title": "A"}, message="m" * 501)
    assert status == (400 if major_minor(api) >= (11, 0) else 200)


def test_refresh_below_the_minimum_is_raised_not_refused(api: Client) -> None:
    assert api.save({"uid": "a", "title": "A", "refresh": "1s"})[0] == 200
    assert api("GET", "/api/dashboards/uid/a")[1]["dashboard"]["refresh"] == "5s"


def test_unknown_id_and_uid_id_mismatch(api: Client) -> None:
    assert api.save({"id": 999, "title": "A"}) == (404, {"status": "not-found", "message": "Dashboard not found"})
    api.save({"uid": "a", "title": "A"})
    api.save({"uid": "b", "title": "B"})
    a_id = api("GET", "/api/dashboards/uid/a")[1]["dashboard"]["id"]
    assert api.save({"id": a_id, "uid": "b", "title": "X", "version": 1}) == (
        400, {"message": "A dashboard with the same uid already exists"})


def test_uid_match_in_another_folder_moves_the_dashboard(api: Client) -> None:
    api.standin.add_folder("f1", "One")
    api.save({"uid": "a", "title": "A"})
    status, _ = api.save({"uid": "a", "title": "A", "version": 1}, folderUid="f1")
    assert status == 200
    assert api("GET", "/api/dashboards/uid/a")[1]["meta"]["folderUid"] == "f1"


def test_title_rules_until_11_2(api: Client) -> None:
    api.standin.add_folder("f1", "Team Folder")
    assert api.save({"uid": "a", "title": "My Dash"}, folderUid="f1")[0] == 200
    clash = api.save({"uid": "b", "title": "my-dash"}, folderUid="f1")
    folder_name = api.save({"uid": "c", "title": "team folder"})
    taken = api.save({"uid": "b", "title": "My Dash", "marker": "b"}, folderUid="f1", overwrite=True)
    if major_minor(api) <= (11, 2):
        assert clash == (412, {"status": "name-exists",
                               "message": "A dashboard with the same name in the folder already exists"})
        assert folder_name == (400, {"status": "name-match", "message": "Dashboard name cannot be the same as folder"})
        assert taken[0] == 200 and taken[1]["uid"] == "a"  # overwrite takes the other dashboard over
        assert api("GET", "/api/dashboards/uid/b")[0] == 404
    else:
        assert clash[0] == 200 and folder_name[0] == 200 and taken[1]["uid"] == "b"


def test_provisioned_and_plugin_dashboards(api: Client) -> None:
    api.standin.add_dashboard({"uid": "p", "title": "P"}, provisioned=True)
    assert api.save({"uid": "p", "title": "P", "version": 1}) == (400, {"message": "Cannot save provisioned dashboard"})
    stale = 409 if major_minor(api) >= (13, 1) else 412
    assert api.save({"uid": "p", "title": "P", "version": 9})[0] == stale  # the version check comes first
    assert api("DELETE", "/api/dashboards/uid/p") == (400, {"message": "provisioned dashboard cannot be deleted"})
    meta = api("GET", "/api/dashboards/uid/p")[1]["meta"]
    assert meta["provisioned"] is True and meta["provisionedExternalId"] == "p.json"
    api.standin.add_dashboard({"uid": "q", "title": "Q"}, provisioned=True, allow_ui_updates=True)
    assert api("GET", "/api/dashboards/uid/q")[1]["meta"]["provisioned"] is False
    assert api.save({"uid": "q", "title": "Q", "version": 1})[0] == 200


def test_permissions(api: Client) -> None:
    api.standin.add_token("viewer", role="Viewer")
    api.standin.add_folder("locked", "Locked")
    api.standin.add_token("editor", role="Editor", denied_folders=("locked",))
    status, body = Client(api.standin, "viewer").save({"uid": "a", "title": "A"})
    assert status == 403
    if major_minor(api)[0] == 9:
        assert body == {"message": "Permission denied"}
    else:
        assert body["title"] == "Access denied" and body["accessErrorId"].startswith("ACE")
        assert body["message"].startswith("You'll need additional permissions to perform this action. "
                                          "Permissions needed: dashboards:create")
    assert Client(api.standin, "editor").save({"uid": "a", "title": "A"}, folderUid="locked") == (
        403, {"message": "Access denied to save dashboard"})
    api.standin.store.quota = 0
    assert api.save({"uid": "z", "title": "Z"}) == (403, {"message": "Quota reached"})


# ----------------------------------------------------------------------------- §2, §3 GET and DELETE


def test_get_meta_and_not_found(api: Client) -> None:
    assert api("GET", "/api/dashboards/uid/none") == (404, {"message": "Dashboard not found", "traceID": ""})
    api.save({"uid": "a", "title": "A", "custom": {"kept": True}})
    assert api("GET", "/api/dashboards/uid/a")[0] == 200
    body = api("GET", "/api/dashboards/uid/a")[1]
    meta = body["meta"]
    assert body["dashboard"]["custom"] == {"kept": True}
    assert meta["folderId"] == 0 and meta["folderUid"] == "" and meta["folderTitle"] == "General"
    assert meta["folderUrl"] == "" and meta["expires"] == "0001-01-01T00:00:00Z" and meta["version"] == 1
    assert ("annotationsPermissions" in meta) == (major_minor(api) >= (10, 0))
    assert ("apiVersion" in meta) == (major_minor(api) >= (12, 0))
    assert "isStarred" not in meta


def test_delete_answer_by_version(api: Client) -> None:
    api.save({"uid": "a", "title": "A"})
    status, body = api("DELETE", "/api/dashboards/uid/a")
    assert status == 200 and body["title"] == "A" and body["message"] == "Dashboard A deleted"
    assert ("id" in body, "uid" in body) == ((True, False) if major_minor(api) <= (10, 99) else (False, True))
    assert api("DELETE", "/api/dashboards/uid/a") == (404, {"message": "Dashboard not found"})
    assert api.save({"uid": "a", "title": "A"})[1]["version"] == 1  # history went with it


# ----------------------------------------------------------------------------- §4 search


def test_search(api: Client) -> None:
    api.standin.add_folder("f", "Folder")
    api.save({"uid": "a", "title": "beta", "tags": ["z", "gpudash"]}, folderUid="f")
    api.save({"uid": "b", "title": "Alpha", "tags": ["gpudash"]})
    status, hits = api("GET", "/api/search")
    assert status == 200
    assert [h["type"] for h in hits] == ["dash-folder", "dash-db", "dash-db"]
    assert [h["title"] for h in hits[1:]] == ["Alpha", "beta"]
    alpha, beta = hits[1], hits[2]
    assert alpha["slug"] == "" and alpha["uri"] == "db/alpha" and alpha["url"] == "/d/b/alpha"
    assert "folderUid" not in alpha and beta["folderUid"] == "f" and beta["tags"] == ["gpudash", "z"]
    assert [h["uid"] for h in api("GET", "/api/search?tag=gpudash&tag=z")[1]] == ["a"]
    assert [h["uid"] for h in api("GET", "/api/search?dashboardUIDs=a&dashboardUIDs=b&type=dash-db")[1]] == ["b", "a"]
    assert api("GET", "/api/search?dashboardUIDs=a,b")[1] == []  # commas are not split
    assert api("GET", "/api/search?dashboardUIDs=a&dashboardIds=1") == (
        400, {"message": "search supports UIDs or IDs, not both"})
    assert api("GET", "/api/search?limit=5001")[0] == 422
    assert [h["uid"] for h in api("GET", "/api/search?type=dash-db&limit=1&page=2")[1]] == ["a"]
    assert api("GET", "/api/search?type=dash-db&limit=1&page=3")[1] == []
    unknown = api("GET", "/api/search?type=dash-nope")
    assert unknown == ((500, {"message": "Search failed"}) if major_minor(api) >= (12, 0) else (200, hits))
    by_folder = [h["uid"] for h in api("GET", "/api/search?folderUIDs=f")[1]]
    assert by_folder == (["a"] if major_minor(api) >= (10, 0) else ["f", "b", "a"])  # 9 ignores folderUIDs
    folder_id = hits[0]["id"]
    itself = [h["uid"] for h in api("GET", f"/api/search?folderIds={folder_id}&type=dash-folder")[1]]
    assert itself == (["f"] if major_minor(api) >= (12, 0) else [])


# ----------------------------------------------------------------------------- §5 folders


def test_folders(api: Client) -> None:
    status, made = api("POST", "/api/folders", {"uid": "f", "title": "GPU"})
    assert status == 200 and made["version"] == 1 and made["url"] == "/dashboards/f/f/gpu"
    assert api("POST", "/api/folders", {"uid": "f", "title": "Other"}) == (
        412, {"status": "version-mismatch", "message": "the folder has been changed by someone else"})
    assert api("POST", "/api/folders", {"title": " "}) == (400, {"message": "folder title cannot be empty"})
    general = api("POST", "/api/folders", {"title": "General"})
    assert general[0] == (400 if major_minor(api) <= (11, 99) else 200)
    same_title = api("POST", "/api/folders", {"uid": "g", "title": "GPU"})
    rule = api.standin.flavor.folder_title_rule
    if rule == "everywhere":
        assert same_title == (409, {"message": "a folder or dashboard in the general folder with the same name "
                                               "already exists"})
    elif rule == "siblings":
        assert same_title == (409, {"message": "a folder with the same name already exists in the current location"})
    else:
        assert same_title[0] == 200
    assert api("GET", "/api/folders/none") == (404, {"status": "not-found", "message": "folder not found"})
    assert api("PUT", "/api/folders/f", {"title": "GPU 2"})[0] == 412  # no version, no overwrite
    status, updated = api("PUT", "/api/folders/f", {"title": "GPU 2", "version": 1})
    assert status == 200 and updated["version"] == 2
    api.save({"uid": "in-f", "title": "Inside"}, folderUid="f")
    status, gone = api("DELETE", "/api/folders/f")
    assert status == 200
    assert gone == ({"title": "GPU 2", "message": "Folder GPU 2 deleted", "id": made["id"]}
                    if major_minor(api)[0] == 9 else {"message": "Folder deleted"})
    assert api("GET", "/api/dashboards/uid/in-f")[0] == 404


def test_folder_list_is_flat_until_10_and_root_children_after(api: Client) -> None:
    api.standin.add_folder("top", "Top")
    api.standin.add_folder("child", "Child", parent_uid="top")
    uids = [f["uid"] for f in api("GET", "/api/folders")[1]]
    assert uids == (["child", "top"] if major_minor(api) <= (10, 99) else ["top"])


# ----------------------------------------------------------------------------- §6 data sources


def test_datasources(api: Client) -> None:
    body = {"uid": "prom", "name": "Prom", "type": "prometheus", "access": "proxy", "url": "http://p:9090",
            "jsonData": {"httpMethod": "POST"}}
    status, made = api("POST", "/api/datasources", body)
    assert status == 200 and made["message"] == "Datasource added" and made["datasource"]["version"] == 1
    assert api("POST", "/api/datasources", {**body, "uid": "other"}) == (
        409, {"message": "data source with the same name already exists", "traceID": ""})
    assert api("POST", "/api/datasources", {**body, "name": "Other"}) == (
        409, {"message": "data source with the same uid already exists", "traceID": ""})
    assert api("POST", "/api/datasources", {**body, "uid": "x", "name": "X", "url": "not a url"}) == (
        400, {"message": "Validation error, invalid URL"})
    status, updated = api("PUT", "/api/datasources/uid/prom", {**body, "version": 1, "jsonData": {}})
    assert status == 200 and updated["datasource"]["version"] == 2 and updated["datasource"]["jsonData"] == {}
    assert api("PUT", "/api/datasources/uid/prom", {**body, "version": 1})[0] == 409  # stale
    assert api("PUT", "/api/datasources/uid/prom", body)[1]["datasource"]["version"] == 1  # no version: 1
    api.standin.store.datasources["prom"].read_only = True
    assert api("PUT", "/api/datasources/uid/prom", body) == (403, {"message": "Cannot update read-only data source"})
    assert api("GET", "/api/datasources/uid/none") == (404, {"message": "Data source not found"})


# ----------------------------------------------------------------------------- §7, §8, §9


def test_health_and_version(api: Client) -> None:
    answer = niquests.get(api.standin.url + "/api/health", timeout=budget(5))
    assert answer.status_code == 200 and answer.text.startswith("{\n  ")
    assert json.loads(answer.text) == {"commit": "0123abc", "database": "ok", "version": api.standin.version}
    assert api("GET", "/api/frontend/settings")[1]["buildInfo"]["version"] == api.standin.version


def test_versions_list_shape(api: Client) -> None:
    api.save({"uid": "a", "title": "A"}, message="first")
    api.save({"uid": "a", "title": "A", "version": 1, "x": 1}, message="second")
    status, body = api("GET", "/api/dashboards/uid/a/versions")
    items = body["versions"] if isinstance(body, dict) else body
    assert isinstance(body, dict) == (major_minor(api) >= (11, 5))
    assert [(v["version"], v["message"]) for v in items] == [(2, "second"), (1, "Initial save")]
    missing = api("GET", "/api/dashboards/uid/a/versions/9")
    assert missing[0] == (404 if major_minor(api) >= (12, 0) else 500)
    status, restored = api("POST", "/api/dashboards/uid/a/restore", {"version": 1})
    assert status == 200 and restored["version"] == 3


def test_authentication_bodies(api: Client) -> None:
    errutil = major_minor(api) >= (10, 0)
    none = api("GET", "/api/search", headers={})
    assert none == (401, {"message": "Unauthorized", "messageId": "auth.unauthorized", "statusCode": 401,
                          "traceID": ""} if errutil else {"message": "Unauthorized"})
    bad = api("GET", "/api/search", headers={"Authorization": "Bearer nope"})
    assert bad == (401, {"message": "Invalid API key", **({"messageId": "api-key.invalid", "statusCode": 401}
                                                           if errutil else {})})
    basic = niquests.get(api.standin.url + "/api/search", auth=("admin", "wrong"), timeout=budget(5))
    assert basic.status_code == 401 and basic.json()["message"] == "Invalid username or password"
    assert niquests.get(api.standin.url + "/api/search", auth=("admin", "admin"), timeout=budget(5)).status_code == 200
    token_as_basic = niquests.get(api.standin.url + "/api/search", auth=("api_key", api.standin.token),
                                  timeout=budget(5))
    assert token_as_basic.status_code == 200


def test_go_escapes_html_characters(api: Client) -> None:
    api.save({"uid": "a", "title": "a <b> & c"})
    raw = niquests.get(api.standin.url + "/api/dashboards/uid/a", headers=api.headers, timeout=budget(5)).text
    assert "\\u003cb\\u003e \\u0026 c" in raw
