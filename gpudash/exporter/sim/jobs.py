"""Jobs laid over the GPUs of a simulated cluster: which job holds which (node, GPU), from when to when.

Every node of a simulated cluster is its own exporter process, and they never talk to each other; so the
layout is a pure function of (seed, spec), and every node evaluates it for itself: it knows its own name
(the exporter's ``--hostname``), finds its GPUs in the layout, and learns from it which GPUs on other nodes
share a job with its own (a straggler on node-02 slows the job's GPUs on node-01 too; docs/simulation.md
says how).

A job spec (``--sim-job``), times as in ``--fault`` (``90``, ``90s``, ``10m``, ``1h30m``)::

    ID[/KIND]=NODE:GPUS[,NODE:GPUS...][@START][+DURATION]
    48213=node-01:0-7,node-02:0-7@10m+4h       a 16-GPU training job from 10 minutes, for 4 hours
    48220/inference=node-03:4,5                 two GPUs serving, from t = 0 until the end
    48231/idle=node-03:0-3@1h                   four GPUs held idle (allocated, a process, ~0 %)

GPUS is a list of indexes and ranges (``0-3,6``); KIND is ``train`` (the default), ``inference`` or ``idle``.
START defaults to 0 and DURATION to "until the end". A job id is what Slurm would give (digits); it becomes the
``hpc_job`` label. Two jobs may not hold one GPU at the same time.

``--sim-jobs default`` lays a seeded, realistic mix over ``--sim-nodes`` (see ``default_layout``);
``--sim-jobs FILE`` reads job specs from a YAML file, one list item each (``read_job_file``)::

    jobs:
      - 48213=node-01:0-7,node-02:0-7@10m+4h
      - 48231/idle=node-03:0-3@1h
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpudash.config.durations import parse_seconds
from gpudash.errors import UsageError
from gpudash.exporter.sim.noise import name_key, uniform
from gpudash.yamlfile import YamlError, read_yaml

KINDS = ("train", "inference", "idle")
_NODE = r"[A-Za-z0-9_.-]+"
_SPEC = re.compile(r"^([0-9]+)(?:/([a-z]+))?=([^@+]+)(?:@([^+]+))?(?:\+(.+))?$")
_PLACE = re.compile(rf"^({_NODE}):(.+)$")
_CH_LAYOUT, _CH_PHASE = 101, 102

Placement = tuple[tuple[str, tuple[int, ...]], ...]  # (node, GPU indexes) per node the job spans


@dataclass(frozen=True)
class Job:
    id: str
    placement: Placement
    start: float = 0.0
    end: float = math.inf
    kind: str = "train"

    def running(self, t: float) -> bool:
        return self.start <= t < self.end

    def gpus_on(self, node: str) -> tuple[int, ...]:
        return next((gpus for name, gpus in self.placement if name == node), ())

    def holds(self, node: str, index: int) -> bool:
        return index in self.gpus_on(node)

    @property
    def size(self) -> int:
        return sum(len(gpus) for _, gpus in self.placement)

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.placement)

    def phase_seed(self, seed: int) -> int:
        """The seed of the job's own rhythm (stalls, checkpoints, evaluation): the same on every node."""
        return _phase_seed(seed, self.id)


@functools.lru_cache(maxsize=4096)  # asked for on every reading of every GPU
def _phase_seed(seed: int, job_id: str) -> int:
    return int(uniform(seed, _CH_PHASE, name_key(job_id)) * 2**31)


@dataclass(frozen=True)
class JobLayout:
    jobs: tuple[Job, ...] = ()

    def __post_init__(self) -> None:
        seen: dict[str, Job] = {}
        for job in self.jobs:
            if job.id in seen:
                raise UsageError(f"job {job.id}: given twice")
            seen[job.id] = job
        for a, b in ((a, b) for n, a in enumerate(self.jobs) for b in self.jobs[n + 1:]):
            if a.start < b.end and b.start < a.end:
                shared = [f"{node}:{i}" for node, gpus in a.placement for i in gpus if b.holds(node, i)]
                if shared:
                    raise UsageError(f"jobs {a.id} and {b.id} both hold {shared[0]} at the same time")

    def job_at(self, node: str, index: int, t: float) -> Job | None:
        """The job running on this GPU at t, or None (the GPU is free)."""
        return next((j for j in self.jobs if j.running(t) and j.holds(node, index)), None)

    def by_id(self, job_id: str) -> Job | None:
        return next((j for j in self.jobs if j.id == job_id), None)

    def check_nodes(self, gpus: int) -> None:
        """Every placement within a node of ``gpus`` GPUs (all nodes of a simulated cluster have the same)."""
        for job in self.jobs:
            for node, indexes in job.placement:
                bad = [i for i in indexes if i >= gpus]
                if bad:
                    raise UsageError(f"job {job.id}: {node} GPU {bad[0]} out of range: "
                                     f"the simulated nodes have GPUs 0-{gpus - 1}")


def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit()  # str.isdigit alone takes a fullwidth or superscript 2


def _indexes(spec: str, text: str) -> tuple[int, ...]:
    out: list[int] = []
    for part in text.split(","):
        lo, sep, hi = part.partition("-")
        if not _digits(lo) or (sep and not _digits(hi)):
            raise UsageError(f"--sim-job {spec!r}: bad GPU list {text!r}; expected indexes and ranges like 0-3,6")
        first, last = int(lo), int(hi) if sep else int(lo)
        if last < first:
            raise UsageError(f"--sim-job {spec!r}: GPU range {part!r} runs backwards")
        out.extend(range(first, last + 1))
    if len(set(out)) != len(out):
        raise UsageError(f"--sim-job {spec!r}: a GPU is listed twice in {text!r}")
    return tuple(out)


