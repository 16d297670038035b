"""Dashboard routes: save (§1), get (§2), delete (§3), versions and restore (§8) of the contract."""

from __future__ import annotations

import copy
from typing import Any

from .store import (
    UID_CHARS,
    VERSIONS_TO_KEEP,
    DashboardRow,
    Fail,
    Request,
    Store,
    VersionRow,
    bad_request,
    clamp_refresh,
    now,
    require_writer,
    slugify,
)

Reply = tuple[int, Any]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _spec(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in ("id", "uid", "version")}


def save_dashboard(store: Store, login: str, data: dict[str, Any], folder_uid: str, message: str,
                   existing: DashboardRow | None, uid: str, restored_from: int = 0,
                   stored_version: str = "v0alpha1") -> DashboardRow:
    """Store a validated save: version 1 for a new row, +1 for an update (12: only if the spec changed).

    `stored_version`: the /apis version it was written as (the legacy /api writes v0alpha1, unmigrated)."""
    stamp = now()
    data = copy.deepcopy(data)
    if existing is None:
        row = DashboardRow(store.next_id(), uid or store.new_uid(), data["title"], folder_uid, 1, data,
                           stamp, stamp, login, login)
        row.resource_version, row.stored_version = store.next_resource_version(), stored_version
        store.dashboards[row.uid] = row
        parent = 0
    else:
        row = existing
        parent = row.version
        changed = _spec(row.data) != _spec(data) or row.folder_uid != folder_uid
        if changed or store.flavor.identical_resave_bumps_version:
            row.version += 1
        if changed:
            row.resource_version, row.stored_version = store.next_resource_version(), stored_version
        row.title, row.folder_uid, row.data, row.updated, row.updated_by = data["title"], folder_uid, data, stamp, login
    row.data.update(id=row.id, uid=row.uid, version=row.version)
    if not row.history or row.history[-1].version != row.version:
        row.history.append(VersionRow(row.version, copy.deepcopy(row.data), message, stamp, login, parent,
                                      restored_from))
        del row.history[:-VERSIONS_TO_KEEP]
    return row


def save_answer(store: Store, row: DashboardRow) -> dict[str, Any]:
    body: dict[str, Any] = {"id": row.id, "uid": row.uid, "url": row.url, "status": "success",
                            "version": row.version, "slug": row.slug}
    if store.flavor.post_returns_folder_uid:
        body["folderUid"] = row.folder_uid
    return body


