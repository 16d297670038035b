"""The simulated node's spec strings: ``--workload IDX=NAME`` and ``--fault IDX=KIND[:ARG][@START][+DURATION]``.

gpudash.exporter.sim.fleet documents what each workload and fault does; this module only parses them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from gpudash.config.durations import parse_seconds
from gpudash.errors import UsageError

WORKLOADS = ("train", "inference", "idle")
FAULTS = ("leak", "thermal", "stall", "xid", "lost")
DEFAULT_FAULT_START = 60.0


@dataclass(frozen=True)
class Fault:
    kind: str
    start: float = DEFAULT_FAULT_START
    duration: float | None = None  # None: lasts until the end
    arg: float | None = None  # leak: seconds to OOM; thermal: peak C; xid: code

    @property
    def end(self) -> float:
        return math.inf if self.duration is None else self.start + self.duration

    def active(self, t: float) -> bool:
        return self.start <= t < self.end


_FAULT = re.compile(r"^(\d+)=([a-z]+)(?::([^@+]+))?(?:@([^+]+))?(?:\+(.+))?$")


def parse_fault(spec: str) -> tuple[int, Fault]:
    """``2=leak``, ``5=thermal:93@10m+15m``, ``3=xid:48@120``, ``4=lost@1m+5m`` -> (GPU index, Fault)."""
    match = _FAULT.match(spec.strip())
    usage = "expected IDX=KIND[:ARG][@START][+DURATION], KIND one of " + ", ".join(FAULTS)
    if not match:
        raise UsageError(f"--fault {spec!r}: {usage}")
    index, kind, arg, start, duration = match.groups()
    if kind not in FAULTS:
        raise UsageError(f"--fault {spec!r}: unknown fault {kind!r}; {usage}")
    try:
        value: float | None = None
        if arg is not None:
            value = parse_seconds(arg) if kind == "leak" else float(arg)
        fault = Fault(
            kind,
            parse_seconds(start) if start else DEFAULT_FAULT_START,
            parse_seconds(duration) if duration else None,
            value,
        )
    except ValueError as exc:
        raise UsageError(f"--fault {spec!r}: bad number or time {exc.args[0]!r}; {usage}") from None
    if kind in ("leak",) and value is not None and value <= 0:
        raise UsageError(f"--fault {spec!r}: time to OOM must be positive")
    return int(index), fault


def parse_workload(spec: str) -> tuple[int, str]:
    """``3=idle`` -> (3, "idle")."""
    index, sep, name = spec.strip().partition("=")
    if not sep or not index.isdigit() or name not in WORKLOADS:
        raise UsageError(f"--workload {spec!r}: expected IDX=NAME, NAME one of {', '.join(WORKLOADS)}")
    return int(index), name
