"""The HTTP side: concurrency, gzip, TLS and basic auth from an exporter-toolkit web config."""

from __future__ import annotations

import base64
import gzip
import http.client
import logging
import shutil
import socket
import ssl
import struct
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.slack import budget
from support.waiting import eventually

from gpudash.errors import ExporterError
from gpudash.exporter import webconfig
from gpudash.exporter.basicauth import Bcrypt, bcrypt_backend
from gpudash.exporter.early_ends import EarlyEnds
from gpudash.exporter.exposition import Exposition
from gpudash.exporter.server import MetricsServer, parse_listen
from gpudash.exporter.service import Exporter
from gpudash.exporter.sim.fleet import fleet_from_specs
from gpudash.exporter.sim.simulated import SimulatedSource
from gpudash.exporter.webconfig import load_web_config

GPUS = 8


@pytest.fixture(scope="module")
def exporter() -> Iterator[Exporter]:
    # a fast sweep every 50 ms, so the snapshot is swapped many times while clients read it
    with Exporter(SimulatedSource(fleet_from_specs(GPUS, seed=3)), interval=0.05, slow_interval=0.2) as running:
        yield running


def _get(port: int, path: str = "/metrics", headers: dict[str, str] | None = None) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=budget(10))
    conn.request("GET", path, headers=headers or {})
    return conn.getresponse()


def test_fifty_concurrent_clients_thousands_of_scrapes(exporter: Exporter) -> None:
    clients, scrapes = 50, 60
    errors: list[str] = []
    done = [0] * clients

    def client(n: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", exporter.port, timeout=budget(20))
        try:
            for i in range(scrapes):
                zipped = (n + i) % 2 == 0
                conn.request("GET", "/metrics", headers={"Accept-Encoding": "gzip"} if zipped else {})
                response = conn.getresponse()
                body = response.read()
                if zipped:
                    body = gzip.decompress(body)
                complete = body.endswith(b"\n") and body.count(b"gpudash_gpu_up{") == GPUS
                if response.status != 200 or not complete:
                    errors.append(f"client {n} scrape {i}: HTTP {response.status}, {len(body)} bytes")
                done[n] += 1
        except Exception as exc:
            errors.append(f"client {n}: {exc!r}")
        finally:
            conn.close()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors[:5]
    assert sum(done) == clients * scrapes == 3000


def test_content_type_gzip_and_other_paths(exporter: Exporter) -> None:
    plain = _get(exporter.port)
    body = plain.read()
    assert plain.getheader("Content-Type") == "text/plain; version=0.0.4; charset=utf-8"
    zipped = _get(exporter.port, headers={"Accept-Encoding": "gzip, deflate"})
    assert zipped.getheader("Content-Encoding") == "gzip"
    assert gzip.decompress(zipped.read()).split(b"\n")[:3] == body.split(b"\n")[:3]
    assert _get(exporter.port, "/").status == 200
    assert _get(exporter.port, "/-/healthy").status == 200
    assert _get(exporter.port, "/nope").status == 404


@pytest.mark.parametrize(
    ("listen", "expected"),
    [(":9400", ("0.0.0.0", 9400)), ("127.0.0.1:0", ("127.0.0.1", 0)), ("[::1]:9400", ("::1", 9400))],
)
def test_parse_listen(listen: str, expected: tuple[str, int]) -> None:
    assert parse_listen(listen) == expected


@pytest.mark.parametrize("listen", ["9400", "host:port", ":70000"])
def test_bad_listen_is_an_error(listen: str) -> None:
    with pytest.raises(ExporterError, match="expected \\[HOST\\]:PORT"):
        parse_listen(listen)


def test_port_in_use_is_one_clear_error(exporter: Exporter) -> None:
    with pytest.raises(ExporterError, match=f"cannot listen on 127.0.0.1:{exporter.port}: .*in use"):
        Exporter(SimulatedSource(fleet_from_specs(1)), listen=f"127.0.0.1:{exporter.port}")


# -- web config ---------------------------------------------------------------------------------------

def _bcrypt(password: str) -> str:
    import importlib
    import warnings

    try:
        bcrypt = importlib.import_module("bcrypt")
        return str(bcrypt.hashpw(password.encode(), bcrypt.gensalt(4)).decode())
    except ImportError:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            crypt = importlib.import_module("crypt")
        return str(crypt.crypt(password, "$2b$04$" + "abcdefghijklmnopqrstuu"))


needs_bcrypt = pytest.mark.skipif(bcrypt_backend() is None, reason="neither the bcrypt package nor crypt(3) bcrypt")


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl not installed")
    cert, key = tmp_path / "server.crt", tmp_path / "server.key"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )
    return cert, key


