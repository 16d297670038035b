"""A deadline for one whole HTTP request, which socket timeouts cannot give, and one for a whole run of them.

requests, niquests and urllib3 time out per socket operation (connect, each read): a server that sends one
byte every few seconds never trips a 5 s read timeout and can hold a request for minutes. `within(seconds,
request)` runs the request in a worker thread and waits at most `seconds` for it; past that it raises
`DeadlineExceeded`, and the caller must not reuse the session (connection pool) the request was using.

A per-request deadline still lets 200 slow queries take 200 times as long. `Deadline` is the budget of a whole
run (`check --deadline`, `preview --deadline`): a client gives each request at most what is `left()`, and the
run stops asking once it has `passed`.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class DeadlineExceeded(TimeoutError):
    """The request had not finished `seconds` after it started."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"no complete answer within {seconds:g} s")
        self.seconds = seconds


def within(seconds: float, request: Callable[[], T], name: str = "gpudash-request") -> T:
    """`request()`'s result or exception, or DeadlineExceeded once `seconds` have passed without either."""
    if not seconds > 0:
        raise ValueError(f"a deadline must be a positive number of seconds, got {seconds!r}")
    done = threading.Event()
    values: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            values.append(request())
        except BaseException as exc:  # handed to the waiting thread, which raises it as its own
            errors.append(exc)
        finally:
            done.set()

    # A worker thread rather than a watchdog that closes the socket: it bounds any client library without
    # reaching into its connection pool; the abandoned request ends at its own read timeout, its thread is a
    # daemon so exit never waits for it, and the caller drops the session it used.
    threading.Thread(target=run, name=name, daemon=True).start()
    if not done.wait(seconds):
        raise DeadlineExceeded(seconds)
    if errors:
        raise errors[0]
    return values[0]


class Deadline:
    """The time a whole run may take, from its creation; `never()` for a run without one."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        if not seconds > 0:
            raise ValueError(f"a deadline must be a positive number of seconds, got {seconds!r}")
        self.seconds = seconds
        self._clock = clock
        self._started = clock()

    @classmethod
    def never(cls) -> Deadline:
        return cls(math.inf)

    def elapsed(self) -> float:
        return self._clock() - self._started

    def left(self) -> float:
        return max(0.0, self.seconds - self.elapsed())

    @property
    def passed(self) -> bool:
        return self.elapsed() >= self.seconds
