"""What an NVML reader is: one NVML call (or a few) feeding one or more catalog keys of one GPU."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Values = dict[str, float]


class Unsupported(Exception):
    """A reader found the GPU cannot provide its fields (beyond NVML's own NotSupported)."""


@dataclass(frozen=True)
class NvmlReader:
    keys: frozenset[str]
    read: Callable[[Any, int], Values]  # (handle, index) -> values
    # True: a key it was asked for but did not return is one this GPU lacks (NVLink: Hopper has no data CRC)
    partial: bool = False
