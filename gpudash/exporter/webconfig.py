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

Basic auth follows exporter-toolkit (see ``basicauth``). The file is read strictly (``gpudash.yamlfile``):
no duplicate keys, no anchors or aliases. Response headers are checked when the file is loaded: an
RFC 7230 name, a value of printable ASCII (no CR, LF or NUL that could smuggle a header in), and none
of the headers the exporter writes itself.
"""

from __future__ import annotations

import logging
import re
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpudash.errors import ExporterError
from gpudash.exporter.basicauth import BasicAuth, bcrypt_backend, hash_is_readable, hash_problem
from gpudash.exporter.exposed_secrets import warn_if_exposed
from gpudash.yamlfile import YamlError, read_yaml

log = logging.getLogger("gpudash.exporter")

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
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an RFC 7230 token
_HEADER_VALUE = re.compile(r"[\t\x20-\x7e]*")  # printable ASCII, space, tab: no CR, LF, NUL or other control
# written by the server on every answer: a second copy would contradict it or break the message's framing
_SERVER_HEADERS = frozenset(
    ("content-length", "content-type", "content-encoding", "transfer-encoding", "connection", "www-authenticate",
     "server", "date")
)


@dataclass
class WebConfig:
    ssl_context: ssl.SSLContext | None = None
    auth: BasicAuth | None = None  # None: no basic_auth_users, every request is served
    headers: dict[str, str] = field(default_factory=dict)


def _mapping(data: Any, where: str) -> dict[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ExporterError(f"{where}: expected a mapping, got {type(data).__name__}")
    return data


def _tls(section: dict[str, Any], base: Path, where: str) -> ssl.SSLContext:
    unknown = set(section) - _TLS_KEYS - _TLS_IGNORED - {"client_allowed_sans"}
    if unknown:
        raise ExporterError(f"{where}: unknown key(s) {', '.join(sorted(map(str, unknown)))}")
    if section.get("client_allowed_sans"):
        raise ExporterError(f"{where}.client_allowed_sans: not supported by this exporter")
    for ignored in sorted(_TLS_IGNORED & set(section)):
        log.warning("%s.%s is ignored: Python's TLS picks its own", where, ignored)
    cert, key = section.get("cert_file"), section.get("key_file")
    if not cert or not key:
        raise ExporterError(f"{where}: cert_file and key_file are both required")
    if not isinstance(cert, str) or not isinstance(key, str):
        raise ExporterError(f"{where}: cert_file and key_file must be file paths (strings)")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(base / cert, base / key)
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError; a NUL in a path is a ValueError
        raise ExporterError(f"{where}: cannot load cert_file/key_file: {exc}") from None
    warn_if_exposed(base / key, "TLS private key (tls_server_config.key_file)")
    for name, attr in (("min_version", "minimum_version"), ("max_version", "maximum_version")):
        value = section.get(name, "TLS12" if name == "min_version" else None)
        if value is None:
            continue
        if not isinstance(value, str) or value not in _TLS_VERSIONS:
            raise ExporterError(f"{where}.{name}: expected one of {', '.join(_TLS_VERSIONS)}, got {value!r}")
        setattr(context, attr, _TLS_VERSIONS[value])
    auth = section.get("client_auth_type", "") or ""
    if not isinstance(auth, str) or auth not in _CLIENT_AUTH:
        raise ExporterError(
            f"{where}.client_auth_type: {auth!r} is not supported (use {', '.join(k for k in _CLIENT_AUTH if k)})"
        )
    context.verify_mode = _CLIENT_AUTH[auth]
    if context.verify_mode != ssl.CERT_NONE:
        ca = section.get("client_ca_file")
        if not ca or not isinstance(ca, str):
            raise ExporterError(f"{where}.client_ca_file: a file path is required with client_auth_type {auth}")
        try:
            context.load_verify_locations(base / ca)
        except (OSError, ValueError) as exc:
            raise ExporterError(f"{where}.client_ca_file: cannot load: {exc}") from None
    return context


def _headers(data: Any, where: str) -> dict[str, str]:
    headers: dict[str, str] = {}
    for name, value in _mapping(data, where).items():
        if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
            raise ExporterError(f"{where}: {name!r} is not a header name (letters, digits and !#$%&'*+-.^_`|~)")
        if name.lower() in _SERVER_HEADERS:
            raise ExporterError(f"{where}.{name}: the exporter sets this header itself; it cannot be configured")
        if not isinstance(value, str):
            raise ExporterError(f"{where}.{name}: expected a string, got {type(value).__name__} (quote the value)")
        if not _HEADER_VALUE.fullmatch(value):
            raise ExporterError(f"{where}.{name}: the value may hold only printable ASCII (no CR, LF, NUL or "
                                "other control character)")
        headers[name] = value
    return headers


def _users(data: Any, where: str) -> dict[str, str]:
    users: dict[str, str] = {}
    for user, hashed in _mapping(data, where).items():
        if not isinstance(user, str):
            raise ExporterError(f"{where}: user {user!r} must be a string (quote it)")
        if ":" in user:
            raise ExporterError(f"{where}.{user}: a user name cannot hold ':' (basic auth splits there)")
        problem = hash_problem(hashed)  # the value itself is never printed: it may be a password pasted by mistake
        if problem:
            raise ExporterError(f"{where}.{user}: {problem}")
        users[user] = hashed
    return users


def parse_web_config(data: Any, base: Path, origin: str) -> WebConfig:
    """Build a WebConfig from parsed YAML; ``base`` resolves relative paths, ``origin`` names the file."""
    top = _mapping(data, origin)
    unknown = set(top) - {"tls_server_config", "http_server_config", "basic_auth_users"}
    if unknown:
        raise ExporterError(f"{origin}: unknown key(s) {', '.join(sorted(map(str, unknown)))}")
    config = WebConfig()
    tls = _mapping(top.get("tls_server_config"), f"{origin}: tls_server_config")
    if tls:
        config.ssl_context = _tls(tls, base, f"{origin}: tls_server_config")
    http = _mapping(top.get("http_server_config"), f"{origin}: http_server_config")
    config.headers = _headers(http.get("headers"), f"{origin}: http_server_config.headers")
    users = _users(top.get("basic_auth_users"), f"{origin}: basic_auth_users")
    if users:
        backend = bcrypt_backend()
        if backend is None:
            raise ExporterError(
                f"{origin}: basic_auth_users needs bcrypt: install the 'bcrypt' package (pip install bcrypt)"
            )
        for user, hashed in users.items():
            if not hash_is_readable(backend, hashed):
                raise ExporterError(f"{origin}: basic_auth_users.{user}: not a valid bcrypt hash (bad salt or digest)")
        config.auth = BasicAuth(users, backend)
    return config


def load_web_config(path: Path) -> WebConfig:
    try:
        data = read_yaml(path)
    except OSError as exc:
        raise ExporterError(f"{path}: cannot read web config: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ExporterError(f"{path}: not UTF-8 text") from None
    except YamlError as exc:
        raise ExporterError(f"{path}: {exc}") from None
    return parse_web_config(data, path.parent, str(path))
