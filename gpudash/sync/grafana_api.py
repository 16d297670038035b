"""The connection to Grafana: settings from the environment and flags, and one guarded way to call it.

Every request goes through `Grafana.call`, which wraps a grafana-client call, gives it a deadline for the
whole request (gpudash.deadline: niquests' timeout is per read), retries what is safe to retry (reads on
any transport failure or 5xx, writes on 5xx) with bounded exponential backoff, and turns whatever went
wrong into one line naming the object and what the server said. The token and password are held only
here and never appear in a message or a log record: what the server said enters a message only through
`Secrets.printable` (gpudash.redaction), which masks them in any spelling before cutting. No answer is read
past 16 MiB (gpudash.answer_size).
"""

from __future__ import annotations

import functools
import logging
import re
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from threading import Lock
from typing import Any, TypeVar
from urllib.parse import urlsplit

import niquests
import niquests.exceptions
from grafana_client import GrafanaApi
from grafana_client.client import GrafanaException, GrafanaTimeoutError

from gpudash import __version__
from gpudash.answer_size import GRAFANA_ANSWER, UnreadableAnswer, answer_hook
from gpudash.deadline import DeadlineExceeded, within
from gpudash.errors import ConfigError, DriftError, RemoteError
from gpudash.redaction import Secrets, snippet, split_userinfo
from gpudash.secret_files import warn_if_readable_by_others

log = logging.getLogger("gpudash.sync")
T = TypeVar("T")

DEFAULT_TIMEOUT = 10.0
DEFAULT_RETRIES = 3
SETUP_HINT = ("set GRAFANA_URL (e.g. GRAFANA_URL=http://grafana:3000) and GRAFANA_TOKEN (a service-account "
              "token), or GRAFANA_USER and GRAFANA_PASSWORD; or pass --url")
# Statuses that concern one object: the run goes on with the next one. Anything else stops it.
PER_OBJECT_STATUSES = frozenset({400, 404, 409, 412, 422})
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


@dataclass(frozen=True)
class Connection:
    """Where Grafana is and how to authenticate. `url` never carries credentials."""

    url: str
    token: str = field(default="", repr=False)
    user: str = ""
    password: str = field(default="", repr=False)
    ca_file: Path | None = None
    timeout: float = DEFAULT_TIMEOUT
    org_id: int | None = None
    retries: int = DEFAULT_RETRIES
    backoff: float = 0.25  # seconds before the first retry; doubles each time, at most 4 s
    read_timeout: float | None = None  # seconds to wait for each read; None: `timeout`, the whole request's
    namespace: str = ""  # /apis namespace; "": `default` for org 1, `org-<id>` otherwise (Cloud: stacks-<id>)

    @property
    def apis_namespace(self) -> str:
        if self.namespace:
            return self.namespace
        return "default" if self.org_id in (None, 1) else f"org-{self.org_id}"

    @functools.cached_property  # every redaction reads it: each spelling of the secrets, worked out once
    def secrets(self) -> Secrets:
        return Secrets.of(self.user, self.password, self.token)


def _read_secret(path: Path, what: str) -> str:
    try:
        secret = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the {what}: {exc.strerror}") from exc
    warn_if_readable_by_others(path, f"Grafana {what}")
    return secret


