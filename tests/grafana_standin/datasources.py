"""Data source routes (§6 of the contract)."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urlsplit

from .store import DatasourceRow, Fail, Request, Store, bad_request, require_writer

Reply = tuple[int, Any]
NOT_FOUND = {"message": "Data source not found"}
TYPE_NAMES = {"prometheus": "Prometheus", "loki": "Loki"}


def _full(store: Store, ds: DatasourceRow) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": ds.id, "uid": ds.uid, "orgId": 1, "name": ds.name, "type": ds.type,
        "typeLogoUrl": f"public/app/plugins/datasource/{ds.type}/img/{ds.type}_logo.svg", "access": ds.access,
        "url": ds.url, "user": ds.user, "database": ds.database, "basicAuth": ds.basic_auth,
        "basicAuthUser": ds.basic_auth_user, "withCredentials": ds.with_credentials, "isDefault": ds.is_default,
        "jsonData": dict(ds.json_data), "secureJsonFields": dict(ds.secure_fields), "version": ds.version,
        "readOnly": ds.read_only,
    }
    if store.flavor.datasource_legacy_password_fields:
        body.update(password="", basicAuthPassword="")
    if store.flavor.api_version_field:
        body["apiVersion"] = ""
    return body


def _item(ds: DatasourceRow) -> dict[str, Any]:
    return {"id": ds.id, "uid": ds.uid, "orgId": 1, "name": ds.name, "type": ds.type,
            "typeName": TYPE_NAMES.get(ds.type, ds.type), "typeLogoUrl": "", "access": ds.access, "url": ds.url,
            "user": ds.user, "database": ds.database, "basicAuth": ds.basic_auth, "isDefault": ds.is_default,
            "jsonData": dict(ds.json_data), "readOnly": ds.read_only}


def list_datasources(store: Store, req: Request) -> Reply:
    return 200, [_item(ds) for ds in sorted(store.datasources.values(), key=lambda d: d.name.lower())]


def get_by_uid(store: Store, req: Request, uid: str) -> Reply:
    ds = store.datasources.get(unquote(uid))
    if ds is None:
        raise Fail(404, NOT_FOUND)
    return 200, _full(store, ds)


def get_by_name(store: Store, req: Request, name: str) -> Reply:
    ds = next((d for d in store.datasources.values() if d.name == unquote(name)), None)
    if ds is None:
        raise Fail(404, NOT_FOUND)
    return 200, _full(store, ds)


def _valid_url(url: str) -> bool:
    if not url:
        return True
    parts = urlsplit(url)
    return bool(parts.scheme and parts.netloc)


def _apply(ds: DatasourceRow, body: dict[str, Any]) -> None:
    """PUT replaces: jsonData and flags are rewritten; empty strings for url/type/access/name are skipped."""
    for key in ("name", "type", "access", "url"):
        if body.get(key):
            setattr(ds, key, str(body[key]))
    ds.user = str(body.get("user") or "")
    ds.database = str(body.get("database") or "")
    ds.basic_auth = bool(body.get("basicAuth"))
    ds.basic_auth_user = str(body.get("basicAuthUser") or "")
    ds.with_credentials = bool(body.get("withCredentials"))
    ds.is_default = bool(body.get("isDefault"))
    ds.json_data = dict(body.get("jsonData") or {})
    for key in (body.get("secureJsonData") or {}):
        ds.secure_fields[str(key)] = True


def create(store: Store, req: Request) -> Reply:
    require_writer(req, store.flavor, "datasources:create", admin=True)
    body = req.json()
    if not isinstance(body, dict):
        raise bad_request()
    if not _valid_url(str(body.get("url") or "")):
        raise Fail(400, {"message": "Validation error, invalid URL"})
    name, uid = str(body.get("name") or ""), str(body.get("uid") or "")
    if any(d.name == name for d in store.datasources.values()):
        raise Fail(409, {"message": "data source with the same name already exists", "traceID": ""})
    if uid and uid in store.datasources:
        raise Fail(409, {"message": "data source with the same uid already exists", "traceID": ""})
    ds = DatasourceRow(store.next_id(), uid or store.new_uid(), name, str(body.get("type") or ""),
                       str(body.get("access") or "proxy"), "", 1)
    _apply(ds, body)
    if ds.is_default:
        for other in store.datasources.values():
            other.is_default = False
    store.datasources[ds.uid] = ds
    return 200, {"datasource": _full(store, ds), "id": ds.id, "message": "Datasource added", "name": ds.name}


def update(store: Store, req: Request, uid: str) -> Reply:
    require_writer(req, store.flavor, "datasources:write", admin=True)
    ds = store.datasources.get(unquote(uid))
    if ds is None:
        raise Fail(404, NOT_FOUND)
    if ds.read_only:
        raise Fail(403, {"message": "Cannot update read-only data source"})
    body = req.json()
    if not isinstance(body, dict):
        raise bad_request()
    if not _valid_url(str(body.get("url") or "")):
        raise Fail(400, {"message": "Validation error, invalid URL"})
    name = str(body.get("name") or "")
    if name and any(d.name == name and d.uid != ds.uid for d in store.datasources.values()):
        raise Fail(409, {"message": "Failed to update datasource: data source with the same name already exists"})
    version = body.get("version") if isinstance(body.get("version"), int) else 0
    if version and ds.version > version:
        raise Fail(409, {"message": "Datasource has already been updated by someone else. Please reload and try again"})
    _apply(ds, body)
    ds.version = version + 1 if version else 1
    if ds.is_default:
        for other in store.datasources.values():
            other.is_default = other is ds
    return 200, {"datasource": _full(store, ds), "id": ds.id, "message": "Datasource updated", "name": ds.name}


def delete(store: Store, req: Request, uid: str) -> Reply:
    require_writer(req, store.flavor, "datasources:delete", admin=True)
    ds = store.datasources.get(unquote(uid))
    if ds is None:
        raise Fail(404, NOT_FOUND)
    if ds.read_only:
        raise Fail(403, {"message": "Cannot delete read-only data source"})
    del store.datasources[ds.uid]
    return 200, {"message": "Data source deleted", "id": ds.id}
