"""Wait for a condition instead of sleeping: the one way a test waits for a server, a process or a thread."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from support.slack import budget

T = TypeVar("T")


def eventually(condition: Callable[[], T], timeout: float = 30.0, *, what: str = "", interval: float = 0.05,
               ignoring: tuple[type[BaseException], ...] = ()) -> T:
    """Call `condition` until it returns something truthy, and return that; fail once `timeout` has passed.

    `timeout` is a safety net for an idle machine, stretched by `support.slack` on a busy one. `ignoring`
    names exceptions that mean "not yet" (a connection refused while a server starts); any other exception
    fails at once. The failure names `what` and the last value or exception seen.
    """
    allowed = budget(timeout)
    deadline = time.monotonic() + allowed
    last: object = None
    while True:
        try:
            value = condition()
        except ignoring as exc:
            last = exc
        else:
            if value:
                return value
            last = value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {allowed:g} s waiting for {what or condition!r}; last: {last!r}")
        time.sleep(interval)