def post_db(store: Store, req: Request) -> Reply:
    """POST /api/dashboards/db, with the checks in the contract's order (§1, "Order in which ...")."""
    flavor = store.flavor
    principal = require_writer(req, flavor, "dashboards:create, dashboards:write")
    body = req.json()
    if not isinstance(body, dict) or not isinstance(body.get("dashboard"), dict):
        raise bad_request()
    data = copy.deepcopy(body["dashboard"])
    folder_uid = str(body.get("folderUid") or "")
    folder_id = body.get("folderId") if _is_number(body.get("folderId")) else 0
    message = str(body.get("message") or "")
    overwrite = bool(body.get("overwrite"))
    if flavor.rejects_is_folder_and_long_message and body.get("isFolder"):
        raise Fail(400, {"message": "Use folders endpoint for saving folders."})
    # 2. (9/10) the handler resolves folderUid first
    if flavor.folder_checked_in_handler and folder_uid and folder_uid not in store.folders:
        raise Fail(400, {"message": "Folder not found", "traceID": ""})
    # 3. title
    title = str(data.get("title") or "").strip() if not isinstance(data.get("title"), (dict, list)) else ""
    if not title:
        raise Fail(400, {"status": "empty-name", "message": "Dashboard title cannot be empty"})
    data["title"] = title
    # 4. (11+) message length
    if flavor.rejects_is_folder_and_long_message and len(message) > 500:
        raise Fail(400, {"message": "message too long, max 500 characters"})
    # 5. uid
    raw_uid = data.get("uid")
    uid = str(raw_uid).strip() if raw_uid is not None else ""
    if uid and not UID_CHARS.match(uid):
        raise Fail(400, {"message": "uid contains illegal characters"})
    if len(uid) > 40:
        raise Fail(400, {"message": "uid too long, max 40 characters"})
    # 6. refresh below the minimum is raised, not refused
    if "refresh" in data:
        data["refresh"] = clamp_refresh(data["refresh"])
    # 7. (11+) folder existence
    by_folder_id = store.folder_by_id(int(folder_id)) if folder_id else None
    missing = (folder_uid and folder_uid not in store.folders) or (not folder_uid and folder_id and not by_folder_id)
    if missing and not flavor.folder_checked_in_handler:
        raise Fail(400, {"message": "folder not found"})
    target = folder_uid or (by_folder_id.uid if by_folder_id else "")
    # 8. the existing row
    dash_id = data.get("id") if _is_number(data.get("id")) else None
    by_id = store.dashboard_by_id(int(dash_id)) if dash_id is not None else None
    if dash_id is not None and by_id is None:
        raise Fail(404, {"status": "not-found", "message": "Dashboard not found"})
    if flavor.folder_checked_in_handler and not folder_uid and folder_id and by_folder_id is None:
        raise Fail(404, {"message": "Folder not found"})
    by_uid = store.dashboards.get(uid) if uid else None
    if by_id is not None and by_uid is not None and by_id is not by_uid:
        raise Fail(400, {"message": "A dashboard with the same uid already exists"})
    existing = by_id or by_uid
    if existing is None and uid and uid in store.folders:
        raise Fail(400, {"message": "Dashboard cannot be changed to a folder"})
    version = data.get("version") if (dash_id is not None or uid) and _is_number(data.get("version")) else 0
    if existing is not None:
        if overwrite:
            version = existing.version
        elif version != existing.version and flavor.legacy_conflict_409:
            raise Fail(409, {"message": "Dashboard already exists. Use overwrite flag to update."})
        elif version != existing.version:
            raise Fail(412, {"status": "version-mismatch", "message": "The dashboard has been changed by someone else"})
        if existing.plugin_id and not overwrite:
            raise Fail(412, {"status": "plugin-dashboard",
                             "message": f"The dashboard belongs to plugin {existing.plugin_id}."})
    # 9. title rules, 9 to 11.2 only
    if flavor.unique_titles:
        wanted = slugify(title)
        if any(slugify(f.title) == wanted for f in store.folders.values()):
            raise Fail(400, {"status": "name-match", "message": "Dashboard name cannot be the same as folder"})
        other = next((d for d in store.dashboards.values() if d.folder_uid == target and d.slug == wanted
                      and (existing is None or d.id != existing.id)), None)
        if other is not None:
            if not overwrite:
                raise Fail(412, {"status": "name-exists",
                                 "message": "A dashboard with the same name in the folder already exists"})
            existing, uid = other, other.uid  # overwrite silently takes the other dashboard over
    # 10. provisioned
    if existing is not None and existing.provisioned and not existing.allow_ui_updates:
        raise Fail(400, {"message": "Cannot save provisioned dashboard"})
    # 11. object-level permission
    if target in principal.denied_folders or (existing is not None and existing.folder_uid in principal.denied_folders):
        raise Fail(403, {"message": "Access denied to save dashboard"})
    # 12. quota
    if existing is None and store.quota is not None and len(store.dashboards) >= store.quota:
        raise Fail(403, {"message": "Quota reached"})
    row = save_dashboard(store, principal.login, data, target, message, existing, uid)
    return 200, save_answer(store, row)


def _meta(store: Store, row: DashboardRow, req: Request) -> dict[str, Any]:
    principal = req.principal
    assert principal is not None
    can_save = principal.can_write() and row.folder_uid not in principal.denied_folders
    meta: dict[str, Any] = {
        "type": "db", "canSave": can_save, "canEdit": can_save, "canAdmin": principal.role == "Admin",
        "canStar": True, "canDelete": can_save, "slug": row.slug, "url": row.url,
        "expires": "0001-01-01T00:00:00Z", "created": row.created, "updated": row.updated,
        "updatedBy": row.updated_by, "createdBy": row.created_by, "version": row.version, "hasAcl": False,
        "isFolder": False, "folderId": store.folders[row.folder_uid].id if row.folder_uid in store.folders else 0,
        "folderUid": row.folder_uid, "folderTitle": store.folder_title(row.folder_uid),
        "folderUrl": store.folder_url(row.folder_uid),
        "provisioned": row.provisioned and not row.allow_ui_updates,
        "provisionedExternalId": row.external_id if row.provisioned else "",
    }
    if store.flavor.meta_annotations_permissions:
        rights = {"canAdd": can_save, "canEdit": can_save, "canDelete": can_save}
        meta["annotationsPermissions"] = {"dashboard": rights, "organization": dict(rights)}
    if row.uid in store.starred:
        meta["isStarred"] = True
    if store.flavor.api_version_field:
        meta["apiVersion"] = "v1"
    return meta


