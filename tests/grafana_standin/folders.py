"""Folder routes (§5 of the contract)."""

from __future__ import annotations

from typing import Any

from .store import UID_CHARS, Fail, FolderRow, Request, Store, bad_request, now, require_writer, slugify

Reply = tuple[int, Any]
NOT_FOUND = {"status": "not-found", "message": "folder not found"}
VERSION_MISMATCH = {"status": "version-mismatch", "message": "the folder has been changed by someone else"}
MAX_DEPTH = 8


def folder_object(store: Store, folder: FolderRow, req: Request) -> dict[str, Any]:
    principal = req.principal
    assert principal is not None
    can_save = principal.can_write() and folder.uid not in principal.denied_folders
    body: dict[str, Any] = {
        "id": folder.id, "uid": folder.uid, "title": folder.title, "url": folder.url, "hasAcl": False,
        "canSave": can_save, "canEdit": can_save, "canAdmin": principal.role == "Admin", "canDelete": can_save,
        "createdBy": folder.created_by, "created": folder.created, "updatedBy": folder.updated_by,
        "updated": folder.updated, "version": folder.version,
    }
    if store.flavor.major >= 10:
        body["orgId"] = 1
    if store.flavor.nested_folders:
        body["parentUid"] = folder.parent_uid
        parents = []
        parent = store.folders.get(folder.parent_uid)
        while parent is not None:
            parents.insert(0, {"uid": parent.uid, "title": parent.title, "url": parent.url, "id": parent.id})
            parent = store.folders.get(parent.parent_uid)
        body["parents"] = parents
    return body


def _title_clash(store: Store, title: str, parent_uid: str, self_uid: str = "") -> Fail | None:
    rule, wanted = store.flavor.folder_title_rule, slugify(title)
    others = [f for f in store.folders.values() if slugify(f.title) == wanted and f.uid != self_uid]
    if rule == "everywhere" and (others or any(d.folder_uid == "" and d.slug == wanted
                                               for d in store.dashboards.values())):
        return Fail(409, {"message": "a folder or dashboard in the general folder with the same name already exists"})
    if rule == "siblings" and any(f.parent_uid == parent_uid for f in others):
        return Fail(409, {"message": "a folder with the same name already exists in the current location"})
    return None


def list_folders(store: Store, req: Request) -> Reply:
    parent = req.arg("parentUid") if store.flavor.nested_folders else ""
    rows = sorted(store.folders.values(), key=lambda f: f.title.lower())
    if not store.flavor.folders_list_flat:
        rows = [f for f in rows if f.parent_uid == parent]
    limit, page = req.int_arg("limit", 1000) or 1000, max(1, req.int_arg("page", 1))
    items = []
    for folder in rows[(page - 1) * limit: page * limit]:
        item: dict[str, Any] = {"id": folder.id, "uid": folder.uid, "title": folder.title}
        if store.flavor.nested_folders:
            item["parentUid"] = folder.parent_uid
        items.append(item)
    return 200, items


def get_folder(store: Store, req: Request, uid: str) -> Reply:
    folder = store.folders.get(uid)
    if folder is None:
        raise Fail(404, NOT_FOUND)
    return 200, folder_object(store, folder, req)


def get_folder_by_id(store: Store, req: Request, folder_id: str) -> Reply:
    folder = store.folder_by_id(int(folder_id)) if folder_id.isdigit() else None
    if folder is None:
        raise Fail(404, NOT_FOUND)
    return 200, folder_object(store, folder, req)


def create_folder(store: Store, req: Request) -> Reply:
    principal = require_writer(req, store.flavor, "folders:create")
    body = req.json()
    if not isinstance(body, dict):
        raise bad_request()
    title = str(body.get("title") or "").strip()
    uid = str(body.get("uid") or "").strip()
    parent_uid = str(body.get("parentUid") or "") if store.flavor.nested_folders else ""
    if not title:
        raise Fail(400, {"message": "folder title cannot be empty"})
    if uid and not UID_CHARS.match(uid):
        raise Fail(400, {"message": "uid contains illegal characters"})
    if len(uid) > 40:
        raise Fail(400, {"message": "uid too long, max 40 characters"})
    if store.flavor.general_title_refused and title.lower() == "general":
        raise Fail(400, {"message": "A folder with that name already exists"})
    if uid and (uid in store.folders or uid in store.dashboards):
        raise Fail(412, VERSION_MISMATCH)
    if parent_uid:
        if parent_uid not in store.folders:
            raise Fail(404, {"message": "parent folder not found"})
        depth, parent = 1, store.folders.get(parent_uid)
        while parent is not None:
            depth, parent = depth + 1, store.folders.get(parent.parent_uid)
        if depth > MAX_DEPTH:
            raise Fail(400, {"message": "Maximum nested folder depth reached",
                             "messageId": "folder.maximum-depth-reached", "statusCode": 400})
    clash = _title_clash(store, title, parent_uid)
    if clash is not None:
        raise clash
    stamp = now()
    folder = FolderRow(store.next_id(), uid or store.new_uid(), title, parent_uid, 1, stamp, stamp,
                       principal.login, principal.login, str(body.get("description") or ""))
    store.folders[folder.uid] = folder
    return 200, folder_object(store, folder, req)


def update_folder(store: Store, req: Request, uid: str) -> Reply:
    principal = require_writer(req, store.flavor, "folders:write")
    folder = store.folders.get(uid)
    if folder is None:
        raise Fail(404, NOT_FOUND)
    body = req.json()
    if not isinstance(body, dict):
        raise bad_request()
    version = body.get("version") if isinstance(body.get("version"), int) else 0
    if version != folder.version and not body.get("overwrite"):
        raise Fail(412, VERSION_MISMATCH)
    title = str(body.get("title") or "").strip() or folder.title
    clash = _title_clash(store, title, folder.parent_uid, self_uid=uid)
    if clash is not None:
        raise clash
    folder.title, folder.version = title, folder.version + 1
    folder.updated, folder.updated_by = now(), principal.login
    if "description" in body:
        folder.description = str(body["description"] or "")
    return 200, folder_object(store, folder, req)


def delete_folder(store: Store, req: Request, uid: str) -> Reply:
    require_writer(req, store.flavor, "folders:delete")
    folder = store.folders.get(uid)
    if folder is None:
        raise Fail(404, NOT_FOUND)
    doomed = {uid}
    grew = True
    while grew:
        more = {f.uid for f in store.folders.values() if f.parent_uid in doomed} - doomed
        doomed |= more
        grew = bool(more)
    for gone in doomed:
        del store.folders[gone]
    for row in [d for d in store.dashboards.values() if d.folder_uid in doomed]:
        del store.dashboards[row.uid]
    if store.flavor.folder_delete_answer == "titled":
        return 200, {"title": folder.title, "message": f"Folder {folder.title} deleted", "id": folder.id}
    return 200, {"message": "Folder deleted"}
