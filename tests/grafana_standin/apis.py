"""The Kubernetes-style /apis of Grafana 13 for dashboards and folders (shared/reference/grafana-13-apis.md §1).

One store with the legacy /api: a dashboard written on either side is read on both. A v1/v1beta1 write
runs the schema migrations to 42 and stores the result; a v0alpha1 write (and every legacy /api save) is
stored as sent, and a v1 read migrates it in memory. A v2/v2beta1 write stores the v2 spec; a read at the
other schema converts (v2_schema.py, lossy as Grafana's) and says so in `status.conversion`. A v1 write over
a v2-stored dashboard is accepted and stores it as v1 again. Generation (the legacy version) rises only when the
spec or the folder changed; an identical write writes nothing; resourceVersion guards PUT.

Stand-in assumptions where the reference says unconfirmed: admission errors (empty title, missing folder,
resourceVersion on create) answer 400 BadRequest; a namespace other than the stand-in's answers 404.
"""

from __future__ import annotations

import base64
import copy
import json
import re
from typing import Any

from .dashboards import save_dashboard
from .migrate import backend_migrate
from .store import UID_CHARS, DashboardRow, Fail, FolderRow, Principal, Request, Store, now
from .v2_schema import convert, family

Reply = tuple[int, Any]
DASHBOARD_GROUP, FOLDER_GROUP = "dashboard.grafana.app", "folder.grafana.app"
FOLDER = "grafana.app/folder"
MESSAGE = "grafana.app/message"
CREATED_BY, UPDATED_BY, UPDATED_AT = "grafana.app/createdBy", "grafana.app/updatedBy", "grafana.app/updatedTimestamp"
MANAGER_KEYS = ("grafana.app/managedBy", "grafana.app/managerId")
SERVER_KEYS = (CREATED_BY, UPDATED_BY, UPDATED_AT, FOLDER)
INTERNAL_ID = "grafana.app/deprecatedInternalID"
DEFAULT_LIMIT = 500
NAME = r"([^/]+)"
VERSION = r"(v[0-9a-z]+)"
PATTERNS = {
    "dashboards": re.compile(rf"/apis/{re.escape(DASHBOARD_GROUP)}/{VERSION}/namespaces/{NAME}/dashboards(?:/{NAME})?"),
    "folders": re.compile(rf"/apis/{re.escape(FOLDER_GROUP)}/{VERSION}/namespaces/{NAME}/folders(?:/{NAME})?"),
}


def status(code: int, reason: str, message: str, name: str = "", kind: str = "dashboards",
           group: str = DASHBOARD_GROUP) -> Fail:
    """A k8s Status failure body (§1.13)."""
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                            "message": message, "reason": reason}
    if name:
        body["details"] = {"name": name, "group": group, "kind": kind}
    body["code"] = code
    return Fail(code, body)


def _resource(kind: str) -> str:
    return "dashboards.dashboard.grafana.app" if kind == "dashboards" else "folders.folder.grafana.app"


def not_found(name: str, kind: str = "dashboards") -> Fail:
    group = DASHBOARD_GROUP if kind == "dashboards" else FOLDER_GROUP
    return status(404, "NotFound", f'{_resource(kind)} "{name}" not found', name, kind, group)


def bad_request(message: str) -> Fail:
    return status(400, "BadRequest", message)


def identity(login: str) -> str:
    """`<type>:<uid>` as Grafana stamps createdBy/updatedBy (rows keep the login, as the legacy /api shows it)."""
    kind = "service-account" if login.startswith("sa-") else "user"
    return f"{kind}:{login}"


# ------------------------------------------------------------------ discovery


def group_document(group: str, versions: tuple[str, ...]) -> dict[str, Any]:
    listed = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": listed,
            "preferredVersion": listed[0]}


def discovery(store: Store, path: str) -> Reply:
    versions = store.flavor.apis_versions
    if path.rstrip("/") == "/apis":
        return 200, {"kind": "APIGroupList", "apiVersion": "v1",
                     "groups": [group_document(g, versions) for g in (DASHBOARD_GROUP, FOLDER_GROUP)]}
    group = path.rstrip("/").removeprefix("/apis/")
    if group in (DASHBOARD_GROUP, FOLDER_GROUP):
        return 200, group_document(group, versions)
    raise status(404, "NotFound", "the server could not find the requested resource")


# ------------------------------------------------------------------ dashboards


