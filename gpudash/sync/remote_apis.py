"""Dashboards and folders on Grafana's Kubernetes-style /apis (12.x GA versions, 13.x), each call one request.

shared/reference/grafana-13-apis.md is the contract. A dashboard is `{metadata, spec}`: the uid is
`metadata.name`, the legacy version is `metadata.generation`, the folder is the `grafana.app/folder`
annotation, the version message `grafana.app/message`, and gpudash's marker travels as annotations
(content.marker_annotations) that a save from the UI keeps. An update carries the `resourceVersion`
gpudash read, so a save in between answers 409 Conflict, the same refusal as /api's 412. Reading lists
the namespace's dashboards page by page (`limit` + `continue`), specs included: one request per page.

grafana-client has no /apis support; its request runner appends the path to its `.../api` base URL, so
"s/<group>/..." reaches `.../apis/<group>/...` through the same session, credentials, TLS settings and
organisation header as every other call.

Grafana 13 stores each dashboard in the schema it was written in (a save from its editor: v2). gpudash
reads and writes at the version of the schema it writes (gpudash.sync.schema), records that schema on
each write (gpudash.sync.stored), and reads a dashboard stored in the other schema once more at its stored
version, so that it is compared as stored, never as converted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from gpudash.compare.content import MARKER_KEY, marker_annotations, marker_of_annotations
from gpudash.sync.grafana_api import Grafana, GrafanaFailure
from gpudash.sync.plan import RemoteDashboard
from gpudash.sync.schema import CLASSIC, Schema, family
from gpudash.sync.stored import SCHEMA_ANNOTATION, V2_HASH_ANNOTATION, storage_of, written_annotations

DASHBOARD_GROUP, FOLDER_GROUP = "dashboard.grafana.app", "folder.grafana.app"
PREFERRED = ("v1", "v1beta1")  # as Grafana's own frontend chooses (DashboardAPIVersionResolver.ts)
PREFERRED_V2 = ("v2", "v2beta1")
FOLDER, MESSAGE = "grafana.app/folder", "grafana.app/message"
SERVER_STAMPED = ("grafana.app/createdBy", "grafana.app/updatedBy", "grafana.app/updatedTimestamp")
LIST_PAGE = 100  # dashboards per list request: a few MiB of specs at most
NOT_SERVED = (404, 406)


def apis_path(path: str) -> str:
    """The argument grafana-client's runner needs to reach `/apis/<path>` (it prepends `.../api`)."""
    return "s/" + path.lstrip("/")


def served_version(group_document: Any, preferred: tuple[str, ...] = PREFERRED) -> str:
    """The preferred dashboard API version an APIGroup document lists, or "" for none of ours."""
    versions = group_document.get("versions") if isinstance(group_document, dict) else None
    listed = {str(v.get("version")) for v in versions or [] if isinstance(v, dict)}
    return next((version for version in preferred if version in listed), "")


def discover(grafana: Grafana) -> dict[str, str]:
    """The dashboard API version to use per schema, {"v1": ..., "v2": ...} where served (empty when Grafana
    does not serve /apis, or no classic version there: use the legacy /api)."""
    path = f"/apis/{DASHBOARD_GROUP}/"
    try:
        answer = grafana.call("", "GET", path, lambda: grafana.api.client.GET(apis_path(f"{DASHBOARD_GROUP}/")))
    except GrafanaFailure as exc:
        # an older Grafana answers 404, or its web app's HTML page (200, not JSON): no /apis there
        if exc.status in NOT_SERVED or exc.keyword == "non-json":
            return {}
        raise
    found = {"v1": served_version(answer), "v2": served_version(answer, PREFERRED_V2)}
    return {schema: version for schema, version in found.items() if version} if found["v1"] else {}


def _converted(item: dict[str, Any]) -> str:
    """The stored version when Grafana had to convert the dashboard to answer (a v2 save from 13's editor, or a
    failed conversion); "" when it is stored as the v0/v1 JSON gpudash writes."""
    status = item.get("status")
    conversion = status.get("conversion") if isinstance(status, dict) else None
    if not isinstance(conversion, dict):
        return ""
    stored = str(conversion.get("storedVersion") or "")
    if conversion.get("failed"):
        return stored or "an unknown version"
    return stored if stored and not stored.startswith(("v0", "v1")) else ""


