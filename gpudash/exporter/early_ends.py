"""Connections that end before an answer: counted by kind, summed up in one log line per interval.

A port scanner, a load balancer's TCP probe or a Prometheus scraping https with http opens connection
after connection that ends in a failed TLS handshake or a reset. A line each (let alone socketserver's
16-line traceback) would bury every other message, so each is counted and one line per interval says
how many ended early and why.
"""

from __future__ import annotations

import logging
import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable

log = logging.getLogger("gpudash.exporter")

# kind -> how the summary names one of them (an "s" is added for several), in the summary's order
KINDS = {
    "tls_handshake": "TLS handshake failure",
    "reset": "reset",
    "timeout": "timeout",
    "tls": "TLS error",
    "error": "unexpected error",
}


def kind_of(exc: BaseException | None, handshake: bool) -> str:
    """Which kind of early end ``exc`` is; ``handshake`` says whether it came from the TLS handshake."""
    if isinstance(exc, TimeoutError):
        return "timeout"
    if isinstance(exc, (ConnectionError, ssl.SSLEOFError, ssl.SSLZeroReturnError)):
        return "reset"  # the peer reset or closed the connection mid-way
    if isinstance(exc, ssl.SSLError):
        return "tls_handshake" if handshake else "tls"
    if isinstance(exc, OSError):
        return "reset"  # e.g. ENOTCONN: the peer was gone before the socket could be used
    return "error"


def summary(counts: Counter[str], seconds: float) -> str:
    total = sum(counts.values())
    parts = [f"{counts[kind]:,} {name}{'' if counts[kind] == 1 else 's'}" for kind, name in KINDS.items()
             if counts[kind]]
    ended = "connection ended" if total == 1 else "connections ended"
    return f"{total:,} {ended} early in the last {seconds:.0f} s: {', '.join(parts)}"


class EarlyEnds:
    """Counts early ends from any thread; ``flush`` logs at most one summary line per ``interval`` seconds."""

    def __init__(self, interval: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self._clock = clock
        self._counts: Counter[str] = Counter()
        self._since = clock()
        self._lock = threading.Lock()

    def record(self, kind: str) -> None:
        with self._lock:
            self._counts[kind] += 1

    def pending(self) -> int:
        """How many early ends the next summary will report."""
        with self._lock:
            return sum(self._counts.values())

    def flush(self, final: bool = False) -> None:
        """Log the summary if an interval has passed since the last one (or ``final``, at shutdown)."""
        with self._lock:
            now = self._clock()
            if not final and now - self._since < self.interval:
                return
            counts, self._counts = self._counts, Counter()
            seconds, self._since = now - self._since, now
        if counts:
            log.info("%s", summary(counts, seconds))
