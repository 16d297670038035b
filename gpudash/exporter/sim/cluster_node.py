"""One node of a simulated cluster, as the exporter runs it: its fleet, and the attributor that labels its jobs.

Each node of a simulated cluster is its own ``gpudash exporter --simulate`` process, started with the same
seed, job options and faults, and its own ``--hostname``. They agree on everything shared (which job holds
which GPU, each job's checkpoints, a straggler elsewhere slowing this node's GPUs of its job) because the
layout and the physics are pure functions of (seed, spec, t), and t is measured from one epoch: by default
the start of the current UTC hour, so nodes started separately within that hour agree; ``--sim-epoch``
pins it.
"""

from __future__ import annotations

import math
import socket
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from gpudash.catalog import HPC_JOB_LABEL
from gpudash.errors import UsageError
from gpudash.exporter.attribution import Labels
from gpudash.exporter.sim.fleet import Fleet
from gpudash.exporter.sim.jobs import JobLayout, layout_from_specs, read_job_file
from gpudash.exporter.sim.noise import name_key, uniform
from gpudash.exporter.sim.spec import Fault, parse_node_fault
from gpudash.exporter.source import GpuIdentity

HOUR = 3600.0


class SimulatedAttributor:
    """The Attributor of a simulated node: ``hpc_job`` on the GPUs a job holds while it runs, and on its processes
    (a foreign process carries its own job), as dcgm-exporter's HPC job mapping would show them."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self._copies: dict[int, tuple[Labels, ...]] = {}
        self._processes: dict[int, str] = {}

    def refresh(self, gpus: Sequence[GpuIdentity], now: float) -> None:
        t = max(0.0, now - self.fleet.epoch)
        copies: dict[int, tuple[Labels, ...]] = {}
        processes: dict[int, str] = {}
        for gpu in gpus:
            job = self.fleet.job(gpu.index, t)
            copies[gpu.index] = (((HPC_JOB_LABEL, job.id),),) if job is not None else ()
            processes.update(self.fleet.process_jobs(gpu.index, t))
        self._copies, self._processes = copies, processes

    def gpu_copies(self, gpu: GpuIdentity) -> tuple[Labels, ...]:
        return self._copies.get(gpu.index, ())

    def process_labels(self, pid: int) -> Labels:
        job = self._processes.get(pid)
        return ((HPC_JOB_LABEL, job),) if job is not None else ()

    def close(self) -> None:
        """Nothing to release."""


def default_epoch(now: float) -> float:
    """The start of the current UTC hour: what separately started nodes of one cluster agree on."""
    return math.floor(now / HOUR) * HOUR


def cluster_fleet(gpus: int, seed: int, faults: Iterable[str], *, node: str, layout: JobLayout,
                  epoch: float) -> Fleet:
    """Node ``node`` of the cluster ``layout`` describes: its own faults, the others' that reach it through a
    job, and its UUIDs and noise from (seed, node), so the nodes of one cluster, started with one seed, differ."""
    layout.check_nodes(gpus)
    own: dict[int, list[Fault]] = {}
    others: list[tuple[str, int, Fault]] = []
    for spec in faults:
        where, index, fault = parse_node_fault(spec)
        if where is None or where == node:
            own.setdefault(index, []).append(fault)
        else:
            others.append((where, index, fault))
    node_seed = int(uniform(seed, name_key(node)) * 2**31)
    return Fleet(gpus, node_seed, {}, own, epoch, node=node, layout=layout, cluster_faults=others, cluster_seed=seed)


def cluster_node(
    gpus: int,
    seed: int,
    faults: Sequence[str],
    *,
    node: str,
    nodes: Sequence[str],
    default_jobs: bool,
    job_specs: Sequence[str],
    epoch: float,
    workloads: Sequence[str] = (),
) -> tuple[Fleet, SimulatedAttributor]:
    """This node's fleet of the cluster the job options describe, and its attributor."""
    name = node or socket.gethostname()
    layout = layout_from_specs(job_specs, default_jobs, seed, nodes, gpus)
    if nodes and name not in nodes:
        raise UsageError(f"--hostname {name!r} is not one of --sim-nodes {','.join(nodes)}: "
                         "each node of a simulated cluster runs with its own name")
    if workloads:
        raise UsageError("--workload with simulated jobs: a job's kind sets its GPUs' workload (ID/KIND=...)")
    fleet = cluster_fleet(gpus, seed, faults, node=name, layout=layout, epoch=epoch)
    return fleet, SimulatedAttributor(fleet)


def cluster_from_options(
    gpus: int,
    seed: int,
    workloads: Sequence[str],
    faults: Sequence[str],
    *,
    hostname: str,
    job_specs: Sequence[str],
    jobs: str | None,
    nodes: str,
    epoch: float | None,
) -> tuple[Fleet, SimulatedAttributor] | None:
    """The exporter's ``--sim-job``/``--sim-jobs``/``--sim-nodes``/``--sim-epoch``: this node of the cluster they
    describe and its attributor, or None without job options (a plain simulated node)."""
    if not (job_specs or jobs):
        if nodes or epoch is not None:
            raise UsageError("--sim-nodes and --sim-epoch describe simulated jobs: give --sim-job or --sim-jobs too")
        return None
    from_file = read_job_file(Path(jobs)) if jobs and jobs != "default" else []
    return cluster_node(
        gpus, seed, faults, node=hostname, nodes=[n.strip() for n in nodes.split(",") if n.strip()],
        default_jobs=jobs == "default", job_specs=[*from_file, *job_specs],
        epoch=default_epoch(time.time()) if epoch is None else epoch, workloads=workloads,
    )
