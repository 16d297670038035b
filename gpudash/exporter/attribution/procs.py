"""Per-process attribution: which Slurm job or Kubernetes pod each GPU process belongs to, from its cgroup.

NVML names the processes on a GPU by host pid; ``<proc_root>/<pid>/cgroup`` says where the process sits
(shared/reference/job-attribution.md sections 5.2 and 5.3), read from the v2 line first, then the v1
``memory``, ``devices`` and any other hierarchy:

- Slurm: a ``job_<id>`` component (cgroup v1 ``/slurm/uid_<uid>/job_<id>/step_<n>/...``, cgroup v2
  ``/system.slice/slurmstepd.scope/job_<id>/...``), or from Slurm 26.05 the job's SLUID as the component
  after ``slurmstepd.scope`` (``<node>_slurmstepd.scope`` with several slurmds). A SLUID is turned into
  the job id by ``sluid_lookup`` (the prolog records ``<mapping dir>/.sluid/<SLUID>``). Label: ``hpc_job``.
- Kubernetes: the pod UID from a ``pod<uid>`` component (systemd driver: ``..._pod<uid with _>.slice``,
  cgroupfs: ``/kubepods/<qos>/pod<uid>``) and the container id from the leaf (``cri-containerd-<id>.scope``,
  ``crio-<id>.scope``, ``crio-<id>``, ``docker-<id>.scope``, a bare id, or ``...:cri-containerd:<id>``).
  Their names come from the hooks a Kubernetes attributor supplies: ``container_lookup`` (container id ->
  labels) first, then ``pod_lookup`` (pod UID -> labels, e.g. pod and namespace). Without hooks a pod's
  process gets no labels.

A result is cached per (pid, start time from ``<proc_root>/<pid>/stat``), so a reused pid is read afresh and
never inherits the previous process's job; entries not asked for since the previous refresh are forgotten.
An answer that depends on a hook or a SLUID file that did not know it yet is asked again at the next refresh.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpudash.catalog import HPC_JOB_LABEL
from gpudash.exporter.attribution import Labels
from gpudash.exporter.source import GpuIdentity

log = logging.getLogger("gpudash.exporter")

PodLookup = Callable[[str], Labels | None]  # pod UID -> its labels (pod, namespace, ...), None: not known
ContainerLookup = Callable[[str], Labels | None]  # container id -> labels (pod, namespace, container)
SluidLookup = Callable[[str], str | None]  # Slurm 26.05 SLUID -> job id, None: not known

_JOB = re.compile(r"job_([0-9]+)", re.ASCII)
_STEPD_SCOPE = re.compile(r"(?:.+_)?slurmstepd\.scope", re.ASCII)
_SLUID = re.compile(r"[A-Za-z0-9]{1,64}", re.ASCII)
_POD = re.compile(r"(?:.*-)?pod([0-9a-f]{8}[0-9a-f_-]*)(?:\.slice)?", re.ASCII)
_CONTAINER = re.compile(r"(?:(?:cri-containerd|crio|docker)-)?([0-9a-f]{64})(?:\.scope)?", re.ASCII)
_CRI_SUFFIX = re.compile(r".*:cri-containerd:([0-9a-f]{64})", re.ASCII)
_NOT_A_SLUID = frozenset({"system"})  # the idle slurmstepds' own directory
MAX_CGROUP_BYTES = 16 * 1024


@dataclass(frozen=True)
class CgroupOwner:
    """What a process's cgroup says about who runs it; every field None when it says nothing."""

    slurm_job: str | None = None
    sluid: str | None = None
    pod_uid: str | None = None
    container_id: str | None = None


def owner_from_cgroup(text: str) -> CgroupOwner:
    """The owner named by a /proc/<pid>/cgroup text, from the most telling hierarchy that names one."""
    for path in _paths_by_preference(text):
        owner = owner_from_path(path)
        if owner != CgroupOwner():
            return owner
    return CgroupOwner()


def _paths_by_preference(text: str) -> list[str]:
    ranked: list[tuple[int, str]] = []
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts
        names = set(controllers.split(","))
        rank = 0 if hierarchy == "0" and not controllers else 1 if "memory" in names else 2 if "devices" in names else 3
        ranked.append((rank, path))
    return [path for _, path in sorted(ranked, key=lambda pair: pair[0])]


