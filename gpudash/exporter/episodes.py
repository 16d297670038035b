"""A condition that comes and goes under load (out of file descriptors, too many connections, too many password
checks at once), logged by episode: its start at most once per interval, its end only after a logged start.

A flood that trips the condition thousands of times a second makes at most two lines a minute, and the
second says how many times it struck and for how long.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger("gpudash.exporter")


class Episode:
    """``hit()`` each time the condition strikes, ``clear()`` when things work again; both from any thread."""

    def __init__(self, what: str, over: str, interval: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """``what``: the start line (the condition and what the exporter does about it); ``over``: the end line's
        start, followed by how long it lasted and how many times it struck."""
        self.what = what
        self.over = over
        self.interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self._active = False
        self._logged = False  # whether this episode's start was logged
        self._hits = 0
        self._since = 0.0
        self._last_line: float | None = None

    @property
    def active(self) -> bool:
        return self._active

    def hit(self) -> None:
        with self._lock:
            now = self._clock()
            if not self._active:
                self._active, self._logged, self._hits, self._since = True, False, 0, now
            self._hits += 1
            if self._logged or (self._last_line is not None and now - self._last_line < self.interval):
                return
            self._logged, self._last_line = True, now
        log.warning("%s", self.what)

    def clear(self) -> None:
        if not self._active:  # read without the lock: the common case, nothing wrong, costs nothing
            return
        with self._lock:
            if not self._active:
                return
            self._active = False
            if not self._logged:
                return
            hits, seconds = self._hits, self._clock() - self._since
        log.warning("%s after %.1f s (%s time%s)", self.over, seconds, f"{hits:,}", "" if hits == 1 else "s")