def conversion_status(stored: str) -> dict[str, Any]:
    """status.conversion on every answer that had to convert (PR #103404, #109912). `source` is listed by the
    reference without its shape: the stand-in names the stored object's apiVersion there (assumption)."""
    return {"failed": False, "storedVersion": stored, "error": "", "source": f"{DASHBOARD_GROUP}/{stored}"}


def dashboard_object(store: Store, row: DashboardRow, version: str) -> dict[str, Any]:
    # not copied: the answer is serialised under the store's lock, before anything can change the row
    spec = {k: v for k, v in row.data.items() if k not in ("id", "uid", "version")}
    status_part: dict[str, Any] = {}
    stored = row.stored_version
    if version != "v0alpha1" and stored == "v0alpha1":
        spec = backend_migrate(spec)  # v0alpha1_to_v1.go: the read converts, the store keeps v0
    if family(stored) != family(version):
        spec = convert(spec, stored, version)  # lossy both ways, as Grafana's (v2_schema.py)
    if stored != version and (stored == "v0alpha1" or family(stored) != family(version)):
        status_part = {"conversion": conversion_status(stored)}
    annotations = dict(row.annotations)
    annotations[CREATED_BY] = identity(row.created_by)
    if row.version > 1:
        annotations.update({UPDATED_BY: identity(row.updated_by), UPDATED_AT: row.updated})
    if row.folder_uid:
        annotations[FOLDER] = row.folder_uid
    return {"kind": "Dashboard", "apiVersion": f"{DASHBOARD_GROUP}/{version}",
            "metadata": {"name": row.uid, "namespace": store.namespace, "uid": row.k8s_uid,
                         "resourceVersion": str(row.resource_version), "generation": row.version,
                         "creationTimestamp": row.created, "labels": {INTERNAL_ID: str(row.id)},
                         "annotations": annotations},
            "spec": spec, "status": status_part}


def _body(req: Request) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """(metadata, spec, annotations) of a write, or 400."""
    body = req.json()
    if not isinstance(body, dict) or not isinstance(body.get("metadata"), dict):
        raise bad_request("the body is not a Kubernetes object")
    spec = body.get("spec")
    if not isinstance(spec, dict):
        raise bad_request("spec is required")
    annotations = body["metadata"].get("annotations") or {}
    if not isinstance(annotations, dict):
        raise bad_request("metadata.annotations must be an object")
    return body["metadata"], spec, {str(k): str(v) for k, v in annotations.items() if v is not None}


def _admit(store: Store, name: str, spec: dict[str, Any], annotations: dict[str, str], principal: Principal) -> str:
    """register.go's admission checks, in order; the folder uid."""
    title = spec.get("title")
    if not isinstance(title, str) or not title.strip() or len(title) > 5000:
        raise bad_request("Dashboard title cannot be empty")
    if len(annotations.get(MESSAGE, "")) > 500:
        raise bad_request("message too long, max 500 characters")
    if not name or not UID_CHARS.match(name) or len(name) > 40:
        raise bad_request(f"invalid dashboard uid: {name!r}")
    folder = annotations.get(FOLDER, "")
    if folder and folder not in store.folders:
        raise bad_request("folder not found")
    if not principal.can_write() or folder in principal.denied_folders:
        raise status(403, "Forbidden", f'{_resource("dashboards")} "{name}" is forbidden: User "{principal.login}" '
                                       "cannot update resource", name)
    return folder


def _write(store: Store, version: str, principal: Principal, name: str, spec: dict[str, Any],
           annotations: dict[str, str], existing: DashboardRow | None) -> DashboardRow:
    """prepare.go: id/uid/version leave the spec; v1 writes are migrated; generation only on a spec/folder change."""
    folder = _admit(store, name, spec, annotations, principal)
    data = {k: copy.deepcopy(v) for k, v in spec.items() if k not in ("id", "uid", "version")}
    if version != "v0alpha1" and family(version) == "v1":
        data = backend_migrate(data)
    data["title"] = str(data["title"]).strip()
    kept = {k: v for k, v in annotations.items() if k not in SERVER_KEYS}
    if existing is not None:
        before = {k: existing.annotations.get(k) for k in MANAGER_KEYS}
        after = {k: kept.get(k) for k in MANAGER_KEYS}
        if before[MANAGER_KEYS[1]] and not after[MANAGER_KEYS[1]]:
            raise status(403, "Forbidden", "Can not remove resource manager from resource", name)
        if before[MANAGER_KEYS[1]] and before != after:
            raise status(403, "Forbidden", "Cannot change resource manager kind; remove the existing manager "
                                           "first, then add the new one", name)
        same_spec = {k: v for k, v in existing.data.items() if k not in ("id", "uid", "version")} == data
        if same_spec and existing.folder_uid == folder:
            if existing.annotations != kept:  # metadata only: a new resourceVersion, the same generation
                existing.annotations = kept
                existing.resource_version = store.next_resource_version()
            return existing
    row = save_dashboard(store, principal.login, data, folder, kept.get(MESSAGE, ""), existing, name,
                         stored_version="v0alpha1" if version == "v0alpha1" else family(version))
    row.annotations = kept
    return row