@needs_bcrypt
def test_basic_auth(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = bcrypt_backend()
    assert real is not None
    compared: list[str] = []

    def counted(password: bytes, hashed: str) -> bool:
        compared.append(hashed)
        return real.check(password, hashed)

    monkeypatch.setattr(webconfig, "bcrypt_backend", lambda: Bcrypt(check=counted, make=real.make))
    config = tmp_path / "web.yml"
    config.write_text(f"basic_auth_users:\n  prometheus: '{_bcrypt('s3cret')}'\n")
    web = load_web_config(config)
    with Exporter(SimulatedSource(fleet_from_specs(1)), web=web) as running:
        def auth(user: str, password: str) -> dict[str, str]:
            return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}

        missing = _get(running.port)
        assert missing.status == 401 and "Basic" in (missing.getheader("WWW-Authenticate") or "")
        assert _get(running.port, headers=auth("prometheus", "wrong")).status == 401
        assert _get(running.port, headers=auth("someone", "s3cret")).status == 401
        before = len(compared)
        for _ in range(20):
            assert _get(running.port, headers=auth("prometheus", "s3cret")).status == 200
        assert len(compared) - before == 1  # only the first pays for bcrypt; the rest are remembered


@needs_bcrypt
def test_basic_auth_answers_every_attempt_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "web.yml"
    config.write_text(f"basic_auth_users:\n  prometheus: '{_bcrypt('k' * 72)}'\n  \"a\\0b\": '{_bcrypt('c')}'\n")
    with Exporter(SimulatedSource(fleet_from_specs(1)), web=load_web_config(config)) as running:
        def status(credentials: bytes | str) -> int:
            encoded = base64.b64encode(credentials).decode() if isinstance(credentials, bytes) else credentials
            return _get(running.port, headers={"Authorization": f"Basic {encoded}"}).status

        # Go's bcrypt reads 72 bytes of a password; bcrypt >= 4.1 raised on more and the connection dropped
        assert status(b"prometheus:" + b"k" * 72 + b" and more") == 200
        assert status(b"prometheus:" + b"x" * 100) == 401
        assert status(b"prometheus:" + b"x" * 40_000) == 401  # a huge Authorization header
        assert status(b"prometheus:\xff\xfe") == 401  # a password that is not UTF-8
        assert status("caf\u00e9") == 401  # not base64: a character outside ASCII
        assert status("%%%") == 401
        assert status(b"no-colon") == 401
        assert status(b"a\0b:c") == 200
        assert status(b"a:b\0c") == 401  # once the same remembered digest as the line above
    assert "Traceback" not in capsys.readouterr().err


