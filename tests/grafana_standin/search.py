"""GET /api/search (§4 of the contract)."""

from __future__ import annotations

from typing import Any

from .store import Fail, FolderRow, Request, Store, slugify

MAX_LIMIT = 5000
DEFAULT_LIMIT = 1000


def _folder_fields(store: Store, uid: str) -> dict[str, Any]:
    if uid not in store.folders:
        return {}
    folder = store.folders[uid]
    return {"folderId": folder.id, "folderUid": folder.uid, "folderTitle": folder.title, "folderUrl": folder.url}


def _folder_hit(store: Store, folder: FolderRow) -> dict[str, Any]:
    hit: dict[str, Any] = {"id": folder.id, "uid": folder.uid, "title": folder.title,
                           "uri": f"db/{slugify(folder.title)}", "url": folder.url, "slug": "",
                           "type": "dash-folder", "tags": [], "isStarred": False, "sortMeta": 0}
    if folder.parent_uid:
        hit.update(_folder_fields(store, folder.parent_uid))
    return hit


def search(store: Store, req: Request) -> tuple[int, Any]:
    flavor, query = store.flavor, req.query
    dashboard_uids = query.get("dashboardUIDs", []) + query.get("dashboardUID", [])
    dashboard_ids = query.get("dashboardIds", [])
    folder_uids = query.get("folderUIDs", []) if flavor.search_folder_uids else []
    folder_ids = query.get("folderIds", [])
    if (dashboard_uids and dashboard_ids) or (folder_uids and folder_ids):
        raise Fail(400, {"message": "search supports UIDs or IDs, not both"})
    limit = req.int_arg("limit", 0) or DEFAULT_LIMIT
    if limit > MAX_LIMIT:
        raise Fail(422, {"message": "Limit is above maximum allowed (5000), use page parameter to access hits "
                                    "beyond limit"})
    page = max(1, req.int_arg("page", 1))
    kind = req.arg("type")
    if kind not in ("", "dash-db", "dash-folder"):
        if flavor.search_unknown_type_fails:
            raise Fail(500, {"message": "Search failed"})
        kind = ""
    text = req.arg("query").lower()
    tags = query.get("tag", [])
    starred = req.arg("starred") == "true"
    wanted_folders = set(folder_uids) | {f.uid for f in store.folders.values() if str(f.id) in folder_ids}

    folders: list[dict[str, Any]] = []
    if kind in ("", "dash-folder") and not tags and not starred and not dashboard_uids and not dashboard_ids:
        for folder in store.folders.values():
            if wanted_folders:
                inside = folder.parent_uid in wanted_folders
                itself = (flavor.search_folder_ids_lists_folder_itself and kind == "dash-folder"
                          and str(folder.id) in folder_ids)
                if not (inside or itself):
                    continue
            if text in folder.title.lower():
                folders.append(_folder_hit(store, folder))
    boards: list[dict[str, Any]] = []
    if kind in ("", "dash-db"):
        for row in store.dashboards.values():
            row_tags = sorted(str(t) for t in row.data.get("tags") or [])
            if (text not in row.title.lower() or not set(tags) <= set(row_tags)
                    or (dashboard_uids and row.uid not in dashboard_uids)
                    or (dashboard_ids and str(row.id) not in dashboard_ids)
                    or (wanted_folders and row.folder_uid not in wanted_folders)
                    or (starred and row.uid not in store.starred)):
                continue
            hit: dict[str, Any] = {"id": row.id, "uid": row.uid, "title": row.title, "uri": f"db/{row.slug}",
                                   "url": row.url, "slug": "", "type": "dash-db", "tags": row_tags,
                                   "isStarred": row.uid in store.starred, "sortMeta": 0}
            hit.update(_folder_fields(store, row.folder_uid))
            boards.append(hit)
    sort = req.arg("sort")
    if sort in ("alpha-asc", "alpha-desc"):
        hits = sorted(folders + boards, key=lambda h: str(h["title"]).lower(), reverse=sort == "alpha-desc")
    else:
        hits = sorted(folders, key=lambda h: str(h["title"]).lower()) + sorted(
            boards, key=lambda h: str(h["title"]).lower())
    return 200, hits[(page - 1) * limit: page * limit]
