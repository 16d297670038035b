"""The HTTP side: /metrics writes the latest pre-rendered exposition, nothing else happens per scrape.

One thread per connection (HTTP/1.1 keep-alive, as Prometheus uses), gzip when asked (compressed once
per sweep), TLS and basic auth from a web config. The TLS handshake runs in the connection's thread, so a
slow or hostile client cannot hold up accept(). A connection that fails (handshake, reset, timeout) is
counted, never logged with a traceback: one summary line per minute says how many (``early_ends``).
Floods are bounded (``connections``): a deadline for each request's head, a cap on open connections, a
backoff when accept() runs out of file descriptors; too many password checks at once are answered 503.
"""

from __future__ import annotations

import base64
import io
import logging
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from gpudash.errors import ExporterError
from gpudash.exporter.basicauth import AuthBusy
from gpudash.exporter.connections import (
    HEADER_SECONDS,
    IDLE_SECONDS,
    MAX_CONNECTIONS,
    OUT_OF_RESOURCES,
    AcceptBackoff,
    DeadlineReader,
    Refusals,
)
from gpudash.exporter.early_ends import EarlyEnds, kind_of
from gpudash.exporter.episodes import Episode
from gpudash.exporter.exposition import CONTENT_TYPE, Exposition
from gpudash.exporter.webconfig import WebConfig

log = logging.getLogger("gpudash.exporter")

LANDING = b"""<!doctype html><html><head><title>gpudash exporter</title></head>
<body><h1>gpudash exporter</h1><p><a href="/metrics">Metrics</a></p></body></html>
"""


