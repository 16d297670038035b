"""What keeps the HTTP server answering under a flood: a deadline for a request's head, a cap on open
connections, and a backoff when accept() runs out of file descriptors.

- ``HEADER_SECONDS``: the request line and headers must arrive within this many seconds of the connection
  (the TLS handshake included) or, on a kept-alive connection, of the request's first byte. A client that
  sends one header line every few seconds (slowloris) is cut off there; the read timeout alone restarts with
  every byte. Between requests a kept-alive connection may stay idle for ``IDLE_SECONDS``.
- ``MAX_CONNECTIONS``: connections served at once, each by a thread; one more is answered ``503`` (with
  ``Retry-After``; a TLS one is closed) and closed at once, without a thread.
- Out of file descriptors (EMFILE, ENFILE) or socket memory, accept() fails while the connection waits in the
  listen queue, so the server's select() wakes again at once: 100 % of a core, and nothing served. The accept
  loop instead sleeps, from 50 ms doubling to 1 s, until accept() works again.

Each condition is logged as an episode (``Episode``): its start at most once a minute, its end once.
"""

from __future__ import annotations

import errno
import socket
import time
from typing import Any, Protocol

HEADER_SECONDS = 10.0
IDLE_SECONDS = 30.0
MAX_CONNECTIONS = 128
# accept() fails with these when the process or the system is out of descriptors or socket buffers
OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
BACKOFF_FIRST, BACKOFF_MAX = 0.05, 1.0

BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
        b"Content-Length: 33\r\nRetry-After: 1\r\nConnection: close\r\n\r\n"
        b"Too many connections, try again.\n")


class HeaderClock(Protocol):
    """What the reader asks the connection's handler: when the head must be in (None: idle), and whom to tell."""

    header_deadline: float | None
    idle_seconds: float

    def header_timed_out(self) -> None: ...


class DeadlineReader(socket.SocketIO):
    """A socket's reading side whose every read waits at most until the handler's header deadline."""

    def __init__(self, sock: socket.socket, clock: HeaderClock) -> None:
        super().__init__(sock, "rb")
        self._clock = clock
        self._socket = sock

    def readinto(self, buffer: Any) -> int | None:
        deadline = self._clock.header_deadline
        if deadline is None:
            self._socket.settimeout(self._clock.idle_seconds)
            return super().readinto(buffer)
        left = deadline - time.monotonic()
        if left <= 0:
            self._clock.header_timed_out()
            raise TimeoutError("the request line and headers did not arrive in time")
        self._socket.settimeout(min(left, self._clock.idle_seconds))
        try:
            return super().readinto(buffer)
        except TimeoutError:
            if time.monotonic() >= deadline:
                self._clock.header_timed_out()
            raise


class Refusals:
    """Connections over the limit: answered 503 without a thread and closed a moment later, from the accept loop.

    The close waits for the client's request to arrive and be drained (at most ``LINGER_SECONDS``), since
    closing a socket with unread data sends a reset, which can make the client drop the answer unread. At
    most ``MAX_LINGERING`` wait; past that a refused connection is closed at once.
    """

    LINGER_SECONDS = 1.0
    MAX_LINGERING = 64

    def __init__(self) -> None:
        self._lingering: list[tuple[float, socket.socket]] = []

    def refuse(self, sock: socket.socket, tls: bool) -> None:
        """Answer 503 without blocking (a TLS connection, whose handshake would need a thread, is only closed)."""
        try:
            sock.setblocking(False)
            if not tls:
                sock.send(BUSY)  # a few hundred bytes: the socket's send buffer takes them at once
                sock.shutdown(socket.SHUT_WR)
        except OSError:
            sock.close()
            return
        if tls or len(self._lingering) >= self.MAX_LINGERING:
            sock.close()
        else:
            self._lingering.append((time.monotonic() + self.LINGER_SECONDS, sock))
            self.reap()

    def reap(self, final: bool = False) -> None:
        """Close each refused connection whose client has sent its request and closed, or whose time is up."""
        now, keep = time.monotonic(), []
        for due, sock in self._lingering:
            try:
                while sock.recv(65536):
                    pass
                done = True  # the client closed its side
            except BlockingIOError:
                done = final or now >= due
            except OSError:
                done = True
            if done:
                sock.close()
            else:
                keep.append((due, sock))
        self._lingering = keep


class AcceptBackoff:
    """The sleep before the next accept() after one failed for lack of resources: 50 ms doubling to 1 s."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def failed(self) -> float:
        self.seconds = min(BACKOFF_MAX, self.seconds * 2 if self.seconds else BACKOFF_FIRST)
        return self.seconds

    def worked(self) -> None:
        self.seconds = 0.0
