"""Which job, pod or container each GPU (and each GPU process) belongs to: labels added to its series.

An `Attributor` answers from what it last read; the poller calls `refresh` before it renders, so what
an attributor reads (a directory, the kubelet, /proc) is never read on the scrape path, and a scrape
never waits for it. Compatible with dcgm-exporter:

- `gpu_copies(gpu)` gives one label set per copy of the GPU's series. An empty tuple means "the series
  unchanged, once"; N label sets mean N copies, each with its labels (dcgm-exporter's `hpc_job`: one
  copy per job on the GPU, the unlabelled original dropped). Labels that name the same thing for every
  copy (a pod's `pod`, `namespace`, `container`) are given in every set.
- `process_labels(pid)` gives the labels of one GPU process's series (its job or pod), or ().
- `instance_copies(attributor, gpu, gpu_instance)`: the same for a MIG instance's series, from the attributors
  that know instances (`InstanceAttributor`: the HPC job mapping's `<gpu>.<gi>` files); () for the others.

`combined(...)` joins several: copies multiply (each HPC job copy carries the pod labels too).

An attributor that knows who holds its jobs also has `job_info()`: one label set per job (the job label,
then user, account, partition, job name), published as `gpudash_job_info`; `job_info(attributor)` asks
any attributor, combined or not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from gpudash.exporter.source import GpuIdentity

Labels = tuple[tuple[str, str], ...]


class Attributor(Protocol):
    def refresh(self, gpus: Sequence[GpuIdentity], now: float) -> None:
        """Bring what it knows up to date; cheap when nothing changed, never raises."""
        ...

    def gpu_copies(self, gpu: GpuIdentity) -> tuple[Labels, ...]: ...

    def process_labels(self, pid: int) -> Labels: ...

    def close(self) -> None: ...


@runtime_checkable
class InstanceAttributor(Protocol):
    def instance_copies(self, gpu: GpuIdentity, gpu_instance: int) -> tuple[Labels, ...]:
        """One label set per copy of a MIG instance's series, as `gpu_copies` for a GPU's."""
        ...


def instance_copies(attributor: Attributor | None, gpu: GpuIdentity, gpu_instance: int) -> tuple[Labels, ...]:
    """The copies of a MIG instance's series: those of every part that knows instances, multiplied."""
    parts = attributor.parts if isinstance(attributor, Combined) else (attributor,) if attributor else ()
    copies: tuple[Labels, ...] = ((),)
    for part in parts:
        mine = part.instance_copies(gpu, gpu_instance) if isinstance(part, InstanceAttributor) else ()
        if mine:
            copies = tuple(_merge(a, b) for a in copies for b in mine)
    return () if copies == ((),) else copies


@runtime_checkable
class KnowsJobInfo(Protocol):
    def job_info(self) -> tuple[Labels, ...]: ...


def job_info(attributor: Attributor | None) -> tuple[Labels, ...]:
    """Who holds each job the attributor knows, or () when it does not say."""
    if isinstance(attributor, Combined):
        return tuple(info for part in attributor.parts for info in job_info(part))
    return attributor.job_info() if isinstance(attributor, KnowsJobInfo) else ()


class Combined:
    """Several attributors as one: their copies multiplied, their process labels joined (first wins)."""

    def __init__(self, parts: Sequence[Attributor]) -> None:
        self.parts = tuple(parts)

    def refresh(self, gpus: Sequence[GpuIdentity], now: float) -> None:
        for part in self.parts:
            part.refresh(gpus, now)

    def gpu_copies(self, gpu: GpuIdentity) -> tuple[Labels, ...]:
        copies: tuple[Labels, ...] = ((),)
        for part in self.parts:
            mine = part.gpu_copies(gpu)
            if mine:
                copies = tuple(_merge(a, b) for a in copies for b in mine)
        return () if copies == ((),) else copies

    def process_labels(self, pid: int) -> Labels:
        labels: Labels = ()
        for part in self.parts:
            labels = _merge(labels, part.process_labels(pid))
        return labels

    def close(self) -> None:
        for part in self.parts:
            part.close()


def _merge(first: Labels, second: Labels) -> Labels:
    names = {name for name, _ in first}
    return first + tuple((name, value) for name, value in second if name not in names)


def combined(parts: Sequence[Attributor]) -> Attributor | None:
    """None when there is nothing to attribute, the one attributor, or their combination."""
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else Combined(parts)