def _page(items: list[Any], req: Request) -> tuple[list[Any], str]:
    """limit + continue: the token is opaque to clients (here, the offset); the last page has none."""
    limit = req.int_arg("limit", 0) or DEFAULT_LIMIT
    token = req.arg("continue")
    try:
        offset = int(json.loads(base64.b64decode(token))["o"]) if token else 0
    except (ValueError, KeyError, TypeError):
        raise status(410, "Expired", "The provided continue parameter is too old to display a consistent list "
                                     "result.") from None
    page = items[offset:offset + limit]
    following = offset + limit
    more = base64.b64encode(json.dumps({"o": following}).encode()).decode() if following < len(items) else ""
    return page, more


def _namespace(store: Store, namespace: str) -> None:
    if namespace != store.namespace:
        raise status(404, "NotFound", f'namespaces "{namespace}" not found')


def dashboards(store: Store, req: Request, version: str, namespace: str, name: str | None) -> Reply:
    if version not in store.flavor.apis_versions:
        raise status(404, "NotFound", "the server could not find the requested resource")
    _namespace(store, namespace)
    principal = req.principal
    assert principal is not None
    method = req.method
    if method == "GET" and name is None:
        rows = sorted(store.dashboards.values(), key=lambda r: r.uid)
        page, more = _page(rows, req)
        listing: dict[str, Any] = {"resourceVersion": str(store.next_resource_version() - 1)}
        if more:
            listing["continue"] = more
        return 200, {"kind": "DashboardList", "apiVersion": f"{DASHBOARD_GROUP}/{version}", "metadata": listing,
                     "items": [dashboard_object(store, row, version) for row in page]}
    if method == "POST" and name is None:
        metadata, spec, annotations = _body(req)
        uid = str(metadata.get("name") or "")
        if metadata.get("resourceVersion"):
            raise bad_request("resourceVersion should not be set on objects to be created")
        if uid in store.dashboards:
            raise status(409, "AlreadyExists", f'{_resource("dashboards")} "{uid}" already exists', uid)
        row = _write(store, version, principal, uid, spec, annotations, None)
        return 201, dashboard_object(store, row, version)
    if name is None:
        raise status(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
    row = store.dashboards.get(name)
    if method == "GET":
        if row is None:
            raise not_found(name)
        return 200, dashboard_object(store, row, version)
    if method == "PUT":
        metadata, spec, annotations = _body(req)
        if str(metadata.get("name") or "") != name:
            raise bad_request(f"the name of the object ({metadata.get('name')}) does not match the name on the "
                              f"URL ({name})")
        wanted = str(metadata.get("resourceVersion") or "")
        if row is not None and wanted and wanted != str(row.resource_version):
            raise status(409, "Conflict", f'Operation cannot be fulfilled on {_resource("dashboards")} "{name}": '
                                          "the object has been modified; please apply your changes to the latest "
                                          "version and try again", name)
        if row is not None and row.provisioned and not row.allow_ui_updates:
            raise bad_request("Cannot save provisioned dashboard")
        created = row is None
        row = _write(store, version, principal, name, spec, annotations, row)
        return (201 if created else 200), dashboard_object(store, row, version)
    if method == "DELETE":
        if row is None:
            raise not_found(name)
        if not principal.can_write() or row.folder_uid in principal.denied_folders:
            raise status(403, "Forbidden", f'{_resource("dashboards")} "{name}" is forbidden', name)
        if row.provisioned:
            raise bad_request("provisioned dashboard cannot be deleted")
        del store.dashboards[name]
        store.starred.discard(name)
        return 200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                     "details": {"name": name, "group": DASHBOARD_GROUP, "kind": "dashboards", "uid": row.k8s_uid}}
    raise status(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")


# ------------------------------------------------------------------ folders


def folder_object(store: Store, folder: FolderRow, version: str) -> dict[str, Any]:
    annotations = {CREATED_BY: identity(folder.created_by)}
    if folder.parent_uid:
        annotations[FOLDER] = folder.parent_uid
    spec: dict[str, Any] = {"title": folder.title}
    if folder.description:
        spec["description"] = folder.description
    return {"kind": "Folder", "apiVersion": f"{FOLDER_GROUP}/{version}",
            "metadata": {"name": folder.uid, "namespace": store.namespace, "uid": f"f-{folder.id:08d}",
                         "resourceVersion": str(folder.version), "generation": folder.version,
                         "creationTimestamp": folder.created, "labels": {INTERNAL_ID: str(folder.id)},
                         "annotations": annotations},
            "spec": spec, "status": {}}


def folders(store: Store, req: Request, version: str, namespace: str, name: str | None) -> Reply:
    if version not in store.flavor.apis_versions:
        raise status(404, "NotFound", "the server could not find the requested resource")
    _namespace(store, namespace)
    principal = req.principal
    assert principal is not None
    if req.method == "GET" and name is None:
        page, more = _page(sorted(store.folders.values(), key=lambda f: f.uid), req)
        return 200, {"kind": "FolderList", "apiVersion": f"{FOLDER_GROUP}/{version}",
                     "metadata": {"continue": more} if more else {},
                     "items": [folder_object(store, f, version) for f in page]}
    if req.method == "POST" and name is None:
        metadata, spec, annotations = _body(req)
        uid = str(metadata.get("name") or "")
        title = str(spec.get("title") or "").strip()
        if not title:
            raise bad_request("folder title cannot be empty")
        if not uid or not UID_CHARS.match(uid) or len(uid) > 40:
            raise bad_request(f"invalid folder uid: {uid!r}")
        if not principal.can_write():
            raise status(403, "Forbidden", f'folders.folder.grafana.app "{uid}" is forbidden', uid, "folders",
                         FOLDER_GROUP)
        if uid in store.folders:
            raise status(409, "AlreadyExists", f'folders.folder.grafana.app "{uid}" already exists', uid, "folders",
                         FOLDER_GROUP)
        parent = annotations.get(FOLDER, "")
        if parent and parent not in store.folders:
            raise bad_request("parent folder not found")
        stamp = now()
        folder = FolderRow(store.next_id(), uid, title, parent, 1, stamp, stamp, principal.login,
                           principal.login, str(spec.get("description") or ""))
        store.folders[uid] = folder
        return 201, folder_object(store, folder, version)
    if name is None:
        raise status(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
    folder = store.folders.get(name)
    if folder is None:
        raise not_found(name, "folders")
    if req.method == "GET":
        return 200, folder_object(store, folder, version)
    if req.method == "DELETE":
        if not principal.can_write():
            raise status(403, "Forbidden", f'folders.folder.grafana.app "{name}" is forbidden', name, "folders",
                         FOLDER_GROUP)
        del store.folders[name]
        for row in [d for d in store.dashboards.values() if d.folder_uid == name]:
            del store.dashboards[row.uid]  # a folder's delete takes its dashboards with it (§1.10)
        return 200, folder_object(store, folder, version)
    raise status(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")


def legacy_counterpart(method: str, path: str) -> tuple[str, str] | None:
    """The legacy /api request an /apis request stands for, so a test's fault or count on the /api route sees
    the same step of a sync on 13 (a save, a read, the listing that replaces search, a delete)."""
    for kind, pattern in PATTERNS.items():
        match = pattern.fullmatch(path)
        if match is None:
            continue
        name = match.group(3)
        if kind == "dashboards":
            if method in ("POST", "PUT"):
                return "POST", "/api/dashboards/db"
            if name is None:
                return ("GET", "/api/search") if method == "GET" else None
            return method, f"/api/dashboards/uid/{name}"
        return method, "/api/folders" + (f"/{name}" if name else "")
    return None


def route(store: Store, req: Request) -> Reply:
    """Every /apis request: discovery, dashboards, folders; 404 as a k8s Status for anything else."""
    if not store.flavor.apis_versions:
        raise Fail(404, {"message": "Not found"})
    for kind, pattern in PATTERNS.items():
        match = pattern.fullmatch(req.path)
        if match:
            handler = dashboards if kind == "dashboards" else folders
            return handler(store, req, *match.groups())
    if req.method == "GET":
        return discovery(store, req.path)
    raise status(404, "NotFound", "the server could not find the requested resource")
