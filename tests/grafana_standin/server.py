"""The stand-in's HTTP side: routing, authentication (§9), health (§7), faults and a request log.

Faults are the one thing real Grafana does not do on purpose: they stand for what sits between a client
and Grafana (a proxy answering HTML, a slow network, a database failing) and for changes a person makes
while a sync runs. Everything else answers as the contract says.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from gpudash.stack.loopback import LoopbackHTTPServer

from . import apis, dashboards, datasources, folders, search
from .flavor import Flavor
from .migrate import UI_MODEL_KEYS
from .store import DashboardRow, Fail, FolderRow, Principal, Request, Store, now
from .v2_schema import is_v2, v1_to_v2

Handler = Callable[..., tuple[int, Any]]
UID = r"([^/]+)"
ROUTES: list[tuple[str, re.Pattern[str], Handler]] = [
    ("GET", re.compile(r"/api/search"), search.search),
    ("POST", re.compile(r"/api/dashboards/db"), dashboards.post_db),
    ("GET", re.compile(rf"/api/dashboards/uid/{UID}/versions"), dashboards.list_versions),
    ("GET", re.compile(rf"/api/dashboards/uid/{UID}/versions/(\d+)"), dashboards.get_version),
    ("POST", re.compile(rf"/api/dashboards/uid/{UID}/restore"), dashboards.restore),
    ("GET", re.compile(rf"/api/dashboards/uid/{UID}"), dashboards.get_by_uid),
    ("DELETE", re.compile(rf"/api/dashboards/uid/{UID}"), dashboards.delete_by_uid),
    ("GET", re.compile(r"/api/folders"), folders.list_folders),
    ("POST", re.compile(r"/api/folders"), folders.create_folder),
    ("GET", re.compile(r"/api/folders/id/(\d+)"), folders.get_folder_by_id),
    ("GET", re.compile(rf"/api/folders/{UID}"), folders.get_folder),
    ("PUT", re.compile(rf"/api/folders/{UID}"), folders.update_folder),
    ("DELETE", re.compile(rf"/api/folders/{UID}"), folders.delete_folder),
    ("GET", re.compile(r"/api/datasources"), datasources.list_datasources),
    ("POST", re.compile(r"/api/datasources"), datasources.create),
    ("GET", re.compile(rf"/api/datasources/uid/{UID}"), datasources.get_by_uid),
    ("GET", re.compile(rf"/api/datasources/name/{UID}"), datasources.get_by_name),
    ("PUT", re.compile(rf"/api/datasources/uid/{UID}"), datasources.update),
    ("DELETE", re.compile(rf"/api/datasources/uid/{UID}"), datasources.delete),
]


@dataclass
class Fault:
    """Answer `method path` (prefix) differently, `times` times (-1: always)."""

    method: str
    path: str
    status: int = 0  # 0: answer normally after `delay` and `before`
    body: Any = None
    raw: bytes | None = None
    content_type: str = "application/json"
    delay: float = 0.0
    times: int = 1
    before: Callable[[StandIn], None] | None = None


@dataclass(frozen=True)
class Logged:
    method: str
    path: str
    query: str
    status: int
    auth_scheme: str  # "Bearer", "Basic" or "" (the credential itself is never kept)


def go_json(value: Any, pretty: bool = False) -> bytes:
    """JSON as Go's encoder writes it: <, > and & escaped."""
    text = json.dumps(value, indent=2 if pretty else None, separators=None if pretty else (",", ":"),
                      ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").encode("utf-8")


def _as_legacy(method: str, path: str) -> list[tuple[str, str]]:
    """The request itself and, for /apis, the legacy /api request it stands for."""
    counterpart = apis.legacy_counterpart(method, path) if path.startswith("/apis/") else None
    return [(method, path)] + ([counterpart] if counterpart else [])


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        return  # a client that gave up (a timeout test) is not an error of the stand-in


@dataclass
class StandIn(LoopbackHTTPServer):
    """An in-process Grafana HTTP API for one version; `with StandIn("11.6.0") as grafana: grafana.url`."""

    server_class = _QuietServer  # not fields: no annotation
    poll_interval = 0.05

    version: str = "11.6.0"
    token: str = "glsa_standin_0123456789abcdef_0a1b2c3d"
    admin_password: str = "admin"
    namespace: str = "default"  # /apis namespace: "default" for org 1, "stacks-<id>" on Grafana Cloud
    dynamic_dashboards: bool = True  # 13.x: the editor saves v2 (flavor.Flavor.editor_saves_v2)
    log: list[Logged] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.flavor = Flavor(self.version, self.dynamic_dashboards)
        self.store = Store(self.flavor)
        self.store.namespace = self.namespace
        self.store.tokens[self.token] = Principal("sa-1-gpudash", "Admin")
        self.store.users["admin"] = (self.admin_password, Principal("admin", "Admin"))
        self.store.users["alice"] = ("alice", Principal("alice", "Editor"))  # the person saving from the UI
        self._log_lock = threading.Lock()
        self.received: list[tuple[str, str]] = []  # (method, path) as each request arrives

    # ------------------------------------------------------------------ answering on loopback (start, stop, url)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(_HTTPHandler):
            standin = owner

        return Handler

    # ------------------------------------------------------------------ observing

    @property
    def writes(self) -> int:
        """Write requests received (answered or not: one the client gave up on counts too)."""
        with self._log_lock:
            return sum(1 for method, _ in self.received if method not in ("GET", "HEAD"))

    def count(self, method: str, path_prefix: str = "/api/") -> int:
        """Requests of `method` under `path_prefix`; an /apis request counts as the /api one it stands for."""
        with self._log_lock:
            return sum(1 for m, path in self.received if any(
                mm == method and pp.startswith(path_prefix) for mm, pp in _as_legacy(m, path)))

    def reset_log(self) -> None:
        with self._log_lock:
            self.log.clear()
            self.received.clear()

    def fault(self, method: str, path: str, **kwargs: Any) -> Fault:
        added = Fault(method, path, **kwargs)
        with self._log_lock:
            self.faults.append(added)
        return added

    # ------------------------------------------------------------------ state, as a person or a file would set it

    def add_token(self, token: str, role: str = "Editor", denied_folders: tuple[str, ...] = ()) -> None:
        self.store.tokens[token] = Principal(f"sa-{role.lower()}", role, set(denied_folders))

    def add_user(self, login: str, password: str, role: str = "Editor") -> None:
        self.store.users[login] = (password, Principal(login, role))

    def add_folder(self, uid: str, title: str, parent_uid: str = "") -> None:
        with self.store.lock:
            stamp = now()
            self.store.folders[uid] = FolderRow(self.store.next_id(), uid, title, parent_uid, 1, stamp, stamp,
                                                "admin", "admin")

    def remove_folder(self, uid: str) -> None:
        with self.store.lock:
            self.store.folders.pop(uid, None)

    def add_dashboard(self, data: dict[str, Any], folder_uid: str = "", provisioned: bool = False,
                      allow_ui_updates: bool = False, login: str = "admin") -> DashboardRow:
        """Store a dashboard directly (file provisioning, an import by hand)."""
        with self.store.lock:
            row = dashboards.save_dashboard(self.store, login, copy.deepcopy(data), folder_uid, "", None,
                                            str(data.get("uid") or ""))
            row.provisioned, row.allow_ui_updates = provisioned, allow_ui_updates
            row.external_id = f"{row.uid}.json" if provisioned else ""
            return row

    def remove_dashboard(self, uid: str) -> None:
        """A person deleting the dashboard in the UI (its version history goes with it, contract §3)."""
        with self.store.lock:
            self.store.dashboards.pop(uid, None)
            self.store.starred.discard(uid)

    def ui_save(self, uid: str, change: Callable[[dict[str, Any]], None], login: str = "alice",
                change_v2: Callable[[dict[str, Any]], None] | None = None) -> int:
        """What a person saving from the dashboard editor does: the frontend's model, changed, as a new version
        (on 13 with dynamic dashboards: stored as v2, from the classic model `change` edits). A dashboard
        already stored as v2 is loaded through the v2 API, so the editor's model is its v2 spec, which
        `change_v2` edits; `change` must leave its classic form as it is."""
        with self.store.lock:
            row = self.store.dashboards[uid]
            as_v2 = self.flavor.editor_saves_v2
            data = {k: v for k, v in row.classic_json().items() if k in UI_MODEL_KEYS}
            if as_v2 and row.stored_version == "v2":
                before = copy.deepcopy(data)
                change(data)
                if data != before:
                    raise ValueError(f"{uid} is stored as v2 and edited in v2: give the edit as change_v2")
                # assumption: the editor writes back the v2 spec it loaded as it was, apart from the person's edit
                saved = {k: copy.deepcopy(v) for k, v in row.data.items() if k not in ("id", "uid", "version")}
                if change_v2 is not None:
                    change_v2(saved)
            else:
                change(data)
                data["title"] = str(data.get("title", row.title)).strip()
                saved = v1_to_v2(data) if as_v2 else data
            dashboards.save_dashboard(self.store, login, saved, row.folder_uid, "edited in the UI", row, row.uid,
                                      stored_version="v2" if as_v2 else "v0alpha1")
            return row.version

    def provision_file(self, path: Path) -> DashboardRow:
        """Grafana reading a dashboard file from its provisioning folder at start. Classic JSON is stored,
        provisioned; a v2 resource or spec is refused with Grafana 13's message (grafana#122663, #123607)."""
        data = json.loads(path.read_text())
        spec = data.get("spec") if isinstance(data.get("spec"), dict) else data
        if is_v2(spec):
            raise ValueError(f"{path}: dashboard appears to be in v2 format. Please use the "
                             f"/apis/dashboard.grafana.app/v2 API")
        return self.add_dashboard(data, provisioned=True)

    def dashboard(self, uid: str) -> dict[str, Any] | None:
        """The dashboard's classic JSON (one stored as v2 converted, as the legacy /api answers it)."""
        with self.store.lock:
            row = self.store.dashboards.get(uid)
            return row.classic_json() if row is not None else None

    # ------------------------------------------------------------------ answering

    def _take_fault(self, method: str, path: str) -> Fault | None:
        """A fault set on a route, or on the /api route an /apis request stands for."""
        seen = _as_legacy(method, path)
        with self._log_lock:
            for fault in self.faults:
                hit = any(fault.method == m and p.startswith(fault.path) for m, p in seen)
                if hit and fault.times != 0:
                    fault.times -= 1 if fault.times > 0 else 0
                    return fault
        return None

    def _authenticate(self, headers: dict[str, str]) -> Principal:
        errutil = self.flavor.errutil_bodies
        header = headers.get("authorization", "")
        scheme, _, value = header.partition(" ")
        token = ""
        if scheme.lower() == "bearer":
            token = value.strip()
        elif scheme.lower() == "basic":
            try:
                login, _, password = base64.b64decode(value.strip()).decode("utf-8").partition(":")
            except (binascii.Error, UnicodeDecodeError):
                login, password = "", ""
            if login == "api_key":
                token = password
            else:
                known = self.store.users.get(login)
                if known is not None and known[0] == password:
                    return known[1]
                body: dict[str, Any] = {"message": "Invalid username or password"}
                if errutil:
                    body.update(messageId="password-auth.failed", statusCode=401)
                raise Fail(401, body)
        if token:
            if token in self.store.tokens:
                return self.store.tokens[token]
            body = {"message": "Invalid API key"}
            if errutil:
                body.update(messageId="api-key.invalid", statusCode=401)
            raise Fail(401, body)
        if errutil:
            raise Fail(401, {"message": "Unauthorized", "messageId": "auth.unauthorized", "statusCode": 401,
                             "traceID": ""})
        raise Fail(401, {"message": "Unauthorized"})

    def handle(self, method: str, path: str, query: str, body: bytes,
               headers: dict[str, str]) -> tuple[int, bytes, str]:
        with self._log_lock:
            self.received.append((method, path))
        fault = self._take_fault(method, path)
        if fault is not None:
            if fault.delay:
                time.sleep(fault.delay)
            if fault.before is not None:
                fault.before(self)
            if fault.status:
                raw = fault.raw if fault.raw is not None else go_json(fault.body)
                return self._logged(method, path, query, headers, fault.status, raw, fault.content_type)
        if path == "/api/health" and method in ("GET", "HEAD"):
            health = {"commit": "0123abc", "database": "ok", "version": self.version}
            return self._logged(method, path, query, headers, 200, go_json(health, pretty=True), "application/json")
        try:
            principal = self._authenticate(headers)
            request = Request(method, path, query, body, headers, principal)
            if path == "/api/frontend/settings" and method == "GET":
                status, answer = 200, {"buildInfo": {"version": self.version, "commit": "0123abc",
                                                     "edition": "Open Source", "env": "production"}}
            elif path == "/apis" or path.startswith("/apis/"):
                with self.store.lock:
                    status, answer = apis.route(self.store, request)
            else:
                status, answer = self._route(method, path, request)
        except Fail as fail:
            status, answer = fail.status, fail.body
        return self._logged(method, path, query, headers, status, go_json(answer), "application/json")

    def _route(self, method: str, path: str, request: Request) -> tuple[int, Any]:
        for verb, pattern, handler in ROUTES:
            match = pattern.fullmatch(path)
            if match and verb == method:
                with self.store.lock:
                    return handler(self.store, request, *match.groups())
        raise Fail(404, {"message": "Not found"})

    def _logged(self, method: str, path: str, query: str, headers: dict[str, str], status: int, raw: bytes,
                content_type: str) -> tuple[int, bytes, str]:
        scheme = headers.get("authorization", "").partition(" ")[0]
        with self._log_lock:
            self.log.append(Logged(method, path, query, status, scheme))
        return status, raw, content_type


class _HTTPHandler(BaseHTTPRequestHandler):
    standin: StandIn  # the stand-in answering, set by StandIn._handler
    protocol_version = "HTTP/1.1"
    server_version = "Grafana"
    disable_nagle_algorithm = True  # as Go's net/http does; otherwise each answer waits out a delayed ACK

    def _answer(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        path, _, query = self.path.partition("?")
        headers = {key.lower(): value for key, value in self.headers.items()}
        status, raw, content_type = self.standin.handle(method, path, query, body, headers)
        self.send_response(status)
        self.send_header("Content-Type", f"{content_type}; charset=UTF-8" if "json" in content_type else content_type)
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        if method != "HEAD":
            self.wfile.write(raw)

    def do_GET(self) -> None:
        self._answer("GET")

    def do_HEAD(self) -> None:
        self._answer("HEAD")

    def do_POST(self) -> None:
        self._answer("POST")

    def do_PUT(self) -> None:
        self._answer("PUT")

    def do_DELETE(self) -> None:
        self._answer("DELETE")

    def log_message(self, format: str, *args: Any) -> None:
        return
