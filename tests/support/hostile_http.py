"""Servers that answer badly on purpose, in-process on 127.0.0.1: what gpudash must survive from any endpoint.

- `EchoingServer` answers every request with an error status and a body repeating the request's headers and its
  Authorization value in several spellings, back to back, long enough to be cut: a message cut before its secrets are
  taken out would show part of one. With `answers_probe`, Prometheus's probe and clock queries are answered
  properly, so a command gets as far as its own queries.
- `FloodingServer` answers every request 200 with a body that never ends (chunked) or that declares a size far
  over any limit.
- `SlowPrometheus` speaks enough of Prometheus's API for `check` and `preview`, each query after `delay` seconds.

`leaks(text, ...)` lists what of a secret a text shows: any run of 6 characters of any of its spellings, and any
base64-looking run that decodes to something holding the password or token.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, quote, urlsplit

from gpudash.stack.loopback import LoopbackHTTPServer

SHOWN_RUN = 6  # a run of this many characters of a secret counts as shown
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]{8,}={0,2}")
_CHUNK = b"x" * 65536


class _Quiet(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:  # the client gave up waiting: what a deadline is for
            pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.do_GET()

    do_PUT = do_POST
    do_DELETE = do_POST

    def do_GET(self) -> None:
        raise NotImplementedError


def _prometheus_answer(path: str, query: str) -> dict[str, object] | None:
    """What Prometheus answers to the probe and to `time()`; None for anything else."""
    if path.endswith("/api/v1/query") and query == "vector(1)":
        return {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1, "1"]}]}}
    if path.endswith("/api/v1/query") and query == "time()":
        now = time.time()
        return {"status": "success", "data": {"resultType": "scalar", "result": [now, str(now)]}}
    return None


def _query_of(handler: BaseHTTPRequestHandler) -> tuple[str, str]:
    url = urlsplit(handler.path)
    return url.path, parse_qs(url.query).get("query", [""])[0]


class EchoingServer(LoopbackHTTPServer):
    """Every answer `status`, its body the request's headers and Authorization value (see `echo`)."""

    def __init__(self, status: int = 400, as_json: bool = True, answers_probe: bool = False) -> None:
        self.status, self.as_json, self.answers_probe = status, as_json, answers_probe
        self.requests = 0

    def echo(self, headers: str, authorization: str) -> str:
        """The headers, and the Authorization value in every spelling, repeated back to back before and after
        them, shifted by a few characters more at each request: wherever a message cuts this, it is likely to cut
        through a secret."""
        scheme, _, value = authorization.partition(" ")
        forms = [authorization, value]
        if scheme == "Basic":
            login = base64.b64decode(value).decode()
            forms += [login, quote(login, safe=""), login.partition(":")[2]]
        dense = " ".join(forms * 20)
        shift = "." * (self.requests % 17)
        return f"{shift}{dense} {' '.join(headers.split())} {dense}{shift}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(_Quiet):
            def do_GET(self) -> None:
                server.requests += 1
                path, query = _query_of(self)
                proper = _prometheus_answer(path, query) if server.answers_probe else None
                if proper is not None:
                    self.send(200, json.dumps(proper).encode())
                    return
                text = server.echo(str(self.headers), self.headers.get("Authorization", ""))
                if server.as_json:
                    body = {"status": "error", "errorType": "bad_data", "error": text, "message": text}
                    self.send(server.status, json.dumps(body).encode())
                else:
                    self.send(server.status, text.encode(), "text/html")

        return Handler


class FloodingServer(LoopbackHTTPServer):
    """Every answer 200 and huge: a chunked body that never ends, or (`declared`) a Content-Length of that many
    bytes followed by as much as the client reads. `sent` counts the bytes written."""

    def __init__(self, declared: int = 0) -> None:
        self.declared = declared
        self.sent = 0
        self.stop_sending = threading.Event()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(_Quiet):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                if server.declared:
                    self.send_header("Content-Length", str(server.declared))
                else:
                    self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                framed = (lambda data: data) if server.declared else (lambda data: b"%x\r\n%s\r\n" % (len(data), data))
                try:
                    self.wfile.write(framed(b'{"status": "success", "data": {"resultType": "vector", "result": ["'))
                    chunk = framed(_CHUNK)
                    while not server.stop_sending.is_set():
                        self.wfile.write(chunk)
                        server.sent += len(_CHUNK)
                except OSError:  # the client hung up: what it should do
                    return

        return Handler

    def stop(self) -> None:
        self.stop_sending.set()
        super().stop()


class SlowPrometheus(LoopbackHTTPServer):
    """Prometheus's API, each answer after `delay` seconds (the probe and `time()` at once): one series for every
    query, one value for every label. `queries` counts the queries answered."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.queries = 0
        self.release = threading.Event()  # set when the test ends: waiting answers go at once

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(_Quiet):
            def do_GET(self) -> None:
                path, query = _query_of(self)
                proper = _prometheus_answer(path, query)
                if proper is None:
                    server.release.wait(server.delay)
                    server.queries += 1
                    proper = {"status": "success", "data": _data(path)}
                self.send(200, json.dumps(proper).encode())

        return Handler

    def stop(self) -> None:
        self.release.set()
        super().stop()


def _data(path: str) -> object:
    if "/label/" in path:
        return ["a"]
    if path.endswith("/query_range"):
        return {"resultType": "matrix", "result": [{"metric": {"gpu": "0"}, "values": [[time.time(), "1"]]}]}
    return {"resultType": "vector", "result": [{"metric": {"gpu": "0"}, "value": [time.time(), "1"]}]}


# ------------------------------------------------------------------------------------------------ leaks


def spellings(user: str, password: str, token: str = "") -> list[str]:
    """Every form of the secrets a server could echo: as typed, percent-encoded, the Basic value, the token."""
    forms = [password, quote(password, safe=""), token]
    if password:
        forms += [base64.b64encode(text.encode()).decode() for text in (f"{user}:{password}", password)]
    return [form for form in forms if form]


def _decodings(run: str) -> list[bytes]:
    """`run` decoded as base64 (standard and URL-safe) from each of its first four characters."""
    out = []
    for start in range(4):
        piece = run[start:].rstrip("=")
        if len(piece) % 4 == 1:
            piece = piece[:-1]
        for decode in (base64.b64decode, base64.urlsafe_b64decode):
            with contextlib.suppress(binascii.Error, ValueError):
                out.append(decode(piece + "=" * (-len(piece) % 4)))
    return out


def leaks(text: str, user: str, password: str, token: str = "") -> list[str]:
    """What `text` shows of the secrets: runs of SHOWN_RUN characters of any spelling, and base64-looking runs
    that decode to a text holding the password or token."""
    found = [form[i:i + SHOWN_RUN] for form in spellings(user, password, token)
             for i in range(len(form) - SHOWN_RUN + 1) if form[i:i + SHOWN_RUN] in text]
    hidden = [s.encode() for s in (password, token) if s]
    for run in _BASE64_RUN.findall(text):
        found += [f"base64 {run!r} decodes to a secret" for decoded in _decodings(run) for secret in hidden
                  if secret in decoded]
    return found
