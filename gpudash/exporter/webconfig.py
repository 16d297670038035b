"""TLS and basic auth from a web-config file in the Prometheus exporter-toolkit format.

The same file node_exporter and dcgm-exporter take with ``--web.config.file``::

    tls_server_config:
      cert_file: server.crt          # relative paths are relative to this file
      key_file: server.key
      min_version: TLS12             # TLS10 | TLS11 | TLS12 | TLS13
      client_auth_type: RequireAndVerifyClientCert   # or VerifyClientCertIfGiven, NoClientCert
      client_ca_file: ca.crt
    http_server_config:
      headers: {X-Frame-Options: deny}
    basic_auth_users:
      prometheus: $2y$10$...         # bcrypt hash, as `htpasswd -nBC 10 "" | tr -d ':\\n'` prints

Passwords are checked with the ``bcrypt`` package when installed, else with the C library's crypt(3)
where it knows bcrypt (glibc with libxcrypt does). A correct password is remembered as a SHA-256 digest,
so a scrape every few seconds does not pay bcrypt's deliberate slowness each time.
"""

from __future__ import annotations

import hashlib
import hmac
import importlib
import logging
import re
import ssl
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpudash.errors import ExporterError

log = logging.getLogger("gpudash.exporter")

_BCRYPT = re.compile(r"^\$2[aby]?\$\d\d\$[./A-Za-z0-9]{53}$")
_TLS_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
_CLIENT_AUTH = {
    "": ssl.CERT_NONE,
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
_TLS_KEYS = {"cert_file", "key_file", "client_auth_type", "client_ca_file", "min_version", "max_version"}
_TLS_IGNORED = {"cipher_suites", "curve_preferences", "prefer_server_cipher_suites"}
_CACHE_LIMIT = 256

PasswordCheck = Callable[[str, str], bool]


@dataclass
class WebConfig:
    ssl_context: ssl.SSLContext | None = None
    users: dict[str, str] = field(default_factory=dict)  # user -> bcrypt hash
    headers: dict[str, str] = field(default_factory=dict)
    check_password: PasswordCheck | None = None
    _verified: set[bytes] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def authorized(self, user: str, password: str) -> bool:
        if not self.users:
            return True
        digest = hashlib.sha256(f"{user}\0{password}".encode()).digest()
        with self._lock:
            if digest in self._verified:
                return True
        stored = self.users.get(user)
        if stored is None or self.check_password is None or not self.check_password(password, stored):
            return False
        with self._lock:
            if len(self._verified) >= _CACHE_LIMIT:
                self._verified.clear()
            self._verified.add(digest)
        return True


def bcrypt_checker() -> PasswordCheck | None:
    """A bcrypt verifier from the bcrypt package or crypt(3); None when neither can do it."""
    try:
        bcrypt: Any = importlib.import_module("bcrypt")
        return lambda password, hashed: bool(bcrypt.checkpw(password.encode(), hashed.encode()))
    except ImportError:
        pass
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            crypt: Any = importlib.import_module("crypt")
    except ImportError:
        return None
    probe = crypt.crypt("probe", "$2b$04$" + "a" * 22)
    if not probe or not probe.startswith("$2b$04$"):
        return None
    return lambda password, hashed: hmac.compare_digest(crypt.crypt(password, hashed) or "", hashed)


def _mapping(data: Any, where: str) -> dict[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ExporterError(f"{where}: expected a mapping, got {type(data).__name__}")
    return data


def _tls(section: dict[str, Any], base: Path, where: str) -> ssl.SSLContext:
    unknown = set(section) - _TLS_KEYS - _TLS_IGNORED - {"client_allowed_sans"}
    if unknown:
        raise ExporterError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    if section.get("client_allowed_sans"):
        raise ExporterError(f"{where}.client_allowed_sans: not supported by this exporter")
    for ignored in sorted(_TLS_IGNORED & set(section)):
        log.warning("%s.%s is ignored: Python's TLS picks its own", where, ignored)
    cert, key = section.get("cert_file"), section.get("key_file")
    if not cert or not key:
        raise ExporterError(f"{where}: cert_file and key_file are both required")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(base / str(cert), base / str(key))
    except (OSError, ssl.SSLError) as exc:
        raise ExporterError(f"{where}: cannot load cert_file/key_file: {exc}") from None
    for name, attr in (("min_version", "minimum_version"), ("max_version", "maximum_version")):
        value = section.get(name, "TLS12" if name == "min_version" else None)
        if value is None:
            continue
        if value not in _TLS_VERSIONS:
            raise ExporterError(f"{where}.{name}: expected one of {', '.join(_TLS_VERSIONS)}, got {value!r}")
        setattr(context, attr, _TLS_VERSIONS[value])
    auth = section.get("client_auth_type", "") or ""
    if auth not in _CLIENT_AUTH:
        raise ExporterError(
            f"{where}.client_auth_type: {auth!r} is not supported (use {', '.join(k for k in _CLIENT_AUTH if k)})"
        )
    context.verify_mode = _CLIENT_AUTH[auth]
    if context.verify_mode != ssl.CERT_NONE:
        ca = section.get("client_ca_file")
        if not ca:
            raise ExporterError(f"{where}.client_ca_file: required with client_auth_type {auth}")
        try:
            context.load_verify_locations(base / str(ca))
        except (OSError, ssl.SSLError) as exc:
            raise ExporterError(f"{where}.client_ca_file: cannot load: {exc}") from None
    return context


def parse_web_config(data: Any, base: Path, origin: str) -> WebConfig:
    """Build a WebConfig from parsed YAML; ``base`` resolves relative paths, ``origin`` names the file."""
    top = _mapping(data, origin)
    unknown = set(top) - {"tls_server_config", "http_server_config", "basic_auth_users"}
    if unknown:
        raise ExporterError(f"{origin}: unknown key(s) {', '.join(sorted(unknown))}")
    config = WebConfig()
    tls = _mapping(top.get("tls_server_config"), f"{origin}: tls_server_config")
    if tls:
        config.ssl_context = _tls(tls, base, f"{origin}: tls_server_config")
    http = _mapping(top.get("http_server_config"), f"{origin}: http_server_config")
    headers = _mapping(http.get("headers"), f"{origin}: http_server_config.headers")
    config.headers = {str(k): str(v) for k, v in headers.items()}
    users = _mapping(top.get("basic_auth_users"), f"{origin}: basic_auth_users")
    for user, hashed in users.items():
        if not isinstance(hashed, str) or not _BCRYPT.match(hashed):
            # the value itself is never printed: it may be a plain password pasted by mistake
            raise ExporterError(f"{origin}: basic_auth_users.{user}: expected a bcrypt hash ($2y$...)")
        config.users[str(user)] = hashed
    if config.users:
        config.check_password = bcrypt_checker()
        if config.check_password is None:
            raise ExporterError(
                f"{origin}: basic_auth_users needs bcrypt: install the 'bcrypt' package (pip install bcrypt)"
            )
    return config


def load_web_config(path: Path) -> WebConfig:
    yaml: Any = importlib.import_module("yaml")  # only needed when a web config is given
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ExporterError(f"{path}: cannot read web config: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ExporterError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from None
    return parse_web_config(data, path.parent, str(path))