def parse_listen(listen: str) -> tuple[str, int]:
    """``:9400``, ``0.0.0.0:9400``, ``127.0.0.1:0``, ``[::1]:9400`` -> (host, port)."""
    host, sep, port = listen.rpartition(":")
    if not sep or not (port.isascii() and port.isdigit()) or int(port) > 65535:
        raise ExporterError(f"--listen {listen!r}: expected [HOST]:PORT, e.g. :9400 or 127.0.0.1:9400")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    return host or "0.0.0.0", int(port)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        exposition: Callable[[], Exposition],
        web: WebConfig | None,
        early_ends: EarlyEnds,
        max_connections: int = MAX_CONNECTIONS,
        header_seconds: float = HEADER_SECONDS,
    ) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.exposition = exposition
        self.web = web or WebConfig()
        self.early_ends = early_ends
        self.max_connections = max_connections
        self.header_seconds = header_seconds
        self._open = 0  # connections with a thread
        self._open_lock = threading.Lock()
        self._backoff = AcceptBackoff()
        self._refusals = Refusals()
        self.out_of_files = Episode("cannot accept connections: out of file descriptors or socket memory (see "
                                    "RLIMIT_NOFILE, LimitNOFILE=); retrying with backoff, up to 1 s",
                                    "accepting connections again")
        self.too_many = Episode(f"{max_connections} connections open, the most allowed: new ones are answered 503 "
                                "and closed", "fewer connections than the limit again")
        super().__init__(address, _Handler)

    def get_request(self) -> tuple[Any, Any]:
        try:
            sock, addr = self.socket.accept()
        except OSError as exc:
            if exc.errno in OUT_OF_RESOURCES:  # the connection stays queued and select() wakes at once: wait
                self.out_of_files.hit()
                time.sleep(self._backoff.failed())
            raise  # socketserver drops whatever get_request raises, and selects again
        self._backoff.worked()
        self.out_of_files.clear()
        try:
            sock.getpeername()  # fails (ENOTCONN) when the peer reset the connection while it waited in the queue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no 40 ms Nagle wait on small responses
        except OSError as exc:  # counted here, as socketserver drops a connection get_request fails on
            self.early_ends.record(kind_of(exc, handshake=True))
            sock.close()
            raise
        if self.web.ssl_context is not None:
            sock = self.web.ssl_context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, addr

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            full = self._open >= self.max_connections
            if not full:
                self._open += 1
        if full:
            self.too_many.hit()
            self._refusals.refuse(request, tls=isinstance(request, ssl.SSLSocket))
            return
        self.too_many.clear()
        try:
            super().process_request(request, client_address)
        except BaseException:  # no thread started: it will not count itself out
            self._closed()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._closed()

    def _closed(self) -> None:
        with self._open_lock:
            self._open -= 1

    @property
    def open_connections(self) -> int:
        return self._open

    def handle_error(self, request: Any, client_address: Any) -> None:
        # socketserver prints a 16-line traceback here for whatever escaped the handler: count it instead
        exc = sys.exc_info()[1]
        self.early_ends.record(kind_of(exc, handshake=False))
        log.debug("connection from %s failed: %s: %s", client_address[0], type(exc).__name__, exc)

    def service_actions(self) -> None:
        self.early_ends.flush()  # serve_forever calls this every poll interval
        self._refusals.reap()

    def server_close(self) -> None:
        super().server_close()
        self._refusals.reap(final=True)
        self.early_ends.flush(final=True)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "gpudash-exporter"
    wbufsize = 1 << 16  # headers and body leave in one write; flushed after each response
    timeout = IDLE_SECONDS  # an idle keep-alive connection gives its thread back after this
    idle_seconds = IDLE_SECONDS
    server: _Server

    def setup(self) -> None:
        self.ended_early: str | None = None  # the kind, once the connection has failed
        # the first request's head, TLS handshake included, is due this long after the connection came
        self.header_deadline: float | None = time.monotonic() + self.server.header_seconds
        self.requests = 0
        super().setup()
        self.rfile.close()  # the plain reader setup made: reads go through the header deadline instead
        self.reader = io.BufferedReader(DeadlineReader(self.connection, self))
        self.rfile = self.reader
        if isinstance(self.connection, ssl.SSLSocket):
            try:
                self.connection.settimeout(max(0.001, self.header_deadline - time.monotonic()))
                self.connection.do_handshake()  # bounded as a whole: CPython's handshake keeps one deadline
            except OSError as exc:  # SSLError, resets and timeouts alike: counted, not raised to handle_error
                self._end_early(exc, handshake=True)

    def header_timed_out(self) -> None:
        """The request's head did not arrive in time: the connection ends, counted as a timeout."""
        self.close_connection = True
        if self.ended_early is None:
            self.ended_early = "timeout"
            log.debug("connection from %s: no request head within %g s", self.client_address[0],
                      self.server.header_seconds)

    def handle_one_request(self) -> None:
        if self.requests:  # kept alive: idle until the next request's first byte, then its head is due
            self.header_deadline = None
            try:
                if not self.reader.peek(1):
                    self.close_connection = True
                    return
            except TimeoutError:
                self.close_connection = True
                return
            self.header_deadline = time.monotonic() + self.server.header_seconds
        self.requests += 1
        super().handle_one_request()

    def parse_request(self) -> bool:
        try:
            return super().parse_request()  # reads the headers
        finally:
            self.header_deadline = None

    def handle(self) -> None:
        if self.ended_early:
            return
        try:
            super().handle()
        except OSError as exc:
            self._end_early(exc, handshake=False)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError as exc:  # closing wfile flushes a reply the peer is no longer there to read
            self._end_early(exc, handshake=False)
            self.rfile.close()
        if self.ended_early:
            self.server.early_ends.record(self.ended_early)

    def _end_early(self, exc: OSError, handshake: bool) -> None:
        self.close_connection = True
        if self.ended_early is None:
            self.ended_early = kind_of(exc, handshake)
            log.debug("connection from %s ended early: %s: %s", self.client_address[0], type(exc).__name__, exc)

    def do_GET(self) -> None:
        try:
            authorized = self._authorized()
        except AuthBusy:
            self._send(503, b"Too many authentication attempts, try again.\n", "text/plain; charset=utf-8",
                       {"Retry-After": "1"})
            return
        if not authorized:
            challenge = {"WWW-Authenticate": 'Basic realm="gpudash"'}
            self._send(401, b"Unauthorized\n", "text/plain; charset=utf-8", challenge)
            return
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            exposition = self.server.exposition()
            if "gzip" in self.headers.get("Accept-Encoding", ""):
                self._send(200, exposition.gzipped(), CONTENT_TYPE, {"Content-Encoding": "gzip"})
            else:
                self._send(200, exposition.body, CONTENT_TYPE)
        elif path == "/":
            self._send(200, LANDING, "text/html; charset=utf-8")
        elif path in ("/-/healthy", "/-/ready"):
            self._send(200, b"OK\n", "text/plain; charset=utf-8")
        else:
            self._send(404, b"Not Found\n", "text/plain; charset=utf-8")

    def _authorized(self) -> bool:
        auth = self.server.web.auth
        if auth is None:
            return True
        scheme, _, encoded = self.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            # as Go's Request.BasicAuth: strict base64, split at the first ':', the password kept as raw bytes
            user, sep, password = base64.b64decode(encoded.strip(), validate=True).partition(b":")
        except ValueError:  # binascii.Error, or a character outside ASCII
            return False
        return bool(sep) and auth.check(user, password, client=str(self.client_address[0]))

    def _send(self, status: int, body: bytes, content_type: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in {**self.server.web.headers, **(extra or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.client_address[0], format % args)


class MetricsServer:
    """Serves ``exposition()`` on ``listen`` in a background thread until ``stop()``."""

    def __init__(
        self,
        exposition: Callable[[], Exposition],
        listen: str,
        web: WebConfig | None = None,
        early_ends: EarlyEnds | None = None,
        *,
        max_connections: int = MAX_CONNECTIONS,
        header_seconds: float = HEADER_SECONDS,
    ) -> None:
        """``early_ends`` counts failed connections (default: one summary line a minute); ``max_connections``
        and ``header_seconds`` bound floods (``connections``)."""
        host, port = parse_listen(listen)
        try:
            self._server = _Server((host, port), exposition, web, early_ends or EarlyEnds(), max_connections,
                                   header_seconds)
        except OSError as exc:
            raise ExporterError(f"cannot listen on {listen}: {exc.strerror or exc}") from None
        self._thread: threading.Thread | None = None
        self.tls = web is not None and web.ssl_context is not None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def open_connections(self) -> int:
        """Connections being served now, each by a thread (at most ``max_connections``)."""
        return self._server.open_connections

    @property
    def url(self) -> str:
        host = str(self._server.server_address[0])
        host = "127.0.0.1" if host in ("0.0.0.0", "") else f"[{host}]" if ":" in host else host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"

    def start(self) -> None:
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(5.0)
