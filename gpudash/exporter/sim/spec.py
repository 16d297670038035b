"""The simulated node's spec strings: ``--workload IDX=NAME`` and ``--fault [NODE/]IDX=KIND[:ARG][@START][+DURATION]``.

docs/simulation.md documents what each workload and fault does; this module only parses them. A
fault may name the node it is on (``node-02/5=straggler``): each node of a simulated cluster is given every
fault, keeps its own, and feels the others' through the jobs they share (gpudash.exporter.sim.jobs).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from gpudash.config.durations import parse_seconds
from gpudash.errors import UsageError

WORKLOADS = ("train", "inference", "idle")
FAULTS = ("leak", "thermal", "stall", "xid", "lost")  # what goes wrong with one GPU's work
# what goes wrong with one GPU's hardware (gpudash.exporter.sim.faults_health); apart from FAULTS, whose random
# draws the fleet benchmarks replay
HEALTH_FAULTS = ("dbe-burst", "remap-pending", "remap-failure", "nvlink-crc-storm", "fell-off-bus",
                 "nvlink-crc-trickle", "nvlink-replay-trickle", "sbe-trickle", "recovery-action")
TRICKLES = ("nvlink-crc-trickle", "nvlink-replay-trickle", "sbe-trickle")  # corrected errors, ARG an hour
# what goes wrong with the fabric beside one GPU: its InfiniBand port, its NVSwitch fabric (gpudash.exporter.sim.fabric)
FABRIC_FAULTS = ("ib-down", "ib-flap", "ib-congested", "ib-degraded", "ib-symbol-burst", "fabric-failure")
JOB_FAULTS = ("straggler", "starved", "idle-holder", "foreign", "hang")  # what goes wrong with a job's use of its GPUs
SHARED_FAULTS = frozenset({"straggler", "starved", "foreign"})  # felt by the job's other GPUs, on any node
# Every fault kind by what it hits: what --fault accepts and what its help lists.
FAULT_GROUPS = (("work", FAULTS), ("hardware", HEALTH_FAULTS), ("fabric", FABRIC_FAULTS), ("job", JOB_FAULTS))
ALL_FAULTS = tuple(kind for _, kinds in FAULT_GROUPS for kind in kinds)
# The ARG of the faults that take one (docs/simulation.md says what each means).
FAULT_ARGS = {"leak": "TIME_TO_OOM", "thermal": "PEAK_C", "xid": "CODE", "dbe-burst": "N", "nvlink-crc-storm": "RATE",
              "recovery-action": "N", **{kind: "PER_HOUR" for kind in TRICKLES}, "ib-flap": "PERIOD",
              "ib-congested": "RATIO", "ib-degraded": "SHARE", "ib-symbol-burst": "RATE", "straggler": "PCT",
              "foreign": "JOBID"}
DEFAULT_FAULT_START = 60.0


@dataclass(frozen=True)
class Fault:
    kind: str
    start: float = DEFAULT_FAULT_START
    duration: float | None = None  # None: lasts until the end
    # leak: seconds to OOM; thermal: peak C; xid: code; straggler: % slower; foreign: job id; dbe-burst: errors;
    # nvlink-crc-storm: CRC errors a second; the trickles: errors an hour; recovery-action: the driver's recovery action
    arg: float | None = None

    @property
    def end(self) -> float:
        return math.inf if self.duration is None else self.start + self.duration

    def active(self, t: float) -> bool:
        return self.start <= t < self.end


_FAULT = re.compile(r"^(?:([A-Za-z0-9_.:-]+)/)?([0-9]+)=([a-z-]+)(?::([^@+]+))?(?:@([^+]+))?(?:\+(.+))?$")


def fault_kinds_text() -> str:
    """Every fault kind by group, each with its ARG where it takes one: ``work: leak[:TIME_TO_OOM], ...``."""
    def kind(name: str) -> str:
        return f"{name}[:{FAULT_ARGS[name]}]" if name in FAULT_ARGS else name
    return "; ".join(f"{group}: {', '.join(kind(name) for name in kinds)}" for group, kinds in FAULT_GROUPS)


def parse_fault(spec: str) -> tuple[int, Fault]:
    """``2=leak``, ``5=thermal:93@10m+15m``, ``3=xid:48@120``, ``4=lost@1m+5m`` -> (GPU index, Fault)."""
    node, index, fault = parse_node_fault(spec)
    if node is not None:
        raise UsageError(f"--fault {spec!r}: a fault on a named node needs simulated jobs (--sim-job or --sim-jobs)")
    return index, fault


def parse_node_fault(spec: str) -> tuple[str | None, int, Fault]:
    """``node-02/5=straggler:30@1h`` -> ("node-02", 5, Fault); without ``NODE/`` the node is None (this one)."""
    match = _FAULT.match(spec.strip())
    usage = ("expected IDX=KIND[:ARG][@START][+DURATION] (NODE/IDX=... on a simulated cluster), KIND one of "
             + ", ".join(ALL_FAULTS))
    if not match:
        raise UsageError(f"--fault {spec!r}: {usage}")
    node, index, kind, arg, start, duration = match.groups()
    if kind not in ALL_FAULTS:
        raise UsageError(f"--fault {spec!r}: unknown fault {kind!r}; {usage}")
    try:
        value: float | None = None
        if arg is not None:
            value = parse_seconds(arg) if kind == "leak" else _number(arg)
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
    whole = ("xid", "dbe-burst", "nvlink-crc-storm", "recovery-action")  # a count, a code or a rate
    if kind in whole and value is not None and (value != int(value) or value < 1):
        raise UsageError(f"--fault {spec!r}: {kind}'s argument must be a positive integer (e.g. {kind}:48)")
    if kind in TRICKLES and value is not None and value <= 0:
        raise UsageError(f"--fault {spec!r}: {kind}'s argument is errors an hour, more than 0 (e.g. {kind}:2)")
    if kind in ("ib-congested", "ib-degraded") and value is not None and not 0 < value < 1:
        raise UsageError(f"--fault {spec!r}: {kind}'s argument is a share between 0 and 1 (e.g. {kind}:0.5)")
    if kind in ("ib-flap", "ib-symbol-burst") and value is not None and value <= 0:
        raise UsageError(f"--fault {spec!r}: {kind}'s argument must be more than 0")
    if kind == "straggler" and value is not None and not 0 < value < 90:
        raise UsageError(f"--fault {spec!r}: a straggler runs between 0 and 90 % slower (e.g. straggler:30)")
    if kind == "foreign" and value is not None and (value != int(value) or value < 1):
        raise UsageError(f"--fault {spec!r}: the foreign process's job id must be a positive integer (foreign:48299)")
    return node, int(index), fault


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(text) from None


def parse_workload(spec: str) -> tuple[int, str]:
    """``3=idle`` -> (3, "idle")."""
    index, sep, name = spec.strip().partition("=")
    if not sep or not (index.isascii() and index.isdigit()) or name not in WORKLOADS:
        raise UsageError(f"--workload {spec!r}: expected IDX=NAME, NAME one of {', '.join(WORKLOADS)}")
    return int(index), name
