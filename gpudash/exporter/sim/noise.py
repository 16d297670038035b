"""Deterministic noise for the simulation: numbers that depend only on their integer arguments (and t).

Nothing here keeps state or reads a clock, so every process that evaluates the same arguments gets the same
numbers: two simulated nodes of one cluster agree on a job's checkpoints without talking to each other.
"""

from __future__ import annotations

import math
import zlib

_MASK = (1 << 64) - 1


def _mix(x: int) -> int:
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def uniform(*parts: int) -> float:
    """A uniform number in [0, 1) that depends only on its integer arguments."""
    h = 0x9E3779B97F4A7C15
    for part in parts:
        h = _mix((h ^ (part & _MASK)) + 0x9E3779B97F4A7C15 & _MASK)
    return h / 2.0**64


def smooth(t: float, period: float, *parts: int) -> float:
    """Value noise in [0, 1): continuous in t, changing over about ``period`` seconds."""
    k = math.floor(t / period)
    f = t / period - k
    f = f * f * (3 - 2 * f)
    a, b = uniform(*parts, k), uniform(*parts, k + 1)
    return a + (b - a) * f


def clamp(x: float, lo: float, hi: float) -> float:
    return lo if x < lo else hi if x > hi else x


def name_key(name: str) -> int:
    """A stable integer for a name (a node, a job id): Python's hash() differs from process to process."""
    return zlib.crc32(name.encode())