def remote_of(item: dict[str, Any]) -> RemoteDashboard:
    """A dashboard resource as the plan reads a dashboard: the spec with its uid, generation and marker.

    Its `storage` says which schema Grafana stores it in and which gpudash wrote (the plan compares it there).
    Where only the marker is read (prune), a dashboard Grafana stores as v2 or could not convert counts as
    changed since gpudash pushed it, whatever its converted content says: its marker's hash is voided.
    """
    metadata, spec, converted = item.get("metadata"), item.get("spec"), _converted(item)
    if converted and spec is None:
        spec = {}  # a failed conversion may answer no spec at all
    if not isinstance(metadata, dict) or not isinstance(spec, dict) or not metadata.get("name"):
        raise ValueError("expected {metadata: {name, ...}, spec: {...}}")
    annotations = {str(k): str(v) for k, v in (metadata.get("annotations") or {}).items() if v is not None}
    uid = str(metadata["name"])
    dashboard = {key: value for key, value in spec.items() if key not in ("id", "version", MARKER_KEY)}
    dashboard.update(uid=uid, version=int(metadata.get("generation") or 0))
    marker = marker_of_annotations(annotations)
    if marker is None and isinstance(spec.get(MARKER_KEY), dict):
        marker = spec[MARKER_KEY]  # pushed over /api before Grafana served /apis: the marker is in the JSON
    if marker is not None:
        dashboard[MARKER_KEY] = {**marker, "contentHash": f"stored as {converted}"} if converted else marker
    wrote_v1 = annotations.get(SCHEMA_ANNOTATION, "v1") == "v1"
    v1_hash = str(marker["contentHash"]) if marker is not None and wrote_v1 else None
    updated_by = annotations.get("grafana.app/updatedBy") or annotations.get("grafana.app/createdBy", "")
    return RemoteDashboard(uid, dashboard, int(metadata.get("generation") or 0), annotations.get(FOLDER, ""),
                           updated_by=updated_by, updated=annotations.get("grafana.app/updatedTimestamp", ""),
                           resource_version=str(metadata.get("resourceVersion") or ""), annotations=annotations,
                           storage=storage_of(item, annotations, v1_hash))


def resource_body(body: dict[str, Any], read: RemoteDashboard | None, version: str,
                  schema: Schema = CLASSIC) -> dict[str, Any]:
    """The /apis object for a legacy save body ({dashboard, message, folderUid}): what gpudash writes, in the
    schema of `version` (v1: the classic JSON; v2: `schema`'s conversion of it).

    Annotations gpudash does not own (another tool's, a person's) are kept; the server's stamps are left to
    the server; the schema written and its content hash are recorded. `read`: the copy this write replaces
    (its resourceVersion guards the PUT, always); None to create.
    """
    dashboard = dict(body["dashboard"])
    marker = dashboard.pop(MARKER_KEY, None)
    uid = str(dashboard.get("uid", ""))
    local = schema.spec_of(dashboard, version)
    if local is None:
        raise GrafanaFailure(f"dashboard {uid}: gpudash cannot write it as {version}")
    spec = {key: value for key, value in local.items() if key not in ("id", "uid", "version")}
    kept = read.annotations if read is not None else {}
    annotations = {k: v for k, v in kept.items()
                   if k not in (*SERVER_STAMPED, FOLDER, MESSAGE, SCHEMA_ANNOTATION, V2_HASH_ANNOTATION)}
    if isinstance(marker, dict):
        annotations.update(marker_annotations(marker))
        annotations.update(written_annotations(version, spec))
    if body.get("folderUid"):
        annotations[FOLDER] = str(body["folderUid"])
    if body.get("message"):
        annotations[MESSAGE] = str(body["message"])
    metadata: dict[str, Any] = {"name": uid, "annotations": annotations}
    if read is not None:
        if not read.resource_version:
            raise GrafanaFailure(f"dashboard {uid}: Grafana's answer had no resourceVersion; not written blindly")
        metadata["resourceVersion"] = read.resource_version
    return {"apiVersion": f"{DASHBOARD_GROUP}/{version}", "kind": "Dashboard", "metadata": metadata, "spec": spec}


