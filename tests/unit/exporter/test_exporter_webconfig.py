"""Reading a web-config file safely: strict YAML, checked headers and users, one line per problem."""

from __future__ import annotations

import importlib.util
import logging
import shutil
from pathlib import Path

import pytest

from gpudash.errors import ExporterError
from gpudash.exporter.basicauth import bcrypt_backend
from gpudash.exporter.webconfig import load_web_config

HASH = "$2b$04$" + "a" * 53  # well formed; only its format matters here

BILLION_LAUGHS = "\n".join(
    ['lol0: &lol0 "lol"']
    + [f"lol{n}: &lol{n} [{', '.join([f'*lol{n - 1}'] * 10)}]" for n in range(1, 10)]
    + ["http_server_config:", "  headers:", "    X-Lol: *lol9", ""]
)


def _load_error(tmp_path: Path, text: str | bytes) -> str:
    config = tmp_path / "web.yml"
    if isinstance(text, bytes):
        config.write_bytes(text)
    else:
        config.write_text(text)
    with pytest.raises(ExporterError) as caught:
        load_web_config(config)
    message = caught.value.format_message()
    assert message.startswith(f"{config}: ") and "\n" not in caught.value.message
    return message[len(f"{config}: "):]


def test_a_file_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    assert _load_error(tmp_path, b"basic_auth_users:\n  caf\xe9: x\n") == "not UTF-8 text"


def test_an_alias_bomb_is_refused_at_its_first_anchor(tmp_path: Path) -> None:
    assert _load_error(tmp_path, BILLION_LAUGHS) == (
        "line 1, column 7: anchors (&lol0) are not accepted in a config file"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # an alias would let one header value be repeated where it was not written
        ("http_server_config:\n  headers:\n    X-A: &v deny\n    X-B: *v\n", "line 3, column 10: anchors (&v)"),
        # a second entry for the same user silently replaced the first
        (f"basic_auth_users:\n  prometheus: '{HASH}'\n  prometheus: '{HASH}'\n",
         "line 3, column 3: duplicate key 'prometheus' (first at line 2)"),
    ],
)
def test_strict_yaml(tmp_path: Path, text: str, message: str) -> None:
    assert _load_error(tmp_path, text).startswith(message)


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ('X-Evil: "deny\\r\\nSet-Cookie: sid=x"', "http_server_config.headers.X-Evil: the value may hold only"),
        ('X-Nul: "a\\0b"', "http_server_config.headers.X-Nul: the value may hold only printable ASCII"),
        ('X-Bell: "a\\x07"', "http_server_config.headers.X-Bell: the value may hold only printable ASCII"),
        ('X-Note: "café"', "http_server_config.headers.X-Note: the value may hold only printable ASCII"),
        ('"X-Evil\\r\\nSet-Cookie": x', "http_server_config.headers: 'X-Evil\\r\\nSet-Cookie' is not a header name"),
        ('"Bad Name": x', "http_server_config.headers: 'Bad Name' is not a header name"),
        ('"X-Colon:": x', "http_server_config.headers: 'X-Colon:' is not a header name"),
        ("200: x", "http_server_config.headers: 200 is not a header name"),
        ("X-Max-Age: 10", "http_server_config.headers.X-Max-Age: expected a string, got int (quote the value)"),
        ("X-Empty: ", "http_server_config.headers.X-Empty: expected a string, got NoneType"),
        ("X-List: [a, b]", "http_server_config.headers.X-List: expected a string, got list"),
        ("Content-Type: text/html", "http_server_config.headers.Content-Type: the exporter sets this header itself"),
        ("content-length: '0'", "http_server_config.headers.content-length: the exporter sets this header itself"),
        ("Transfer-Encoding: chunked", "http_server_config.headers.Transfer-Encoding: the exporter sets this header"),
        ("Connection: close", "http_server_config.headers.Connection: the exporter sets this header itself"),
    ],
)
def test_response_headers_are_checked_when_loading(tmp_path: Path, headers: str, message: str) -> None:
    assert _load_error(tmp_path, f"http_server_config:\n  headers:\n    {headers}\n").startswith(message)