def owner_from_path(path: str) -> CgroupOwner:
    """The owner named by one cgroup path (relative to its hierarchy's mount)."""
    components = [c for c in path.split("/") if c]
    slurm_job = sluid = pod_uid = container_id = None
    for i, component in enumerate(components):
        if (job := _JOB.fullmatch(component)) is not None:
            slurm_job = job.group(1)
        elif (_STEPD_SCOPE.fullmatch(component) and i + 1 < len(components)
              and _SLUID.fullmatch(components[i + 1]) and components[i + 1] not in _NOT_A_SLUID):
            sluid = components[i + 1]
        elif (pod := _POD.fullmatch(component.split(":", 1)[0])) is not None:  # also "<pod slice>:cri-containerd:<id>"
            pod_uid = pod.group(1).replace("_", "-")
    if pod_uid is not None and components:
        leaf = components[-1]
        match = _CONTAINER.fullmatch(leaf) or _CRI_SUFFIX.fullmatch(leaf)
        container_id = match.group(1) if match else None
    if slurm_job is not None:
        sluid = None
    return CgroupOwner(slurm_job, sluid, pod_uid, container_id)


@dataclass(frozen=True)
class _Known:
    labels: Labels
    final: bool  # False: a hook or a SLUID file did not know it yet; ask again after the next refresh


class ProcessAttribution:
    """The `Attributor` of GPU processes: labels per pid from /proc, no copies of GPU series."""

    def __init__(self, proc_root: Path = Path("/proc"), *, job_label: str = HPC_JOB_LABEL,
                 sluid_lookup: SluidLookup | None = None, pod_lookup: PodLookup | None = None,
                 container_lookup: ContainerLookup | None = None) -> None:
        self.proc_root = proc_root
        self.job_label = job_label
        self.sluid_lookup = sluid_lookup
        self.pod_lookup = pod_lookup
        self.container_lookup = container_lookup
        self._cache: dict[tuple[int, int], _Known] = {}
        self._asked: set[tuple[int, int]] = set()
        self._lock = threading.Lock()  # the fast and the slow sweep both render, so both ask
        self._hook_failing = False
        self.reads = 0  # cgroup files read since start

    def refresh(self, gpus: Sequence[GpuIdentity], now: float) -> None:
        """Forget processes not asked about since the last refresh, and answers that were not final."""
        with self._lock:
            self._cache = {key: known for key, known in self._cache.items() if key in self._asked and known.final}
            self._asked = set()

    def gpu_copies(self, gpu: GpuIdentity) -> tuple[Labels, ...]:
        return ()

    def process_labels(self, pid: int) -> Labels:
        started = self._start_time(pid)
        if started is None:
            return ()
        key = (pid, started)
        with self._lock:
            self._asked.add(key)
            known = self._cache.get(key)
            if known is None:
                known = self._cache[key] = self._resolve(pid)
        return known.labels

    def close(self) -> None:
        with self._lock:
            self._cache.clear()

    def _start_time(self, pid: int) -> int | None:
        """Field 22 of /proc/<pid>/stat (clock ticks after boot): with the pid, it names one process."""
        try:
            text = (self.proc_root / str(pid) / "stat").read_bytes()[:4096].decode("ascii", "replace")
            return int(text.rsplit(")", 1)[1].split()[19])
        except (OSError, IndexError, ValueError):
            return None

    def _resolve(self, pid: int) -> _Known:
        try:
            raw = (self.proc_root / str(pid) / "cgroup").read_bytes()[:MAX_CGROUP_BYTES]
        except OSError:
            return _Known((), True)
        self.reads += 1
        owner = owner_from_cgroup(raw.decode("utf-8", "replace"))
        if owner.slurm_job is not None:
            return _Known(((self.job_label, owner.slurm_job),), True)
        if owner.sluid is not None:
            job = self.sluid_lookup(owner.sluid) if self.sluid_lookup else None
            return _Known(((self.job_label, job),) if job else (), job is not None or self.sluid_lookup is None)
        if owner.pod_uid is not None:
            return self._pod(owner)
        return _Known((), True)

    def _pod(self, owner: CgroupOwner) -> _Known:
        hooks = self.container_lookup is not None or self.pod_lookup is not None
        for lookup, key in ((self.container_lookup, owner.container_id), (self.pod_lookup, owner.pod_uid)):
            labels = self._ask(lookup, key)
            if labels:
                return _Known(labels, True)
        return _Known((), not hooks)

    def _ask(self, lookup: Callable[[str], Labels | None] | None, key: str | None) -> Labels | None:
        """A hook's answer; one that raises costs this process its labels until the next refresh, not the sweep."""
        if lookup is None or key is None:
            return None
        try:
            labels = lookup(key)
        except Exception as exc:
            if not self._hook_failing:
                log.warning("per-process attribution: a pod lookup failed: %s (logged once)", exc)
            self._hook_failing = True
            return None
        self._hook_failing = False
        return labels