def _row(store: Store, uid: str) -> DashboardRow:
    row = store.dashboards.get(uid)
    if row is None:
        raise Fail(404, {"message": "Dashboard not found", "traceID": ""})
    return row


def get_by_uid(store: Store, req: Request, uid: str) -> Reply:
    row = _row(store, uid)
    return 200, {"dashboard": row.classic_json(), "meta": _meta(store, row, req)}


def delete_by_uid(store: Store, req: Request, uid: str) -> Reply:
    principal = require_writer(req, store.flavor, "dashboards:delete")
    if store.flavor.delete_refuses_folder_uid and uid in store.folders:
        raise Fail(400, {"message": "Use folders endpoint for deleting folders."})
    row = store.dashboards.get(uid)
    if row is None:
        raise Fail(404, {"message": "Dashboard not found"})
    if row.folder_uid in principal.denied_folders:
        raise Fail(403, {"message": "Access denied to this dashboard"})
    if row.provisioned:
        raise Fail(400, {"message": "provisioned dashboard cannot be deleted"})
    del store.dashboards[uid]
    store.starred.discard(uid)
    key = store.flavor.delete_answer_key
    return 200, {"title": row.title, "message": f"Dashboard {row.title} deleted", key: getattr(row, key)}


def _version_item(row: DashboardRow, item: VersionRow, first: int) -> dict[str, Any]:
    if item.restored_from:
        message = f"Restored from version {item.restored_from}"
    elif item.version == first and item.parent_version == 0:
        message = "Initial save"
    else:
        message = item.message
    return {"id": item.version + row.id * 1000, "dashboardId": row.id, "uid": row.uid,
            "parentVersion": item.parent_version, "restoredFrom": item.restored_from, "version": item.version,
            "created": item.created, "createdBy": item.created_by, "message": message}


def list_versions(store: Store, req: Request, uid: str) -> Reply:
    row = store.dashboards.get(uid)
    if row is None:
        raise Fail(404, {"message": "Dashboard not found"})
    require_writer(req, store.flavor, "dashboards:write")
    first = row.history[0].version if row.history else 0
    start, limit = req.int_arg("start", 0), req.int_arg("limit", 0) or 1000
    items = [_version_item(row, v, first) for v in reversed(row.history)][start:start + limit]
    if store.flavor.versions_as_object:
        return 200, {"continueToken": "", "versions": items}
    return 200, items


def get_version(store: Store, req: Request, uid: str, number: str) -> Reply:
    row = _row(store, uid)
    item = next((v for v in row.history if str(v.version) == number), None)
    if item is None:
        if store.flavor.major >= 12:
            raise Fail(404, {"message": "Dashboard version not found"})
        raise Fail(500, {"message": f"Dashboard version {number} not found for dashboardId {row.id}"})
    first = row.history[0].version
    return 200, {**_version_item(row, item, first), "data": copy.deepcopy(item.data)}


def restore(store: Store, req: Request, uid: str) -> Reply:
    principal = require_writer(req, store.flavor, "dashboards:write")
    row = _row(store, uid)
    body = req.json()
    if not isinstance(body, dict) or not _is_number(body.get("version")):
        raise bad_request()
    item = next((v for v in row.history if v.version == body["version"]), None)
    if item is None:
        raise Fail(404, {"message": "Dashboard version not found"})
    if store.flavor.major >= 12 and _spec(item.data) == _spec(row.data):
        raise Fail(400, {"message": "Current dashboard is identical to the specified version"})
    if row.provisioned and not row.allow_ui_updates:
        raise Fail(400, {"message": "Cannot save provisioned dashboard"})
    saved = save_dashboard(store, principal.login, copy.deepcopy(item.data), row.folder_uid,
                           f"Restored from version {item.version}", row, row.uid, restored_from=item.version)
    return 200, save_answer(store, saved)