def connection_from(env: Mapping[str, str], *, url: str | None = None, user: str | None = None,
                    token_file: Path | None = None, password_file: Path | None = None,
                    ca_file: Path | None = None, timeout: float | None = None, org_id: int | None = None,
                    retries: int | None = None) -> Connection:
    """GRAFANA_URL, GRAFANA_TOKEN or GRAFANA_USER/GRAFANA_PASSWORD, GRAFANA_ORG_ID; flags win."""
    raw_url = url or env.get("GRAFANA_URL", "")
    if not raw_url.strip():
        raise ConfigError(f"GRAFANA_URL is not set: {SETUP_HINT}")
    parts = urlsplit(raw_url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"GRAFANA_URL: expected http(s)://host[:port][/path], got {parts.scheme or 'no'} scheme"
                          f" and host {parts.hostname or 'none'}")
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError as exc:
        raise ConfigError("GRAFANA_URL: the port is not a number") from exc
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname  # IPv6 literal
    display = f"{parts.scheme}://{host}{port}{parts.path.rstrip('/')}"
    token = _read_secret(token_file, "token") if token_file else env.get("GRAFANA_TOKEN", "").strip()
    in_url = split_userinfo(raw_url.strip())  # percent-decoded: p%40ss is the password p@ss
    login = user or env.get("GRAFANA_USER", "") or in_url.user
    if password_file:
        password = _read_secret(password_file, "password")
    else:
        password = env.get("GRAFANA_PASSWORD", "") or in_url.password
    if token and (user or password_file):
        token = ""  # flags for basic auth win over a token from the environment
    if not token and not (login and password):
        missing = "GRAFANA_PASSWORD" if login else "GRAFANA_TOKEN"
        raise ConfigError(f"{missing} is not set: {SETUP_HINT}")
    if ca_file is not None and not ca_file.is_file():
        raise ConfigError(f"{ca_file}: --ca-file: no such file")
    org_text = env.get("GRAFANA_ORG_ID", "")
    if org_id is None and org_text:
        if not (org_text.isascii() and org_text.isdigit()):  # isdigit() alone takes a fullwidth or superscript 2
            raise ConfigError(f"GRAFANA_ORG_ID: expected a whole number, got {org_text!r}")
        org_id = int(org_text)
    namespace = env.get("GRAFANA_NAMESPACE", "").strip()
    if namespace and not _NAMESPACE.fullmatch(namespace):
        raise ConfigError(f"GRAFANA_NAMESPACE: expected a Kubernetes namespace such as stacks-12345, got "
                          f"{snippet(namespace, 40)!r}")
    return Connection(display, token, "" if token else login, "" if token else password, ca_file,
                      DEFAULT_TIMEOUT if timeout is None else timeout, org_id,
                      DEFAULT_RETRIES if retries is None else retries, namespace=namespace)