class ApisDashboards:
    """Dashboards and folders of one namespace over /apis, at the version `discover` chose."""

    def __init__(self, grafana: Grafana, versions: dict[str, str], namespace: str, schema: Schema = CLASSIC) -> None:
        self.grafana = grafana
        self.versions = versions  # schema -> the API version serving it ({"v1": "v1", "v2": "v2"})
        self.namespace = namespace
        self.schema = schema

    @property
    def version(self) -> str:
        """The API version gpudash reads and writes at: the one of the schema it writes."""
        return self.versions[self.schema.writes]

    def _path(self, group: str, resource: str, name: str = "", version: str = "") -> str:
        base = f"/apis/{group}/{version or self.version}/namespaces/{self.namespace}/{resource}"
        return f"{base}/{name}" if name else base

    def _request(self, what: str, method: str, path: str, json: Any = None,
                 params: dict[str, Any] | None = None) -> Any:
        client = self.grafana.api.client
        runner: Callable[..., Any] = getattr(client, method)
        answer = self.grafana.call(what, method, path, lambda: runner(apis_path(path.removeprefix("/apis/")),
                                                                      json=json, params=params))
        return self.grafana.expect(what, answer, dict)

    def _get(self, what: str, path: str) -> dict[str, Any] | None:
        try:
            return dict(self._request(what, "GET", path))
        except GrafanaFailure as exc:
            if exc.status == 404:
                return None
            raise

    def _parsed(self, what: str, item: Any) -> RemoteDashboard:
        try:
            return remote_of(item)
        except (ValueError, TypeError, AttributeError) as exc:
            shown = self.grafana.printable(str(exc), 120)  # the exception quotes the answer
            raise GrafanaFailure(f"{what}: Grafana's answer is not a dashboard resource ({shown})") from None

    def _remote(self, what: str, item: Any) -> RemoteDashboard:
        return self.as_stored(what, self._parsed(what, item))

    def as_stored(self, what: str, found: RemoteDashboard) -> RemoteDashboard:
        """A converted answer: the spec as Grafana stores it, read at the stored version (one more GET, only for
        a dashboard stored in another schema than gpudash reads, e.g. saved as v2 in 13's editor)."""
        storage = found.storage
        if storage is None or storage.spec is not None or storage.failed or storage.stored not in self.versions:
            return found
        stored = self._get(what, self._path(DASHBOARD_GROUP, "dashboards", found.uid, self.versions[storage.stored]))
        if stored is None:
            return found
        spec = stored.get("spec")
        status = stored.get("status")
        conversion = status.get("conversion") if isinstance(status, dict) else None
        # v0alpha1 (a legacy /api save) answered at v1 is the same schema; anything else is still converted
        converted = isinstance(conversion, dict) and (bool(conversion.get("failed")) or family(
            str(conversion.get("storedVersion") or "")) != storage.stored)
        if not isinstance(spec, dict) or converted:  # stored in yet another schema meanwhile: left unread
            return found
        return replace(found, storage=replace(storage, spec=dict(spec)))

    # ---- dashboards

    def dashboard(self, uid: str, what: str) -> RemoteDashboard | None:
        found = self._get(what, self._path(DASHBOARD_GROUP, "dashboards", uid))
        return None if found is None else self._remote(what, found)

    def listing(self) -> Iterator[RemoteDashboard]:
        """Every dashboard of the namespace, a page per request, until the list has no `continue`; as listed
        (`as_stored` reads one stored in the other schema)."""
        what, path = "dashboard list", self._path(DASHBOARD_GROUP, "dashboards")
        token = ""
        while True:
            params = {"limit": LIST_PAGE, **({"continue": token} if token else {})}
            page = self._request(what, "GET", path, params=params)
            items = page.get("items")
            if not isinstance(items, list):
                raise GrafanaFailure(f"{what}: Grafana's answer has no items list")
            for item in items:
                yield self._parsed(what, item)
            metadata = page.get("metadata")
            token = str(metadata.get("continue") or "") if isinstance(metadata, dict) else ""
            if not token:
                return

    def save(self, body: dict[str, Any], what: str, read: RemoteDashboard | None) -> dict[str, Any]:
        """POST a new dashboard, or PUT over the copy `read`; the answer in the legacy shape {uid, version}."""
        resource = resource_body(body, read, self.version, self.schema)
        uid = resource["metadata"]["name"]
        if read is None:
            answer = self._request(what, "POST", self._path(DASHBOARD_GROUP, "dashboards"), json=resource)
        else:
            answer = self._request(what, "PUT", self._path(DASHBOARD_GROUP, "dashboards", uid), json=resource)
        saved = self._parsed(what, answer)
        return {"uid": saved.uid, "version": saved.version, "resourceVersion": saved.resource_version,
                "schema": family(self.version)}

    def delete(self, uid: str, what: str) -> None:
        self._request(what, "DELETE", self._path(DASHBOARD_GROUP, "dashboards", uid))

    # ---- folders

    def folder(self, uid: str) -> dict[str, Any] | None:
        """The folder in the legacy shape gpudash reads ({uid, title}), or None."""
        found = self._get(f"folder {uid}", self._path(FOLDER_GROUP, "folders", uid, self.versions["v1"]))
        if found is None:
            return None
        spec = found.get("spec")
        return {"uid": uid, "title": str(spec.get("title", "")) if isinstance(spec, dict) else ""}

    def create_folder(self, uid: str, title: str) -> dict[str, Any]:
        what = f"folder {title!r} ({uid})"
        version = self.versions["v1"]  # folders have no v2
        body = {"apiVersion": f"{FOLDER_GROUP}/{version}", "kind": "Folder",
                "metadata": {"name": uid}, "spec": {"title": title}}
        self._request(what, "POST", self._path(FOLDER_GROUP, "folders", version=version), json=body)
        return {"uid": uid, "title": title}
