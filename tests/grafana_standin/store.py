"""The stand-in's state (one org) and the pieces every route shares: errors, requests, permissions."""

from __future__ import annotations

import copy
import json
import re
import threading
import zlib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any
from urllib.parse import parse_qs

from .flavor import Flavor
from .v2_schema import v2_to_v1

UID_CHARS = re.compile(r"^[a-zA-Z0-9_-]*$")
_SLUG = re.compile(r"[^a-z0-9]+")
_DURATION = re.compile(r"^(\d+)(ms|s|m|h|d|w|M|y)$")
_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "M": 2592000, "y": 31536000}
MIN_REFRESH = "5s"
VERSIONS_TO_KEEP = 20


def slugify(title: str) -> str:
    return _SLUG.sub("-", title.lower()).strip("-")


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def clamp_refresh(value: Any) -> Any:
    if isinstance(value, str):
        match = _DURATION.match(value.strip())
        if match and int(match.group(1)) * _SECONDS[match.group(2)] < 5:
            return MIN_REFRESH
    return value


class Fail(Exception):
    """An HTTP error answer: status and the exact JSON body the contract gives."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(status, body)
        self.status = status
        self.body = body


def bad_request() -> Fail:
    return Fail(400, {"message": "bad request data"})


@dataclass
class Principal:
    login: str
    role: str = "Admin"  # Admin | Editor | Viewer
    denied_folders: set[str] = field(default_factory=set)  # no save right inside these folders ("" = root)

    def can_write(self) -> bool:
        return self.role in ("Admin", "Editor")


@dataclass
class Request:
    method: str
    path: str
    query_string: str
    body: bytes
    headers: dict[str, str]
    principal: Principal | None = None

    @property
    def query(self) -> dict[str, list[str]]:
        return parse_qs(self.query_string, keep_blank_values=True)

    def arg(self, name: str, default: str = "") -> str:
        values = self.query.get(name)
        return values[0] if values else default

    def int_arg(self, name: str, default: int) -> int:
        text = self.arg(name)
        try:
            return int(text) if text else default
        except ValueError:
            return default

    def json(self) -> Any:
        try:
            return json.loads(self.body.decode("utf-8")) if self.body else None
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise bad_request() from None


@dataclass
class VersionRow:
    version: int
    data: dict[str, Any]
    message: str
    created: str
    created_by: str
    parent_version: int
    restored_from: int = 0


@dataclass
class DashboardRow:
    id: int
    uid: str
    title: str
    folder_uid: str
    version: int
    data: dict[str, Any]
    created: str
    updated: str
    created_by: str
    updated_by: str
    provisioned: bool = False
    allow_ui_updates: bool = False
    external_id: str = ""
    plugin_id: str = ""
    history: list[VersionRow] = field(default_factory=list)
    # unified storage (13.x /apis): the k8s object's own fields
    resource_version: int = 0
    annotations: dict[str, str] = field(default_factory=dict)  # client-set ones; the folder lives in folder_uid
    stored_version: str = "v0alpha1"  # v0alpha1: written through /api or v0alpha1, unmigrated

    @property
    def k8s_uid(self) -> str:
        return f"0b9d1c52-{self.id:04d}-4a6e-9f1e-{zlib.crc32(self.uid.encode()):012d}"

    @property
    def slug(self) -> str:
        return slugify(self.title)

    @property
    def url(self) -> str:
        return f"/d/{self.uid}/{self.slug}"

    def stored_json(self) -> dict[str, Any]:
        data = copy.deepcopy(self.data)
        data.update(id=self.id, uid=self.uid, version=self.version)
        return data

    def classic_json(self) -> dict[str, Any]:
        """`stored_json`, a v2-stored dashboard converted to v1 (assumption: the legacy /api converts it, as
        one report says (issue #126641), rather than answering 406)."""
        if self.stored_version != "v2":
            return self.stored_json()
        data = v2_to_v1({k: v for k, v in self.data.items() if k not in ("id", "uid", "version")})
        data.update(id=self.id, uid=self.uid, version=self.version)
        return data


@dataclass
class FolderRow:
    id: int
    uid: str
    title: str
    parent_uid: str
    version: int
    created: str
    updated: str
    created_by: str
    updated_by: str
    description: str = ""

    @property
    def url(self) -> str:
        return f"/dashboards/f/{self.uid}/{slugify(self.title)}"


@dataclass
class DatasourceRow:
    id: int
    uid: str
    name: str
    type: str
    access: str
    url: str
    version: int
    read_only: bool = False
    user: str = ""
    database: str = ""
    basic_auth: bool = False
    basic_auth_user: str = ""
    with_credentials: bool = False
    is_default: bool = False
    json_data: dict[str, Any] = field(default_factory=dict)
    secure_fields: dict[str, bool] = field(default_factory=dict)


class Store:
    """Everything one Grafana org holds. Routes run one at a time under `lock`."""

    def __init__(self, flavor: Flavor) -> None:
        self.flavor = flavor
        self.lock = threading.RLock()
        self.dashboards: dict[str, DashboardRow] = {}
        self.folders: dict[str, FolderRow] = {}
        self.datasources: dict[str, DatasourceRow] = {}
        self.tokens: dict[str, Principal] = {}
        self.users: dict[str, tuple[str, Principal]] = {}
        self.quota: int | None = None
        self.starred: set[str] = set()
        self.namespace = "default"
        self._serial = 0
        self._resource_version = 1000

    def next_resource_version(self) -> int:
        """One counter for every object, as etcd's revision: opaque to clients, larger after each write."""
        self._resource_version += 1
        return self._resource_version

    def next_id(self) -> int:
        """Dashboards and folders share one id space, as rows of one table did up to 11."""
        self._serial += 1
        return self._serial

    def new_uid(self) -> str:
        self._serial += 1
        return self.flavor.generated_uid(self._serial)

    def folder_by_id(self, folder_id: int) -> FolderRow | None:
        return next((f for f in self.folders.values() if f.id == folder_id), None)

    def dashboard_by_id(self, dashboard_id: int) -> DashboardRow | None:
        return next((d for d in self.dashboards.values() if d.id == dashboard_id), None)

    def folder_title(self, uid: str) -> str:
        return self.folders[uid].title if uid in self.folders else "General"

    def folder_url(self, uid: str) -> str:
        return self.folders[uid].url if uid in self.folders else ""


def rbac_denied(flavor: Flavor, actions: str) -> Fail:
    """403 from the route-level permission check (before the handler runs)."""
    if not flavor.errutil_bodies:
        return Fail(403, {"message": "Permission denied"})
    return Fail(403, {"title": "Access denied", "accessErrorId": "ACE3190528714",
                      "message": f"You'll need additional permissions to perform this action. "
                                 f"Permissions needed: {actions}"})


def require_writer(req: Request, flavor: Flavor, actions: str, admin: bool = False) -> Principal:
    principal = req.principal
    assert principal is not None
    if not principal.can_write() or (admin and principal.role != "Admin"):
        raise rbac_denied(flavor, actions)
    return principal