def test_failed_connections_make_one_summary_line_and_no_traceback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    _self_signed(tmp_path)
    config = tmp_path / "web.yml"
    config.write_text("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n")
    now = [0.0]
    ends = EarlyEnds(interval=60.0, clock=lambda: now[0])
    caplog.set_level(logging.DEBUG, logger="gpudash.exporter")
    server = MetricsServer(lambda: Exposition(b"up 1\n"), "127.0.0.1:0", load_web_config(config), ends)
    server.start()
    try:
        for _ in range(20):
            with socket.create_connection(("127.0.0.1", server.port), timeout=budget(5)) as plain:
                plain.sendall(b"GET /metrics HTTP/1.1\r\nHost: exporter\r\n\r\n")  # plain HTTP to the TLS port
            reset = socket.create_connection(("127.0.0.1", server.port), timeout=budget(5))
            reset.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            reset.close()  # linger 0: the close sends RST, not FIN
        eventually(lambda: ends.pending() >= 40, timeout=10, what="40 early ends counted by the server's threads")
        now[0] = 60.0
        ends.flush()
    finally:
        server.stop()
    summaries = [message for message in caplog.messages if "ended early in the last" in message]
    assert summaries == ["40 connections ended early in the last 60 s: 20 TLS handshake failures, 20 resets"]
    assert not any(record.exc_info for record in caplog.records)
    assert "Traceback" not in capsys.readouterr().err


def test_tls(tmp_path: Path) -> None:
    cert, _key = _self_signed(tmp_path)
    config = tmp_path / "web.yml"
    config.write_text("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
                      "http_server_config:\n  headers:\n    X-Frame-Options: deny\n")
    web = load_web_config(config)  # relative paths resolve beside the config file
    with Exporter(SimulatedSource(fleet_from_specs(1)), web=web) as running:
        assert running.url.startswith("https://")
        context = ssl.create_default_context(cafile=str(cert))
        conn = http.client.HTTPSConnection("127.0.0.1", running.port, context=context, timeout=budget(10))
        conn.request("GET", "/metrics")
        response = conn.getresponse()
        assert response.status == 200 and b"DCGM_FI_DEV_GPU_UTIL" in response.read()
        assert response.getheader("X-Frame-Options") == "deny"
        with pytest.raises((http.client.HTTPException, OSError)):
            _get(running.port).read()  # plain HTTP to a TLS port
        response = _get_tls_after_garbage(running.port, context)
        assert response == 200  # a bad client did not break the server


def _get_tls_after_garbage(port: int, context: ssl.SSLContext) -> int:
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=budget(5)) as sock:
        sock.sendall(b"not a TLS hello\r\n\r\n")
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=budget(10))
    conn.request("GET", "/metrics")
    return conn.getresponse().status


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("basic_auth_users:\n  alice: hunter2\n", "basic_auth_users.alice: expected a bcrypt hash"),
        ("tls_server_config:\n  cert_file: missing.crt\n  key_file: missing.key\n", "cannot load cert_file"),
        ("tls_server_config:\n  cert_file: a.crt\n", "cert_file and key_file are both required"),
        ("nonsense: 1\n", "unknown key\\(s\\) nonsense"),
        ("tls_server_config: [1]\n", "tls_server_config: expected a mapping"),
        ("basic_auth_users: {a: b\n", "line 2, column 1: invalid YAML"),
    ],
)
def test_bad_web_config_is_one_clear_error_without_secrets(tmp_path: Path, text: str, message: str) -> None:
    config = tmp_path / "web.yml"
    config.write_text(text)
    with pytest.raises(ExporterError, match=message) as caught:
        load_web_config(config)
    assert "hunter2" not in caught.value.format_message()
    assert str(config) in caught.value.format_message()


@needs_bcrypt
def test_the_shipped_web_config_example_works(root: Path, tmp_path: Path) -> None:
    (tmp_path / "tls").mkdir()
    cert, key = _self_signed(tmp_path)
    cert.rename(tmp_path / "tls" / "server.crt")
    key.rename(tmp_path / "tls" / "server.key")
    example = tmp_path / "web-config.yml"
    shutil.copy(root / "deploy" / "web-config.example.yml", example)
    web = load_web_config(example)
    assert web.ssl_context is not None and web.auth is not None
    assert web.auth.check(b"prometheus", b"change-me")
    assert not web.auth.check(b"prometheus", b"guess")
