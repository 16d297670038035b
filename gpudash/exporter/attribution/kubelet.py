"""Kubernetes attribution: `pod`, `namespace` and `container` on the series of each GPU a container holds.

Compatible with dcgm-exporter's `--kubernetes` (shared/reference/job-attribution.md §2): the kubelet's
PodResources v1 `List` over its unix socket says which container holds which device, the device ids
are matched to GPUs (gpudash.exporter.attribution.devices), and, with pod labels on, the pod's labels
come from the API server (gpudash.exporter.attribution.pods). A GPU's series carry one container's labels;
with `virtual_gpus` each container sharing it gets a copy (with `vgpu`), and with `dra` each container that
holds it through a ResourceClaim gets a copy with the claim's labels (gpudash.exporter.attribution.dra).

Nothing here runs on the scrape path or the sweep: a thread of its own asks the kubelet every
`interval` (5 s) with a deadline (`timeout`, 10 s), and the API server when a pod it does not know
appears or every `pod_refresh` (60 s). The fast sweep's `refresh` only turns the last answer into labels.
When the kubelet does not answer (socket missing, kubelet restarting, deadline passed), the last good
answer is used until it is `stale_after` old (three intervals plus one timeout, 25 s by default); then
series go out without pod labels. One warning per outage, one line when the kubelet answers again; a
scrape never fails and never waits for it.
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpudash.errors import ExporterError
from gpudash.exporter.attribution import Labels
from gpudash.exporter.attribution.devices import Allocation, Holder, allocations, holders, sharing, unmatched_kinds
from gpudash.exporter.attribution.dra import DeviceTable, DraConsumer, dra_consumers, list_node_slices
from gpudash.exporter.attribution.mig import no_mig
from gpudash.exporter.attribution.podresources import LIST_METHOD, LIST_REQUEST, decode_list_response
from gpudash.exporter.attribution.pods import (
    SERVICE_ACCOUNT_DIR,
    ApiAccess,
    PodInfo,
    PodLabelFilter,
    api_access,
    list_node_pods,
)
from gpudash.exporter.exposed_secrets import warn_if_exposed
from gpudash.exporter.source import GpuIdentity

log = logging.getLogger("gpudash.exporter")

DEFAULT_SOCKET = Path("/var/lib/kubelet/pod-resources/kubelet.sock")
_MAX_MESSAGE = 16 * 1024 * 1024  # the kubelet's own client allows this much; a node of many pods needs more than 4 MiB

Lister = Callable[[float], bytes]  # timeout -> the serialized ListPodResourcesResponse
PodLister = Callable[[float], Sequence[PodInfo]]  # timeout -> the pods of this node
SliceLister = Callable[[float], DeviceTable]  # timeout -> this node's DRA GPU devices


@dataclass(frozen=True)
class KubeletConfig:
    """The `--kubernetes` settings of the exporter (flag names as dcgm-exporter's where it has one)."""

    socket: Path = DEFAULT_SOCKET
    id_type: str = "uid"  # or "device-name" (GKE)
    resource_names: tuple[str, ...] = ()  # besides nvidia.com/gpu and nvidia.com/mig-*
    pod_labels: bool = False
    pod_uid: bool = False
    label_allowlist: tuple[str, ...] = ()
    max_pod_labels: int | None = None  # the most pod labels a series carries (label_budget.pod_label_room)
    dra: bool = False  # --kubernetes-enable-dra: GPUs from ResourceClaims too (attribution/dra.py)
    virtual_gpus: bool = False  # --kubernetes-virtual-gpus: one copy per container sharing a GPU, with `vgpu`
    interval: float = 5.0
    timeout: float = 10.0
    pod_refresh: float = 60.0
    api_url: str | None = None  # None: the in-cluster API server
    account_dir: Path = SERVICE_ACCOUNT_DIR
    node_name: str | None = None

    @property
    def stale_after(self) -> float:
        """How long the last good List answer labels series: three missed polls and one whole deadline."""
        return 3 * self.interval + self.timeout


class KubeletUnavailable(OSError):
    """The kubelet cannot be asked (no socket) or did not answer; the text says which, in one line."""


def load_grpc() -> Any:
    try:
        return importlib.import_module("grpc")
    except ImportError:
        raise ExporterError("--kubernetes needs grpcio, which is not installed: "
                            "pip install 'gpudash[kubernetes]'") from None


def grpc_lister(socket: Path) -> Lister:
    """`List` over the kubelet's unix socket; raises KubeletUnavailable."""
    grpc = load_grpc()
    target = f"unix://{socket.absolute()}"

    def list_pod_resources(timeout: float) -> bytes:
        if not socket.exists():
            raise KubeletUnavailable(f"no socket at {socket} (mount the directory {socket.parent}, not the socket)")
        # A fresh channel each time: a kept one would back off for up to two minutes after a kubelet restart.
        with grpc.insecure_channel(target, options=[("grpc.max_receive_message_length", _MAX_MESSAGE)]) as channel:
            call = channel.unary_unary(LIST_METHOD)  # no (de)serializers: bytes in, bytes out
            try:
                answer = call(LIST_REQUEST, timeout=timeout)
            except grpc.RpcError as exc:
                raise KubeletUnavailable(f"{exc.code().name}: {exc.details()}") from None
        return bytes(answer)

    return list_pod_resources


def api_pod_lister(access: ApiAccess) -> PodLister:
    return lambda timeout: list_node_pods(access, timeout)


@dataclass(frozen=True)
class _Answer:
    at: float
    found: tuple[Allocation, ...]
    mig_parents: Mapping[str, str | None] = field(default_factory=dict)
    dra: tuple[DraConsumer, ...] = ()


# Labels of a GPU's copy that name the container or the claim, not the pod that holds the job.
_NOT_THE_POD = frozenset({"container", "pod_uid", "vgpu"})


class KubeletAttributor:
    """The Attributor of a Kubernetes node; `poll` is the background step, `refresh` the sweep's.

    Tests pass `lister`/`pod_lister` (no socket) and `background=False`, then call `poll(now)` and
    `refresh(gpus, now)` with their own clock.
    """

    def __init__(
        self,
        config: KubeletConfig,
        *,
        lister: Lister | None = None,
        pod_lister: PodLister | None = None,
        slice_lister: SliceLister | None = None,
        mig_parent: Callable[[str], str | None] = no_mig,
        clock: Callable[[], float] = time.time,
        background: bool = True,
    ) -> None:
        self.config = config
        self._lister = lister if lister is not None else grpc_lister(config.socket)
        self._pod_lister = pod_lister
        self._slice_lister = slice_lister
        self._slices: DeviceTable = {}
        self._slices_at: float | None = None
        self._slices_failing = False
        self._mig_parent = mig_parent
        self._labels = PodLabelFilter(config.label_allowlist, config.max_pod_labels)
        self.clock = clock
        self._background = background
        self._answer: _Answer | None = None
        self._pods: Mapping[tuple[str, str], PodInfo] = {}
        self._pods_by_uid: Mapping[str, PodInfo] = {}
        self._pods_at: float | None = None
        self._kubelet_failing = False
        self._api_failing = False
        self._warned_kinds: set[str] = set()
        self._seen: tuple[Any, ...] = ()
        self._holders: dict[int, Holder] = {}
        self._copies: Mapping[int, tuple[Labels, ...]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the kubelet thread ------------------------------------------------------------------------

    def poll(self, now: float) -> None:
        """Ask the kubelet once (and the API server when due); keep what it said. Never raises."""
        try:
            pods = decode_list_response(self._lister(self.config.timeout))
            found = allocations(pods, self.config.resource_names)
        except Exception as exc:
            if not self._kubelet_failing:
                self._kubelet_failing = True
                log.warning("kubelet PodResources List failed: %s; pod labels stay at most %gs, then series go out "
                            "without them (warned once until it answers)", exc, self.config.stale_after)
            return
        if self._kubelet_failing:
            self._kubelet_failing = False
            log.info("kubelet PodResources answers again: pod labels are back")
        self._warn_id_type(found)
        migs = {a.device.key: self._mig_parent(a.device.key) for a in found if a.device.kind == "mig-uuid"}
        dra = self._poll_dra(now, pods) if self.config.dra else ()
        # before the answer is kept, so a new pod's labels come with its first allocation
        self._poll_pods(now, [a.holder for a in found] + [c.holder for c in dra])
        self._answer = _Answer(now, found, migs, dra)

    def _poll_dra(self, now: float, pods: Sequence[Any]) -> tuple[DraConsumer, ...]:
        """The claims' GPUs; the ResourceSlices read again when due or when the answer names a device they lack."""
        consumers, unknown = dra_consumers(pods, self._slices)
        since = None if self._slices_at is None else now - self._slices_at
        due = since is None or since >= self.config.pod_refresh or (unknown and since >= self.config.interval)
        if self._slice_lister is None or not due:
            return consumers
        self._slices_at = now
        try:
            self._slices = self._slice_lister(self.config.timeout)
        except Exception as exc:
            if not self._slices_failing:
                self._slices_failing = True
                log.warning("listing this node's ResourceSlices from the API server failed: %s; DRA GPUs stay "
                            "mapped as last read (warned once until it answers)", exc)
            return consumers
        if self._slices_failing:
            self._slices_failing = False
            log.info("the API server answers ResourceSlices again")
        return dra_consumers(pods, self._slices)[0]

    def _warn_id_type(self, found: Sequence[Allocation]) -> None:
        for kind in sorted(unmatched_kinds(found, self.config.id_type) - self._warned_kinds):
            self._warned_kinds.add(kind)
            hint = "device-name" if kind == "device-name" else "uid"
            log.warning("kubelet lists %s device ids, which --kubernetes-gpu-id-type %s never matches; "
                        "try --kubernetes-gpu-id-type %s", kind, self.config.id_type, hint)

    def _poll_pods(self, now: float, held: Sequence[Holder]) -> None:
        if self._pod_lister is None:
            return
        unknown = any((h.namespace, h.pod) not in self._pods for h in held)
        since = None if self._pods_at is None else now - self._pods_at
        if since is not None and since < self.config.pod_refresh and not (unknown and since >= self.config.interval):
            return
        self._pods_at = now
        try:
            pods = self._pod_lister(self.config.timeout)
        except Exception as exc:
            if not self._api_failing:
                self._api_failing = True
                log.warning("listing this node's pods from the API server failed: %s; pod labels and pod UIDs "
                            "stay as last read (warned once until it answers)", exc)
            return
        if self._api_failing:
            self._api_failing = False
            log.info("the API server answers again: pod labels follow it")
        self._pods = {(p.namespace, p.name): p for p in pods}
        self._pods_by_uid = {p.uid: p for p in pods if p.uid}

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll(self.clock())
            except Exception:  # never let the thread die: labels would freeze until their staleness bound
                log.exception("kubelet poll failed")
            self._stop.wait(self.config.interval)

    # -- the Attributor, on the sweep --------------------------------------------------------------

    def refresh(self, gpus: Sequence[GpuIdentity], now: float) -> None:
        if self._background and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="gpudash-kubelet", daemon=True)
            self._thread.start()
        answer, pods = self._answer, self._pods
        if answer is None or now - answer.at > self.config.stale_after:
            if self._copies:
                log.warning("the kubelet's last answer is over %gs old: series go out without pod labels",
                            self.config.stale_after)
            self._holders, self._copies, self._seen = {}, {}, ()
            return
        seen = (answer, pods, len(gpus))
        if len(seen) == len(self._seen) and all(a is b for a, b in zip(seen, self._seen, strict=True)):
            return  # nothing new since the last sweep
        self._seen = seen
        live = [a for a in answer.found if not self._finished(a.holder, pods)]
        self._holders = holders(live, gpus, self.config.id_type, answer.mig_parents.get, self._holders)
        copies: dict[int, tuple[Labels, ...]] = {
            index: (self._holder_labels(holder, pods),) for index, holder in self._holders.items()}
        if self.config.virtual_gpus:  # every container sharing a GPU gets its own copy
            for index, held in sharing(live, gpus, self.config.id_type, answer.mig_parents.get).items():
                copies[index] = tuple(self._holder_labels(h, pods, (("vgpu", v),) if v else ()) for h, v in held)
        by_uuid = {g.uuid: g.index for g in gpus}
        claimed: dict[int, list[Labels]] = {}
        for consumer in answer.dra:
            if consumer.gpu_uuid in by_uuid and not self._finished(consumer.holder, pods):
                claimed.setdefault(by_uuid[consumer.gpu_uuid], []).append(
                    self._holder_labels(consumer.holder, pods, consumer.labels))
        self._copies = {**copies, **{index: tuple(labels) for index, labels in claimed.items()}}

    @staticmethod
    def _finished(holder: Holder, pods: Mapping[tuple[str, str], PodInfo]) -> bool:
        pod = pods.get((holder.namespace, holder.pod))
        return pod is not None and pod.finished

    def _holder_labels(self, holder: Holder, pods: Mapping[tuple[str, str], PodInfo], extra: Labels = ()) -> Labels:
        own: Labels = (("pod", holder.pod), ("namespace", holder.namespace), ("container", holder.container))
        pod = pods.get((holder.namespace, holder.pod))
        uid: Labels = (("pod_uid", pod.uid),) if self.config.pod_uid and pod is not None else ()
        return (*own, *uid, *extra, *self._pod_labels(pod))

    def _pod_labels(self, pod: PodInfo | None) -> Labels:
        return self._labels.labels(pod.labels) if self.config.pod_labels and pod is not None else ()

    def gpu_copies(self, gpu: GpuIdentity) -> tuple[Labels, ...]:
        return self._copies.get(gpu.index, ())

    def job_info(self) -> tuple[Labels, ...]:
        """One label set per pod holding a GPU of this node: `pod`, `namespace` and its published (allow-listed)
        pod labels, such as a queue or an owner, for gpudash_job_info."""
        by_pod = {(c[0][1], c[1][1]): tuple(p for p in c if p[0] not in _NOT_THE_POD and not p[0].startswith("dra_"))
                  for copies in self._copies.values() for c in copies}
        return tuple(by_pod[key] for key in sorted(by_pod))

    def process_labels(self, pid: int) -> Labels:
        return ()  # a process's own pod comes from its cgroup (attribution/procs.py), through pod_by_uid

    def pod_by_uid(self, uid: str) -> Labels | None:
        """`pod`, `namespace` (and the published pod labels) of the pod with this UID, or None when unknown.

        Accepts the UID as a cgroup path spells it under the systemd driver (`_` for `-`).
        """
        pod = self._pods_by_uid.get(uid.replace("_", "-").lower())
        if pod is None:
            return None
        return (("pod", pod.name), ("namespace", pod.namespace), *self._pod_labels(pod))

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.config.timeout + 1.0)
        close = getattr(self._mig_parent, "close", None)
        if close is not None:
            close()


def api_sources(config: KubeletConfig) -> tuple[PodLister | None, SliceLister | None]:
    """The API server's pods of this node and, with DRA, its ResourceSlices; (None, None), with one warning,
    when this exporter cannot reach the API server."""
    access = api_access(config.api_url, config.account_dir, config.node_name)
    if isinstance(access, str):
        log.warning("no Kubernetes API access: %s; series get pod/namespace/container but no pod labels, "
                    "processes no pod%s", access, ", and DRA claims no GPU" if config.dra else "")
        return None, None
    # inside a pod the projected token is 0644 by Kubernetes' default, in a mount no other pod sees
    if access.token_file is not None and config.account_dir != SERVICE_ACCOUNT_DIR:
        warn_if_exposed(access.token_file, "Kubernetes API token")
    slices: SliceLister | None = (lambda timeout: list_node_slices(access, timeout)) if config.dra else None
    return api_pod_lister(access), slices