def test_good_headers_are_kept(tmp_path: Path) -> None:
    config = tmp_path / "web.yml"
    config.write_text("http_server_config:\n  headers:\n    X-Frame-Options: deny\n"
                      "    Content-Security-Policy: \"default-src 'none'; frame-ancestors 'none'\"\n")
    assert load_web_config(config).headers == {
        "X-Frame-Options": "deny", "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
    }


@pytest.mark.parametrize(
    ("users", "message"),
    [
        (f"123: '{HASH}'", "basic_auth_users: user 123 must be a string (quote it)"),
        (f"true: '{HASH}'", "basic_auth_users: user True must be a string (quote it)"),
        (f"'a:b': '{HASH}'", "basic_auth_users.a:b: a user name cannot hold ':'"),
        ("prometheus: 123", "basic_auth_users.prometheus: expected a bcrypt hash"),
        ("prometheus: [hunter2]", "basic_auth_users.prometheus: expected a bcrypt hash"),
        ("prometheus: hunter2", "basic_auth_users.prometheus: expected a bcrypt hash"),
        ("prometheus: '$2b$32$" + "a" * 53 + "'", "basic_auth_users.prometheus: bcrypt cost 32 is outside 4..31"),
        ("", "basic_auth_users: expected a mapping"),  # a list below, see the text
    ],
)
def test_users_are_checked_without_quoting_secrets(tmp_path: Path, users: str, message: str) -> None:
    text = f"basic_auth_users:\n  {users}\n" if users else "basic_auth_users: [hunter2]\n"
    found = _load_error(tmp_path, text)
    assert found.startswith(message) and "hunter2" not in found


@pytest.mark.skipif(bcrypt_backend() is None, reason="neither the bcrypt package nor crypt(3) bcrypt")
def test_a_hash_bcrypt_cannot_read_is_refused_when_loading(tmp_path: Path) -> None:
    if importlib.util.find_spec("bcrypt") is None:
        pytest.skip("crypt(3) does not report a bad salt")
    # the right alphabet and length, but the salt's last character carries bits a 16-byte salt cannot have
    bad_salt = "$2b$04$" + "a" * 21 + "z" + "a" * 31
    assert _load_error(tmp_path, f"basic_auth_users:\n  prometheus: '{bad_salt}'\n") == (
        "basic_auth_users.prometheus: not a valid bcrypt hash (bad salt or digest)"
    )


@pytest.fixture
def certs(tmp_path: Path, reference: Path) -> Path:
    """A folder holding server.crt and server.key (tests/fixtures/tls), next to the web config under test."""
    for name in ("server.crt", "server.key"):
        shutil.copy(reference / "tls" / name, tmp_path / name)
    return tmp_path


TLS = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (TLS + "  min_version: [TLS12]\n", "tls_server_config.min_version: expected one of TLS10, TLS11, TLS12, TLS13"),
        (TLS + "  client_auth_type: {a: b}\n", "tls_server_config.client_auth_type: {'a': 'b'} is not supported"),
        (TLS + "  1: x\n", "tls_server_config: unknown key(s) 1"),
        ("tls_server_config:\n  cert_file: [a]\n  key_file: b\n", "tls_server_config: cert_file and key_file must be"),
        ('tls_server_config:\n  cert_file: "a\\0b"\n  key_file: b\n', "tls_server_config: cannot load cert_file"),
    ],
)
def test_tls_values_of_the_wrong_type_are_one_line(certs: Path, text: str, message: str) -> None:
    assert _load_error(certs, text).startswith(message)


@pytest.mark.parametrize(("mode", "warned"), [(0o644, "readable"), (0o606, "readable and writable"),
                                              (0o600, None), (0o640, None)])
def test_a_private_key_every_user_may_read_is_named_once_with_its_mode(
        certs: Path, caplog: pytest.LogCaptureFixture, mode: int, warned: str | None) -> None:
    (certs / "server.key").chmod(mode)
    (certs / "web.yml").write_text(TLS)
    with caplog.at_level(logging.WARNING, "gpudash.exporter"):
        assert load_web_config(certs / "web.yml").ssl_context is not None
    said = [r.getMessage() for r in caplog.records]
    assert said == ([f"{certs / 'server.key'}: the TLS private key (tls_server_config.key_file) is {warned} by every "
                     f"user (mode {mode:04o}); make it 0600, or 0640 with the exporter's group"] if warned else [])
