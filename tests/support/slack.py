"""How long a test may wait before it gives up: every safety-net timeout of the suite is multiplied by one factor.

A test waits on a condition and goes on the moment it holds; its timeout is only the point where it stops
waiting and fails. Each timeout is written for an idle machine, far above the normal time, and `budget`
stretches it by `slack()`: the value of GPUDASH_TEST_SLACK when set (a CI runner shared with other jobs sets
it), otherwise the machine's one-minute load average per CPU, never under 1. On 2 CPUs at load 8 every
budget is four times as long; a test that passes takes no longer for it.
"""

from __future__ import annotations

import math
import os

ENV = "GPUDASH_TEST_SLACK"


def cpus() -> int:
    """The CPUs this process may run on."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity else os.cpu_count() or 1


def slack() -> float:
    """The factor for every safety-net timeout: GPUDASH_TEST_SLACK, or the load per CPU; at least 1."""
    text = os.environ.get(ENV, "").strip()
    if text:
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"{ENV}={text!r}: expected a number of at least 1") from None
        if not (value >= 1 and math.isfinite(value)):
            raise ValueError(f"{ENV}={text!r}: expected a number of at least 1")
        return value
    return max(1.0, os.getloadavg()[0] / cpus())


def budget(seconds: float) -> float:
    """`seconds`, a safety net on an idle machine, stretched for this machine's load."""
    return seconds * slack()