def _placement(spec: str, text: str) -> Placement:
    """``node-01:0-3,6,node-02:0-7``: an item with ``NODE:`` starts a node, the items after it add GPUs."""
    groups: list[tuple[str, list[str]]] = []
    for item in text.split(","):
        match = _PLACE.match(item)
        if match:
            groups.append((match.group(1), [match.group(2)]))
        elif groups and item:
            groups[-1][1].append(item)
        else:
            raise UsageError(f"--sim-job {spec!r}: expected NODE:GPUS[,NODE:GPUS...] such as node-01:0-7,node-02:0-3")
    names = [name for name, _ in groups]
    if len(set(names)) != len(names):
        raise UsageError(f"--sim-job {spec!r}: a node is named twice")
    return tuple((name, _indexes(spec, ",".join(parts))) for name, parts in groups)


def parse_job(spec: str) -> Job:
    """``48213=node-01:0-7,node-02:0-7@10m+4h`` -> Job; a bad spec raises UsageError naming it."""
    usage = "expected ID[/KIND]=NODE:GPUS[,NODE:GPUS...][@START][+DURATION], e.g. 48213=node-01:0-7,node-02:0-7@10m+4h"
    match = _SPEC.match(spec.strip())
    if not match:
        raise UsageError(f"--sim-job {spec!r}: {usage}")
    job_id, kind, where, start, duration = match.groups()
    if kind is not None and kind not in KINDS:
        raise UsageError(f"--sim-job {spec!r}: unknown kind {kind!r}; one of {', '.join(KINDS)}")
    try:
        begin = parse_seconds(start) if start else 0.0
        length = parse_seconds(duration) if duration else math.inf
    except ValueError as exc:
        raise UsageError(f"--sim-job {spec!r}: bad time {exc.args[0]!r}; {usage}") from None
    if length <= 0:
        raise UsageError(f"--sim-job {spec!r}: the duration must be positive")
    return Job(job_id, _placement(spec, where), begin, begin + length, kind or "train")


def default_layout(seed: int, nodes: Sequence[str], gpus: int) -> JobLayout:
    """A seeded, realistic mix over ``nodes`` of ``gpus`` GPUs each: the same on every node for one seed.

    - One multi-node training job on every GPU of the first half of the nodes (rounded up), from t = 0 for
      about 8 hours (on a single node: its first half of the GPUs).
    - On each other node (or the rest of the single node): half its GPUs run a training job from ~10 minutes
      for ~2 hours and, after a short gap, another one until ~6 hours; a quarter serve inference from t = 0;
      the rest stay free.
    Job ids are Slurm-like and increase with submission time.
    """
    if not nodes:
        raise UsageError("--sim-jobs default: needs the cluster's node names (--sim-nodes node-01,node-02,...)")
    if len(set(nodes)) != len(nodes):
        raise UsageError(f"--sim-nodes {','.join(nodes)}: a node is named twice")
    next_id = 40000 + int(uniform(seed, _CH_LAYOUT) * 20000)

    def new_id() -> str:
        nonlocal next_id
        next_id += 1 + int(uniform(seed, _CH_LAYOUT, next_id) * 40)
        return str(next_id)

    def minutes(lo: float, hi: float, *parts: int) -> float:
        return 60.0 * round(lo + (hi - lo) * uniform(seed, _CH_LAYOUT, *parts))

    everything = tuple(range(gpus))
    if len(nodes) == 1:
        half = max(1, gpus // 2)
        big: Placement = ((nodes[0], everything[:half]),)
        rest = [(nodes[0], everything[half:])] if gpus > half else []
    else:
        head = nodes[: (len(nodes) + 1) // 2]
        big = tuple((node, everything) for node in head)
        rest = [(node, everything) for node in nodes[len(head):]]
    jobs = [Job(new_id(), big, 0.0, minutes(450, 510, 1))]
    for k, (node, free) in enumerate(rest):
        train = free[: max(1, (len(free) + 1) // 2)]
        serve = free[len(train): len(train) + len(free) // 4]
        first_start = minutes(5, 15, k, 2)
        first_end = first_start + minutes(100, 140, k, 3)
        jobs.append(Job(new_id(), ((node, train),), first_start, first_end))
        if serve:
            jobs.append(Job(new_id(), ((node, serve),), 0.0, math.inf, "inference"))
        second_start = first_end + minutes(5, 20, k, 4)
        jobs.append(Job(new_id(), ((node, train),), second_start, minutes(330, 390, k, 5)))
    return JobLayout(tuple(sorted(jobs, key=lambda j: int(j.id))))


def read_job_file(path: Path) -> list[str]:
    """The job specs of a YAML file (``jobs:`` and a list of specs); a bad file is one line naming it."""
    try:
        data = read_yaml(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--sim-jobs {path}: cannot read it: {getattr(exc, 'strerror', None) or exc}") from None
    except YamlError as exc:
        raise UsageError(f"--sim-jobs {path}: {exc}") from None
    specs = data.get("jobs") if isinstance(data, dict) else None
    if not isinstance(specs, list) or not all(isinstance(spec, str | int) for spec in specs):
        raise UsageError(f"--sim-jobs {path}: expected 'jobs:' and a list of job specs (ID=NODE:GPUS...)")
    return [str(spec) for spec in specs]


def layout_from_specs(specs: Iterable[str], default: bool, seed: int, nodes: Sequence[str], gpus: int) -> JobLayout:
    """The layout ``--sim-jobs default`` and ``--sim-job`` specs describe (the specs added to the default)."""
    jobs = list(default_layout(seed, nodes, gpus).jobs) if default else []
    jobs.extend(parse_job(spec) for spec in specs)
    layout = JobLayout(tuple(jobs))
    layout.check_nodes(gpus)
    return layout
