"""Serving on 127.0.0.1: a small in-process HTTP server for stand-ins and receivers, and the address of one.

LoopbackHTTPServer: a subclass says how to answer (``_handler`` returns a request handler class, typically
one that closes over the instance); the base binds a free loopback port, serves from a daemon thread, and
stops in ``stop()`` or at the end of a ``with`` block (gpudash.stack.servers.WebhookReceiver is one).
OnLoopback gives it, and gpudash.stack.process's server processes, ``address`` and ``url`` from a port.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TypeVar

_S = TypeVar("_S", bound="LoopbackHTTPServer")


class OnLoopback:
    """Something serving on 127.0.0.1: its ``address`` and ``url`` follow from its ``port``."""

    @property
    def port(self) -> int:
        raise NotImplementedError

    @property
    def address(self) -> str:
        """host:port, as another server's config names this one."""
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"


class LoopbackHTTPServer(OnLoopback):
    """Serves ``_handler()`` on 127.0.0.1, on a port chosen by the kernel, between ``start()`` and ``stop()``."""

    server_class: type[ThreadingHTTPServer] = ThreadingHTTPServer
    poll_interval = 0.1  # how soon stop() is noticed by the serving thread, in seconds
    _server: ThreadingHTTPServer | None = None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        raise NotImplementedError

    def start(self: _S) -> _S:
        server = self.server_class(("127.0.0.1", 0), self._handler())
        server.daemon_threads = True  # stop() and exit do not wait for a client that never hangs up
        self._server = server
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": self.poll_interval}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self: _S) -> _S:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "not started"
        return int(self._server.server_address[1])
