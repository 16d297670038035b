"""A synthetic GPU fleet as OpenMetrics text, for backfilling a Prometheus TSDB with promtool.

The fleet is N GPUs on N/8 nodes in N/1,024 clusters (at least 2, at most 8), labelled like dcgm-exporter
scraped by Prometheus (gpu, UUID, pci_bus_id, device, modelName, hostname, DCGM_FI_DRIVER_VERSION, then
instance, job, cluster), and `hpc_job` on the GPUs a job holds (`FleetShape.job`): one 1,024-GPU job on the
first 128 nodes when the fleet is larger than that, then blocks of six nodes holding jobs of 2 nodes, 1 node,
half a node, a quarter node, and one free node.

Behaviour comes from gpudash's simulated node (`gpudash.exporter.sim.simulated.Fleet`): a pool of
`TEMPLATE_NODES` distinct nodes (each its own seed, workload mix, job start and at most one injected fault)
is simulated once, and fleet node n behaves like pool node n % TEMPLATE_NODES, its temperatures shifted by
-2..+2 C (rack airflow) so the hottest GPUs differ from node to node. Fleets up to 8 x TEMPLATE_NODES GPUs
are entirely distinct; larger ones repeat the pool's behaviour under new names. Simulating every GPU
(~170 us a reading) would cost hours at 8,192 GPUs and change nothing a query costs.

Time: `Timeline` names the samples: every scrape interval inside the detail windows (the dashboards'
default range before `end`, and the same range a day earlier for the comparison row), a coarser interval
elsewhere. Every series keeps one sample per coarse interval over the whole span, so no series has gaps.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpudash.catalog import (
    BY_KEY,
    CLOCK_EVENT_REASONS,
    DCGM,
    DRIVER_VERSION_LABEL,
    HPC_JOB_LABEL,
    THERMAL_OR_BRAKE_REASONS,
    Profile,
)
from gpudash.exporter.sim.fleet import Fleet
from gpudash.exporter.sim.spec import FAULTS, Fault
from gpudash.promql.recordings import signals_in

GPUS_PER_NODE = 8
# dcgm-exporter's own windowed counters: the dashboards read them only where the per-code and per-reason series
# are absent, which the generated fleet always has.
NOT_GENERATED = ("xid_count_window", "clock_events_count")
TEMPLATE_NODES = 32
DRIVER_VERSION = "580.159.04"
JOB = "gpu-exporter"
HOUR = 3600
# gpudash_clock_event_active is published for these reasons only: the ones panels and rules select. The other
# five reasons' series sit under other label values, which a query's index lookup never reaches.
REASONS = tuple((bit, name) for bit, name in CLOCK_EVENT_REASONS if name in THERMAL_OR_BRAKE_REASONS)

BIG_JOB_NODES = 128  # the 1,024-GPU job's nodes, laid first when the fleet has more nodes than that
BIG_JOB = "100000"  # sorts before the other jobs, so the job dashboard opens on it
# After the big job, blocks of six nodes; per node, the block's job index of each GPU (-1 = free): a 2-node
# job, a 1-node job, two 4-GPU jobs, a node shared by 2-, 2- and 4-GPU jobs, a free node.
JOB_BLOCK: tuple[tuple[int, ...], ...] = ((0,) * 8, (0,) * 8, (1,) * 8, (2,) * 4 + (3,) * 4,
                                          (4, 4, 5, 5, 6, 6, 6, 6), (-1,) * 8)
JOBS_PER_BLOCK = 7


def cluster_count(gpus: int) -> int:
    return max(2, min(8, gpus // 1024))


@dataclass(frozen=True)
class Window:
    start: int  # unix seconds, inclusive
    end: int  # unix seconds, inclusive


@dataclass(frozen=True)
class Timeline:
    """Which instants get a sample: every `scrape_s` inside a detail window, every `coarse_s` elsewhere."""

    start: int  # unix seconds, inclusive
    end: int  # unix seconds, exclusive: the data's "now"
    detail: tuple[Window, ...]
    scrape_s: int = 15
    coarse_s: int = 120

    def instants(self, lo: int | None = None, hi: int | None = None) -> np.ndarray:
        """Sample instants in [lo, hi) (default: the whole span), ascending, int64 seconds."""
        lo = self.start if lo is None else max(lo, self.start)
        hi = self.end if hi is None else min(hi, self.end)
        grid = np.arange(math.ceil(lo / self.scrape_s) * self.scrape_s, hi, self.scrape_s, dtype=np.int64)
        keep = grid % self.coarse_s == 0
        for w in self.detail:
            keep |= (grid >= w.start) & (grid <= w.end)
        return grid[keep]


def dashboard_timeline(end: int, range_s: int = 6 * HOUR, offset_s: int = 24 * HOUR, margin_s: int = 900,
                       scrape_s: int = 15, coarse_s: int = 120) -> Timeline:
    """Full detail over the default range and the same range `offset_s` earlier, with `margin_s` around each."""
    detail = (Window(end - range_s - margin_s, end),
              Window(end - offset_s - range_s - margin_s, end - offset_s + margin_s))
    return Timeline(end - offset_s - range_s - margin_s, end, detail, scrape_s, coarse_s)


@dataclass(frozen=True)
class FleetShape:
    gpus: int
    seed: int = 0

    def __post_init__(self) -> None:
        if self.gpus < GPUS_PER_NODE or self.gpus % GPUS_PER_NODE:
            raise ValueError(f"{self.gpus} GPUs: need a positive multiple of {GPUS_PER_NODE}")

    @property
    def nodes(self) -> int:
        return self.gpus // GPUS_PER_NODE

    @property
    def clusters(self) -> int:
        return cluster_count(self.gpus)

    def cluster(self, node: int) -> str:
        return f"gpu-{chr(ord('a') + node * self.clusters // self.nodes)}"

    def hostname(self, node: int) -> str:
        return f"{self.cluster(node)}-node-{node:05d}"

    def instance(self, node: int) -> str:
        c = node * self.clusters // self.nodes
        return f"10.{16 + c}.{node >> 8 & 255}.{node & 255}:9400"

    def job(self, node: int, gpu: int) -> str:
        """The `hpc_job` a GPU is attributed to; "" for a free GPU."""
        big = self.nodes > BIG_JOB_NODES
        if big and node < BIG_JOB_NODES:
            return BIG_JOB
        block, row = divmod(node - (BIG_JOB_NODES if big else 0), len(JOB_BLOCK))
        index = JOB_BLOCK[row][gpu]
        return "" if index < 0 else str(200_000 + block * JOBS_PER_BLOCK + index)

    def uuid(self, node: int, gpu: int) -> str:
        h = f"{random.Random(f'{self.seed}/{node}/{gpu}').getrandbits(128):032x}"
        return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


# ------------------------------------------------------------------------------------------ the pool


@dataclass
class NodeTrace:
    """One simulated pool node over a Timeline: per catalog key, an array [gpu, instant] (NaN = absent)."""

    values: dict[str, np.ndarray]
    xid_counts: list[dict[int, np.ndarray]]  # per GPU: code -> cumulative count (NaN before the first)
    processes: list[tuple[int, str]]  # per GPU: (pid, name) of its job's process; fb in values["process_fb_used"]
    phase_s: int  # this node's scrape offset within the interval


def _node_plan(seed: int, node: int, timeline: Timeline) -> tuple[dict[int, str], dict[int, list[Fault]], int]:
    """Workloads, faults (in job time) and job start (unix seconds) of one pool node."""
    rng = random.Random(f"fleet/{seed}/{node}")
    kind = rng.choices(("train", "inference", "idle", "mixed"), (60, 15, 10, 15))[0]
    workloads: dict[int, str] = {}
    if kind in ("inference", "idle"):
        workloads = dict.fromkeys(range(GPUS_PER_NODE), kind)
    elif kind == "mixed":
        workloads = {4: "inference", 5: "inference", 6: "idle", 7: "idle"}
    span = timeline.end - timeline.start
    # Most jobs started before the span; one node in ten starts its job inside it (idle, then a warm-up ramp).
    job_start = timeline.start - rng.randrange(HOUR, 12 * HOUR)
    if rng.random() < 0.1:
        job_start = timeline.start + rng.randrange(span)
    faults: dict[int, list[Fault]] = {}
    if rng.random() < 0.3:
        window = rng.choice(timeline.detail)
        at = rng.randrange(window.start, window.end)
        fault_kind = rng.choice(FAULTS)
        duration = float(rng.randrange(20 * 60, 90 * 60))
        arg = {"leak": float(rng.randrange(30 * 60, 120 * 60)), "xid": float(rng.choice((13, 31, 43, 48, 63, 94)))}
        fault = Fault(fault_kind, float(max(at - job_start, 0)), None if fault_kind == "leak" else duration,
                      arg.get(fault_kind))
        faults[rng.randrange(GPUS_PER_NODE)] = [fault]
    return workloads, faults, job_start


def simulate_node(seed: int, node: int, timeline: Timeline, keys: Sequence[str]) -> NodeTrace:
    """Run one pool node of the simulated fleet over every instant of the timeline."""
    workloads, faults, job_start = _node_plan(seed, node, timeline)
    fleet = Fleet(GPUS_PER_NODE, seed * 1000 + node, workloads, faults, epoch=float(job_start))
    instants = timeline.instants()
    wanted = set(keys) | {"clock_event_reasons", "fb_used"}
    values = {k: np.full((GPUS_PER_NODE, len(instants)), np.nan) for k in wanted}
    xids: list[dict[int, np.ndarray]] = [{} for _ in range(GPUS_PER_NODE)]
    processes: list[tuple[int, str]] = [(0, "") for _ in range(GPUS_PER_NODE)]
    for g in range(GPUS_PER_NODE):
        for j, when in enumerate(instants.tolist()):
            reading = fleet.sample_gpu(g, when - job_start)
            if not reading.up:
                continue
            for key in wanted:
                if key in reading.values:
                    values[key][g, j] = reading.values[key]
            for code, count in reading.xid.counts.items():
                xids[g].setdefault(code, np.full(len(instants), np.nan))[j] = count
            if reading.processes:
                p = reading.processes[0]
                processes[g] = (p.pid, p.name)
                if "process_fb_used" in values:
                    values["process_fb_used"][g, j] = p.fb_used_mib
    return NodeTrace(values, xids, processes, (node * 7) % timeline.scrape_s)


# ------------------------------------------------------------------------------------------ OpenMetrics


def _texts(values: np.ndarray) -> list[str | None]:
    """Values as OpenMetrics text (integers without a decimal point); None where the value is absent."""
    present = ~np.isnan(values)
    out: list[str | None] = [None] * len(values)
    filled = values[present]
    if filled.size and np.all(filled == np.round(filled)) and np.all(np.abs(filled) < 2**53):
        texts = [str(v) for v in filled.astype(np.int64).tolist()]
    else:
        texts = [repr(v) for v in np.round(filled, 4).tolist()]
    for j, text in zip(np.flatnonzero(present).tolist(), texts, strict=True):
        out[j] = text
    return out


def _samples(texts: Sequence[str | None], stamps: Sequence[str]) -> list[str]:
    return [f"{v} {t}" for v, t in zip(texts, stamps, strict=True) if v is not None]


TEMP_KEYS = ("gpu_temp", "hbm_temp")
TEMP_SHIFTS = (-2, -1, 0, 1, 2)


@dataclass(frozen=True)
class Series:
    """One series of a pool GPU: catalog key, extra labels, and its samples as 'value timestamp' strings."""

    key: str
    extra: str  # ',clock_event="gpu_idle"' and the like, or ""
    samples: tuple[list[str], ...]  # one list per temperature shift for TEMP_KEYS, else a single list


def pool_series(trace: NodeTrace, gpu: int, keys: Sequence[str], sl: slice, instants: np.ndarray) -> list[Series]:
    """Every series one pool GPU publishes over the instants `sl` selects, formatted once for all its copies."""
    stamps = [str(t) for t in (instants[sl] + trace.phase_s).tolist()]
    out: list[Series] = []
    for key in keys:
        if key == "clock_event_active":
            reasons = trace.values["clock_event_reasons"][gpu, sl]
            for bit, name in REASONS:
                active = np.where(np.isnan(reasons), np.nan, (np.nan_to_num(reasons).astype(np.int64) & bit) > 0)
                out.append(Series(key, f',clock_event="{name}"', (_samples(_texts(active), stamps),)))
        elif key == "xid_total":
            for code, counts in sorted(trace.xid_counts[gpu].items()):
                samples = _samples(_texts(counts[sl]), stamps)
                if samples:
                    out.append(Series(key, f',xid="{code}"', (samples,)))
        elif key == "process_fb_used":
            pid, name = trace.processes[gpu]
            samples = _samples(_texts(trace.values[key][gpu, sl]), stamps)
            if samples:
                out.append(Series(key, f',pid="{pid}",process_name="{name}"', (samples,)))
        elif key in TEMP_KEYS:
            base = trace.values[key][gpu, sl]
            out.append(Series(key, "", tuple(_samples(_texts(base + s), stamps) for s in TEMP_SHIFTS)))
        else:
            samples = _samples(_texts(trace.values[key][gpu, sl]), stamps)
            if samples:
                out.append(Series(key, "", (samples,)))
    return out


BUS_IDS = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")  # each GPU's PCI bus on the node


def gpu_identity(shape: FleetShape, node: int, gpu: int) -> str:
    """The labels dcgm-exporter gives GPU `gpu` of fleet node `node` (without its job's)."""
    return (f'gpu="{gpu}",UUID="{shape.uuid(node, gpu)}",pci_bus_id="00000000:{BUS_IDS[gpu]}:00.0",'
            f'device="nvidia{gpu}",modelName="NVIDIA H200",hostname="{shape.hostname(node)}",'
            f'{DRIVER_VERSION_LABEL}="{DRIVER_VERSION}"')


def gpu_target(shape: FleetShape, node: int) -> str:
    """The labels Prometheus adds to every series of the node's GPU exporter."""
    return f'instance="{shape.instance(node)}",job="{JOB}",cluster="{shape.cluster(node)}"'


def node_text(shape: FleetShape, node: int, pool: Sequence[Sequence[Series]], profile: Profile = DCGM) -> Iterator[str]:
    """The OpenMetrics lines of fleet node `node` (pool[g] are its GPUs' series), one string per series."""
    shift = random.Random(f"airflow/{shape.seed}/{node}").randrange(len(TEMP_SHIFTS))
    target = gpu_target(shape, node)
    for g, series in enumerate(pool):
        job = shape.job(node, g)
        gpu_labels = gpu_identity(shape, node, g) + (f',{HPC_JOB_LABEL}="{job}"' if job else "")
        for s in series:
            samples = s.samples[shift] if len(s.samples) > 1 else s.samples[0]
            prefix = f"{profile.ref(s.key).name}{{{gpu_labels}{s.extra},{target}}} "
            yield prefix + ("\n" + prefix).join(samples) + "\n"


def keys_read(dashboards: Iterable[dict[str, Any]], profile: Profile = DCGM) -> list[str]:
    """Catalog keys the dashboards read (through a panel, a recording rule or a variable) and we publish."""
    found: set[str] = set()
    for board in dashboards:
        texts = [t.get("expr", "") for p in board["panels"] for t in p.get("targets", [])]
        texts += [str(v.get("definition") or "") for v in board.get("templating", {}).get("list", [])]
        for text in texts:
            found |= {s.key for s in signals_in(text, profile)}
    return published_keys(found, profile)


def published_keys(keys: Iterable[str], profile: Profile = DCGM) -> list[str]:
    """The catalog keys, in catalog order, that this generator publishes and the profile names."""
    wanted = set(keys)
    skipped = ("gpu_up", "xid_last_time", *NOT_GENERATED)
    return [k for k in BY_KEY if k in wanted and profile.has(k) and k not in skipped]
