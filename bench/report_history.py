"""A fleet's past with known answers for `gpudash report`: jobs of known teams, idle stretches, outages and health
faults, written as OpenMetrics (for promtool tsdb create-blocks-from), and the figures the report must find.

Time is in whole samples of `sample_s` from `base`; the report covers (base, base + samples x sample_s], so the
truth adds up samples 1..samples. A job, an idle stretch, an outage or a fault covers samples [start, end).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from gpudash.catalog import DCGM, JOB_INFO, PROMETHEUS_ALERTS
from gpudash.check.prometheus_api import PrometheusClient, TimeRange
from gpudash.escape import label_value
from gpudash.health.xid import XID_TABLE
from gpudash.promql.inline import inline
from gpudash.report.collect import chunks
from gpudash.stack.history import OpenMetricsHistory, SeededPrometheus

UTIL, TENSOR = DCGM.ref("gpu_util").name, DCGM.ref("tensor_active").name
IDLE_BELOW = 5.0  # thresholds.yaml alerts.allocated_idle.util_below_percent


@dataclass(frozen=True)
class Job:
    id: str
    account: str
    user: str
    gpus: tuple[int, ...]
    start: int
    end: int
    util: float = 90.0
    tensor: float = 0.5
    idle: tuple[tuple[tuple[int, ...], int, int], ...] = ()  # (gpus, start, end): util 0, tensor 0
    published: bool = True  # False: no gpudash_job_info (its team is "(unknown)")


@dataclass(frozen=True)
class Fault:
    gpu: int
    alertname: str
    action: str
    start: int
    end: int
    xid: str = ""

    @property
    def klass(self) -> str:
        if self.alertname == "GPUXidError":
            return f"XID {XID_TABLE[int(self.xid)].cls}"
        return self.alertname


@dataclass(frozen=True)
class Fleet:
    nodes: int
    gpus_per_node: int
    samples: int
    sample_s: int
    jobs: tuple[Job, ...]
    outages: tuple[tuple[tuple[int, ...], int, int], ...] = ()  # (gpus, start, end): no series at all
    faults: tuple[Fault, ...] = ()
    idle_util: float = 0.0
    free_util: float = 0.0

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @cached_property
    def jobs_of(self) -> dict[int, tuple[Job, ...]]:
        """Each GPU's jobs, so a sample looks at a few jobs, not the fleet's."""
        out: dict[int, list[Job]] = {}
        for job in self.jobs:
            for gpu in job.gpus:
                out.setdefault(gpu, []).append(job)
        return {gpu: tuple(jobs) for gpu, jobs in out.items()}

    @cached_property
    def faults_of(self) -> dict[int, tuple[Fault, ...]]:
        out: dict[int, list[Fault]] = {}
        for fault in self.faults:
            out.setdefault(fault.gpu, []).append(fault)
        return {gpu: tuple(faults) for gpu, faults in out.items()}

    def node(self, gpu: int) -> int:
        return gpu // self.gpus_per_node


@dataclass
class Truth:
    """What the report must find (GPU-seconds, and interruption episodes by class)."""

    busy: dict[str, float] = field(default_factory=dict)
    idle: dict[str, float] = field(default_factory=dict)
    not_reporting: float = 0.0
    alert_unheld: float = 0.0
    unallocated: float = 0.0
    utilization: float = 0.0
    goodput: float = 0.0
    interruptions: dict[str, int] = field(default_factory=dict)
    capacity: float = 0.0


def _within(at: int, start: int, end: int) -> bool:
    return start <= at < end


def _state(fleet: Fleet, gpu: int, at: int) -> tuple[bool, Job | None, float, float]:
    """(reporting, its job, utilization, tensor activity) of one GPU at one sample."""
    if any(gpu in gpus and _within(at, a, b) for gpus, a, b in fleet.outages):
        return False, None, 0.0, 0.0
    for job in fleet.jobs_of.get(gpu, ()):
        if _within(at, job.start, job.end):
            if any(gpu in gpus and _within(at, a, b) for gpus, a, b in job.idle):
                return True, job, fleet.idle_util, 0.0
            return True, job, job.util, job.tensor
    return True, None, fleet.free_util, 0.0


def _acting(fleet: Fleet, gpu: int, at: int) -> list[Fault]:
    return [f for f in fleet.faults_of.get(gpu, ()) if _within(at, f.start, f.end)]


def truth(fleet: Fleet, team_of: dict[str, str] | None = None) -> Truth:
    out = Truth(capacity=fleet.gpus * fleet.samples * fleet.sample_s)
    dt = fleet.sample_s
    for at in range(1, fleet.samples + 1):
        for gpu in range(fleet.gpus):
            up, job, util, tensor = _state(fleet, gpu, at)
            if not up:
                out.not_reporting += dt
                continue
            out.utilization += util / 100 * dt
            out.goodput += tensor * dt
            if job is not None:
                team = job.account if job.published else "(unknown)"
                into = out.idle if util < IDLE_BELOW else out.busy
                into[team] = into.get(team, 0.0) + dt
            elif any(f.action != "none" for f in _acting(fleet, gpu, at)):
                out.alert_unheld += dt
            else:
                out.unallocated += dt
    for fault in fleet.faults:
        if fault.action != "none":
            out.interruptions[fault.klass] = out.interruptions.get(fault.klass, 0) + 1
    return out


def _gpu_labels(fleet: Fleet, gpu: int, cluster: str) -> str:
    node = fleet.node(gpu)
    return (f'cluster="{cluster}",instance="n{node}:9400",job="gpu-exporter",gpu="{gpu % fleet.gpus_per_node}",'
            f'UUID="GPU-{gpu:08x}-0000-4000-8000-000000000000",hostname="n{node}"')


def openmetrics(fleet: Fleet, base: int, cluster: str = "c1", extra: int = 5) -> str:
    """Samples 0 .. samples + extra (the recording rules need a little past the report's end)."""
    history = OpenMetricsHistory()
    for at in range(0, fleet.samples + extra + 1):
        moment = base + at * fleet.sample_s
        for name, labels, value in _samples(fleet, at, cluster):
            history.add(name, labels, value, moment)
    return history.text()


def _samples(fleet: Fleet, at: int, cluster: str) -> Iterator[tuple[str, str, float]]:
    infos: set[tuple[int, Job]] = set()
    for gpu in range(fleet.gpus):
        up, job, util, tensor = _state(fleet, gpu, at)
        labels = _gpu_labels(fleet, gpu, cluster)
        if up:
            held = f'{labels},hpc_job="{job.id}"' if job is not None else labels
            yield UTIL, held, util
            yield TENSOR, held, tensor
            if job is not None and job.published:
                infos.add((fleet.node(gpu), job))
        for fault in _acting(fleet, gpu, at):
            xid = f',xid="{fault.xid}"' if fault.xid else ""
            yield (PROMETHEUS_ALERTS, f'alertname="{fault.alertname}",alertstate="firing",severity="critical",'
                   f'action="{fault.action}",{labels}{xid}', 1.0)
    for node, job in sorted(infos, key=lambda pair: (pair[0], pair[1].id)):
        yield (JOB_INFO, f'cluster="{cluster}",instance="n{node}:9400",job="gpu-exporter",hostname="n{node}",'
               f'hpc_job="{job.id}",user="{job.user}",account="{job.account}",partition="gpu",'
               f'job_name="{job.id}-run"', 1.0)


def _promtool(*args: str) -> None:
    done = subprocess.run([shutil.which("promtool") or "promtool", "tsdb", "create-blocks-from", *args],
                          capture_output=True, text=True, timeout=1800)
    if done.returncode:
        raise RuntimeError(f"promtool tsdb create-blocks-from {args[0]} failed: {done.stderr[-2000:]}")


def _blocks(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []


@contextmanager
def backfilled(text: str, rules: Sequence[tuple[str, str]], start: int, end: int, interval_s: int, work: Path,
               prometheus_args: Sequence[str] = (), recordings: Mapping[str, str] | None = None
               ) -> Iterator[SeededPrometheus]:
    """A Prometheus holding the OpenMetrics text and the recording rules (record, expression) over [start, end].

    A first Prometheus holding the raw blocks evaluates each rule with a range query at the rule interval, as the
    rules manager would have at each evaluation, and the answers become blocks of their own (promtool's rule
    backfill, on Prometheus 2.42 here, wrote no block for the same rules and range). That Prometheus holds no
    recorded series, so each one a rule reads is inlined: those of `recordings` (record -> expression, by default
    the rules themselves).
    """
    known = dict(rules) if recordings is None else recordings
    (work / "history.om").write_text(text, encoding="utf-8")
    _promtool("openmetrics", "--quiet", str(work / "history.om"), str(work / "raw"))
    raw = _blocks(work / "raw")
    recorded = OpenMetricsHistory()
    with SeededPrometheus("global: {}\n", blocks=raw, extra_args=prometheus_args) as past:
        client = PrometheusClient(past.url, timeout=600)
        for record, expr in rules:
            query = inline(expr, known, interval_s)
            for lo, hi in chunks(start, end, interval_s, 1440):  # a day at 1 minute: answers well under 32 MiB
                for series in client.range(query, TimeRange(float(hi), hi - lo, interval_s)):
                    labels = ",".join(f'{k}="{label_value(v)}"' for k, v in sorted(series["metric"].items())
                                      if k != "__name__")
                    for ts, value in series["values"]:
                        recorded.add(record, labels, float(value), float(ts))
    (work / "history.om").write_text(recorded.text(), encoding="utf-8")
    _promtool("openmetrics", "--quiet", str(work / "history.om"), str(work / "recorded"))
    (work / "history.om").unlink()
    with SeededPrometheus("global: {}\n", blocks=raw + _blocks(work / "recorded"),
                          extra_args=prometheus_args) as prometheus:
        yield prometheus