class GrafanaFailure(RemoteError):
    """Grafana refused or could not be reached. `per_object`: the next object may still succeed."""

    def __init__(self, message: str, status: int = 0, keyword: str = "", per_object: bool = False,
                 said: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.keyword = keyword
        self.per_object = per_object
        self.said = said


class ChangedMeanwhile(DriftError):
    """Someone saved the object between gpudash's read and its write: 412 version-mismatch (and 409 "Dashboard
    already exists" from 13.1) on /api, 409 Conflict (a stale resourceVersion) or AlreadyExists on /apis."""

    per_object = True
    status = 412


@dataclass(frozen=True)
class _Trouble:
    status: int  # 0: no HTTP answer
    said: str  # what the server said, or what happened on the way
    keyword: str = ""
    transport: bool = False


def _body_text(body: Any, status: int, secrets: Secrets) -> tuple[str, str]:
    """(message, keyword) from an error body, fit for a message; says so when the body was not JSON."""
    if isinstance(body, dict) and body.get("kind") == "Status":  # /apis: a Kubernetes Status; `reason` says what
        return secrets.printable(str(body.get("message") or ""), 300) or f"no message in the {status} answer", \
            secrets.printable(str(body.get("reason") or ""), 80)
    if isinstance(body, dict):
        message = secrets.printable(str(body.get("message") or body.get("title") or ""), 300)
        keyword = secrets.printable(str(body.get("status") or body.get("messageId") or ""), 80)
        return message or f"no message in the {status} answer", keyword
    text = body if isinstance(body, str) else ""
    if not text.strip():
        return "an empty body", ""
    return f"a body that is not JSON: {secrets.printable(text, 80)!r}", "non-json"


def _changed_meanwhile(status: int, keyword: str, said: str) -> bool:
    """The answers that mean "saved by someone else since gpudash read it", on /api and on /apis."""
    return ((status, keyword) in ((412, "version-mismatch"), (409, "Conflict"), (409, "AlreadyExists"))
            or (status == 409 and "use overwrite flag" in said.lower()))


def _refused(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ConnectionRefusedError) or "refused" in str(seen).lower():
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class Grafana:
    """A grafana-client `GrafanaApi` plus retries, error mapping, request counts and redaction."""

    def __init__(self, connection: Connection, sleep: Callable[[float], None] = time.sleep) -> None:
        self.connection = connection
        self._sleep = sleep
        self._read_timeout = connection.timeout if connection.read_timeout is None else connection.read_timeout
        self.api = self._connect()
        self.requests: Counter[str] = Counter()
        self._lock = Lock()

    def _connect(self) -> GrafanaApi:
        """A client with a session of its own (callers reach it as `self.api` at each request)."""
        connection = self.connection
        parts = urlsplit(connection.url)
        prefix = parts.path.strip("/")
        credential: Any = connection.token or (connection.user, connection.password)
        host = parts.hostname or ""
        api = GrafanaApi(
            auth=credential, host=f"[{host}]" if ":" in host else host, port=parts.port, protocol=parts.scheme,
            url_path_prefix=f"{prefix}/" if prefix else "",
            verify=str(connection.ca_file) if connection.ca_file else True,
            timeout=self._read_timeout, organization_id=connection.org_id, user_agent=f"gpudash/{__version__}",
        )
        api.client.s.hooks["response"].append(answer_hook(lambda url: GRAFANA_ANSWER))
        return api

    @property
    def writes(self) -> int:
        return sum(n for method, n in self.requests.items() if method != "GET")

    def redact(self, text: str) -> str:
        return self.connection.secrets.redact(text)

    def printable(self, text: str, limit: int = 200) -> str:
        """What Grafana said (or an exception about it), fit for a message: see Secrets.printable."""
        return self.connection.secrets.printable(text, limit)

    def call(self, what: str, method: str, path: str, request: Callable[[], T]) -> T:
        """Run one request (`request` makes exactly one), retrying what is safe; raise one clear line."""
        attempts = 1 + max(0, self.connection.retries)
        for attempt in range(1, attempts + 1):
            with self._lock:
                self.requests[method] += 1
            started = time.monotonic()
            try:
                result = within(self.connection.timeout, request, name=f"grafana {method} {path}")
            except UnreadableAnswer as exc:
                raise GrafanaFailure(f"{what}: {exc.message}" if what else exc.message) from None
            except (GrafanaException, niquests.exceptions.RequestException, ValueError, DeadlineExceeded) as exc:
                if isinstance(exc, DeadlineExceeded):
                    self.api = self._connect()  # the abandoned request still holds its connection: never reuse it
                trouble = self._classify(exc)
                took = (time.monotonic() - started) * 1000
                log.debug("%s %s failed in %.0f ms: %s %s", method, path, took, trouble.status or "-", trouble.said)
                retry = trouble.status >= 500 or (method == "GET" and trouble.transport)
                if retry and attempt < attempts:
                    pause = min(4.0, self.connection.backoff * 2 ** (attempt - 1))
                    log.info("%s %s: %s; retry %d of %d in %.2f s", method, path, trouble.said, attempt,
                             attempts - 1, pause)
                    self._sleep(pause)
                    continue
                raise self._failure(what, trouble, attempt) from None
            log.debug("%s %s ok in %.0f ms", method, path, (time.monotonic() - started) * 1000)
            return result
        raise AssertionError("unreachable")

    def expect(self, what: str, value: Any, kind: type) -> Any:
        """A 2xx answer of the wrong shape (an HTML login page behind a proxy, say) as one line."""
        if isinstance(value, kind):
            return value
        shown = f"{self.printable(value, 80)!r}" if isinstance(value, str) else type(value).__name__
        prefix = f"{what}: " if what else ""
        raise GrafanaFailure(
            f"{prefix}Grafana at {self.connection.url} answered with a body that is not the expected JSON: "
            f"{shown} (is GRAFANA_URL the Grafana root URL?)")

    def _classify(self, exc: BaseException) -> _Trouble:
        if isinstance(exc, DeadlineExceeded):
            return _Trouble(0, f"no answer within {exc.seconds:g} s (timeout)", "timeout", True)
        if isinstance(exc, (GrafanaTimeoutError, niquests.exceptions.Timeout)):
            return _Trouble(0, f"no answer within {self._read_timeout:g} s (timeout)", "timeout", True)
        if isinstance(exc, GrafanaException) and exc.status_code:
            message, keyword = _body_text(exc.response, exc.status_code, self.connection.secrets)
            return _Trouble(int(exc.status_code), message, keyword)
        if isinstance(exc, (niquests.exceptions.InvalidJSONError, ValueError)):
            doc = getattr(exc, "doc", "")
            return _Trouble(200, f"a body that is not JSON: {self.printable(str(doc), 80)!r}", "non-json")
        if isinstance(exc, niquests.exceptions.SSLError) or "certificate" in str(exc).lower():
            return _Trouble(0, f"TLS verification failed ({self.printable(str(exc), 120)}); pass --ca-file", "tls",
                            True)
        if _refused(exc):
            return _Trouble(0, "connection refused", "refused", True)
        return _Trouble(0, f"request failed: {self.printable(str(exc), 160)}", "transport", True)

    def _failure(self, what: str, trouble: _Trouble, attempts: int) -> GrafanaFailure | ChangedMeanwhile:
        """One line: `what` (empty for the up-front check, which names Grafana instead), then what happened (`said`,
        already fit for a message)."""
        url = self.connection.url
        prefix, grafana = (f"{what}: ", "Grafana") if what else ("", f"Grafana at {url}")
        tries = f" (tried {attempts} times)" if attempts > 1 else ""
        status, said = trouble.status, trouble.said
        if _changed_meanwhile(status, trouble.keyword, said):
            return ChangedMeanwhile(
                f"{prefix}changed in Grafana while gpudash was writing it ({status} {trouble.keyword or 'conflict'}"
                f": {said}); run `gpudash sync` again to see the change")
        if status == 0:
            text = f"{prefix}cannot reach Grafana at {url}: {said}{tries}"
            if trouble.keyword == "refused":
                text += "; is Grafana running and GRAFANA_URL right?"
            elif trouble.keyword == "timeout":
                text += "; raise --timeout or check the server"
            return GrafanaFailure(text, 0, trouble.keyword, said=said)
        hint = {
            401: "; check GRAFANA_TOKEN (or GRAFANA_USER and GRAFANA_PASSWORD)",
            403: "; the token's role lacks the permission (Editor for dashboards and folders, Admin for data "
                 "sources)",
        }.get(status, "")
        if trouble.keyword == "name-exists":
            hint = "; another dashboard in that folder has the same title: rename or delete one of them"
        elif trouble.keyword == "name-match":
            hint = "; a folder has the same title: rename the dashboard or the folder"
        elif "provisioned" in said.lower():
            hint = "; it is provisioned from files on the Grafana server: change it there"
        if trouble.keyword == "non-json":
            text = f"{prefix}Grafana at {url} answered {status} with {said}{tries}"
        else:
            keyword = f" {trouble.keyword}" if trouble.keyword and trouble.keyword != said else ""
            text = f"{prefix}{grafana} answered {status}{keyword}: {said}{tries}{hint}"
        return GrafanaFailure(text, status, trouble.keyword, status in PER_OBJECT_STATUSES, said)
