"""A line now and then while a long run of queries goes on: how far it is, how many failed, how long it took.

Quiet for a run shorter than EVERY_S; after that one line every EVERY_S seconds, `checked 40/218 queries,
3 failing, 32 s`. The commands print it on stderr, so the table or the JSON on stdout is untouched.
"""

from __future__ import annotations

import time
from collections.abc import Callable

EVERY_S = 10.0


class Progress:
    """Counts what is done (`tick`) and says so through `echo` once EVERY_S seconds have passed since the last line."""

    def __init__(self, verb: str, noun: str, total: int, echo: Callable[[str], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.verb, self.noun, self.total = verb, noun, total
        self.done = self.failing = 0
        self._echo, self._clock = echo, clock
        self._started = self._said = clock()

    def tick(self, failed: bool = False) -> None:
        self.done += 1
        self.failing += failed
        now = self._clock()
        if now - self._said >= EVERY_S:
            self._said = now
            self._echo(f"{self.verb} {self.done}/{self.total} {self.noun}, {self.failing} failing, "
                       f"{now - self._started:.0f} s")
