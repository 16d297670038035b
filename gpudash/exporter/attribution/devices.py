"""Which GPU a kubelet device id names, and which container holds each GPU: pure functions over the List answer.

Device ids come exactly as the device plugin reported them (shared/reference/job-attribution.md §2.3):

| id | from | points at |
|---|---|---|
| `GPU-<uuid>` | NVIDIA device plugin, whole GPU | that GPU, by UUID |
| `MIG-GPU-<uuid>/<gi>/<ci>` | NVIDIA device plugin, MIG, before R470 | the parent GPU, by the UUID in the id |
| `MIG-<uuid>` | NVIDIA device plugin, MIG, R470 and later | a MIG device: its parent comes from NVML |
| `<id>::<N>` | time-slicing / MPS replica N of `<id>` | what `<id>` points at |
| `nvidia<N>`, `nvidia<N>/gi<M>`, `nvidia<N>/vgpu<K>` | GKE's device plugin (`/dev/nvidia<N>`) | that GPU, by name |

`--kubernetes-gpu-id-type uid` (the default) matches the UUID forms, `device-name` the GKE forms. A
time-slicing replica's number (`::<N>`, `/vgpu<K>`) is the `vgpu` label of `--kubernetes-virtual-gpus`. The
exporter publishes no MIG-instance series, so a MIG slice's pod labels the series of its parent GPU.
A device name is matched against the GPU's `/dev/nvidia<minor>` (the `device` label), which is what GKE's
id names; dcgm-exporter compares it with `nvidia<gpu index>` instead, and the two agree when minor
number and index do.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from gpudash.exporter.attribution.podresources import PodResources
from gpudash.exporter.source import GpuIdentity

GPU_RESOURCE = "nvidia.com/gpu"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
ID_TYPES = ("uid", "device-name")

Kind = Literal["uuid", "device-name", "mig-uuid"]

_REPLICA = re.compile(r"^(?P<id>.+)::(?P<n>\d+)$")
_GKE_VGPU = re.compile(r"/vgpu(\d+)$")
_UUID = r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}"
# Most specific first: the older MIG form holds its parent's UUID, the newer one only its own.
_FORMS: tuple[tuple[re.Pattern[str], Kind, Callable[[re.Match[str]], str]], ...] = (
    (re.compile(rf"^MIG-(?P<gpu>GPU-{_UUID})/\d+/\d+$"), "uuid", lambda m: m["gpu"]),
    (re.compile(rf"^(?P<mig>MIG-{_UUID})$"), "mig-uuid", lambda m: m["mig"]),
    (re.compile(rf"^(?P<gpu>GPU-{_UUID})$"), "uuid", lambda m: m["gpu"]),
    (re.compile(r"^(?P<dev>nvidia\d+)(/gi\d+)?(/vgpu\d+)?$"), "device-name", lambda m: m["dev"]),
)


@dataclass(frozen=True)
class DeviceRef:
    """Where one device id points: a GPU by UUID or device name, or a MIG device by its own UUID."""

    kind: Kind
    key: str
    vgpu: str = ""  # the replica of a time-sliced or shared GPU (`::<N>`, `/vgpu<K>`), "" for a whole one


def parse_device_id(device_id: str) -> DeviceRef | None:
    """The GPU (or MIG device) a kubelet device id names, or None for an id of no known shape."""
    replica = _REPLICA.match(device_id)
    bare = replica["id"] if replica else device_id
    for pattern, kind, key in _FORMS:
        found = pattern.match(bare)
        if found:
            shared = _GKE_VGPU.search(bare) if kind == "device-name" else None
            return DeviceRef(kind, key(found), replica["n"] if replica else shared[1] if shared else "")
    return None


def is_gpu_resource(name: str, extra: Iterable[str] = ()) -> bool:
    """dcgm-exporter's rule: `nvidia.com/gpu`, any `nvidia.com/mig-*`, and the names given as extra."""
    return name == GPU_RESOURCE or name.startswith(MIG_RESOURCE_PREFIX) or name in extra


@dataclass(frozen=True, order=True)
class Holder:
    """The container a GPU is allocated to."""

    namespace: str
    pod: str
    container: str


@dataclass(frozen=True)
class Allocation:
    holder: Holder
    device: DeviceRef


def allocations(pods: Sequence[PodResources], extra_resources: Iterable[str] = ()) -> tuple[Allocation, ...]:
    """Every GPU device of the List answer with its container; other resources and unknown ids left out."""
    extra = frozenset(extra_resources)
    out = []
    for pod in pods:
        for container in pod.containers:
            for devices in container.devices:
                if not is_gpu_resource(devices.resource_name, extra):
                    continue
                for device_id in devices.device_ids:
                    ref = parse_device_id(device_id)
                    if ref is not None:
                        out.append(Allocation(Holder(pod.namespace, pod.name, container.name), ref))
    return tuple(out)


MigParent = Callable[[str], "str | None"]  # MIG device UUID -> its parent GPU's UUID, or None


def gpu_keys(ref: DeviceRef, id_type: str, mig_parent: MigParent) -> str | None:
    """The key a GPU is found by (its UUID in uid mode, nvidia<minor> in device-name mode), or None."""
    if id_type == "device-name":
        return ref.key if ref.kind == "device-name" else None
    if ref.kind == "uuid":
        return ref.key
    if ref.kind == "mig-uuid":
        return mig_parent(ref.key)
    return None


def holders(
    found: Sequence[Allocation],
    gpus: Sequence[GpuIdentity],
    id_type: str,
    mig_parent: MigParent,
    previous: Mapping[int, Holder] | None = None,
) -> dict[int, Holder]:
    """GPU index -> the one container its series are labelled with.

    Several containers can hold one GPU (time-slicing replicas, MIG slices of one card). The series get
    one set of labels, as in dcgm-exporter's default mode, but chosen on purpose: the container that held
    it at the last refresh while it still does (labels do not flap as other pods come and go), else the
    first by namespace, pod and container.
    """
    by_key = {(g.device if id_type == "device-name" else g.uuid): g.index for g in gpus}
    candidates: dict[int, set[Holder]] = {}
    for allocation in found:
        key = gpu_keys(allocation.device, id_type, mig_parent)
        index = by_key.get(key) if key is not None else None
        if index is not None:
            candidates.setdefault(index, set()).add(allocation.holder)
    before = previous or {}
    return {index: before[index] if before.get(index) in held else min(held) for index, held in candidates.items()}


def sharing(
    found: Sequence[Allocation], gpus: Sequence[GpuIdentity], id_type: str, mig_parent: MigParent,
) -> dict[int, list[tuple[Holder, str]]]:
    """GPU index -> every container holding it, with its replica (`--kubernetes-virtual-gpus`), in order."""
    by_key = {(g.device if id_type == "device-name" else g.uuid): g.index for g in gpus}
    out: dict[int, set[tuple[Holder, str]]] = {}
    for allocation in found:
        key = gpu_keys(allocation.device, id_type, mig_parent)
        index = by_key.get(key) if key is not None else None
        if index is not None:
            out.setdefault(index, set()).add((allocation.holder, allocation.device.vgpu))
    return {index: sorted(held) for index, held in out.items()}


def unmatched_kinds(found: Sequence[Allocation], id_type: str) -> frozenset[Kind]:
    """Id shapes the chosen id type never matches: the sign of a wrong --kubernetes-gpu-id-type."""
    wanted: frozenset[Kind] = frozenset({"device-name"} if id_type == "device-name" else {"uuid", "mig-uuid"})
    return frozenset(a.device.kind for a in found) - wanted
