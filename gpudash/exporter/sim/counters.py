"""Counters of the simulated fleet: integrals of simulated rates, a pure function of t with bounded memory.

An energy counter must be the integral of the power gauge, or ``rate()`` of one disagrees with the other.
The rate is integrated on a fixed grid (15 s) from t = 0, so any t gives the same answer in any order.
Memory stays bounded however long a simulated exporter runs: the running total is kept at each day
boundary, and the fine grid only for the few days read most recently (an old day is recomputed from its
checkpoint when asked for).
"""

from __future__ import annotations

import math
import threading
from array import array
from collections import OrderedDict
from collections.abc import Callable

STEP = 15.0
DAY = 86400.0
STEPS_PER_DAY = int(DAY / STEP)
MAX_SECONDS = 400 * DAY  # beyond this the first read would integrate for minutes: surely a wrong epoch
_DAYS_KEPT = 3

Rates = Callable[[float], tuple[float, float]]


class Integral:
    """Two running integrals (e.g. energy and NVLink bytes) of ``rates(t)`` from 0 to any t >= 0."""

    def __init__(self, rates: Rates) -> None:
        self.rates = rates
        self._day_start: list[tuple[float, float]] = [(0.0, 0.0)]  # totals at each day boundary
        self._fine: OrderedDict[int, tuple[array[float], array[float]]] = OrderedDict()
        self._lock = threading.Lock()  # an exporter's fast and slow loops may both extend a grid

    def at(self, t: float) -> tuple[float, float]:
        if not 0.0 <= t <= MAX_SECONDS or math.isnan(t):
            raise ValueError(
                f"simulated time {t:.0f} s is outside 0..{MAX_SECONDS:.0f} s after the fleet's epoch: "
                "give the fleet an epoch near the times it is sampled at"
            )
        day = int(t // DAY)
        k = int((t - day * DAY) // STEP)
        with self._lock:
            first, second = self._grid(day, k + 1)
        f = (t - day * DAY - k * STEP) / STEP
        return first[k] + (first[k + 1] - first[k]) * f, second[k] + (second[k + 1] - second[k]) * f

    def _grid(self, day: int, upto: int) -> tuple[array[float], array[float]]:
        """Day ``day``'s running totals at each step, computed at least up to index ``upto``."""
        while len(self._day_start) <= day:  # checkpoint every day before this one
            previous = len(self._day_start) - 1
            first, second = self._extend(previous, STEPS_PER_DAY)
            self._day_start.append((first[-1], second[-1]))
        return self._extend(day, upto)

    def _extend(self, day: int, upto: int) -> tuple[array[float], array[float]]:
        grids = self._fine.get(day)
        if grids is None:
            start = self._day_start[day]
            grids = (array("d", [start[0]]), array("d", [start[1]]))
            self._fine[day] = grids
            while len(self._fine) > _DAYS_KEPT:
                self._fine.popitem(last=False)
        self._fine.move_to_end(day)
        first, second = grids
        base = day * DAY
        while len(first) <= upto:
            n = len(first) - 1
            a, b = self.rates(base + n * STEP)
            first.append(first[n] + a * STEP)
            second.append(second[n] + b * STEP)
        return grids
