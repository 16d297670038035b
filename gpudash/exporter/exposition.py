"""Snapshot -> Prometheus text exposition (format 0.0.4), as a pure function.

Series look exactly like dcgm-exporter's: the same names, help and types (from the catalog) and the
labels in its order: ``gpu, UUID, pci_bus_id, device, modelName, hostname, DCGM_FI_DRIVER_VERSION`` (a MIG
instance's series: ``GPU_I_PROFILE, GPU_I_ID`` after ``modelName``, beside its GPU's own series), then
a signal's own labels (``clock_event``, ``xid``, ``pid``/``process_name``, ``link``/``error``,
``window_size_in_ms``, ``health_watch``/``health_error_code``, ``peer_gpu``). Unlike dcgm-exporter, label
values are escaped, so a process name with a quote cannot break a scrape. Node-level series
(``gpudash_node_gpus_expected``) carry only the node's labels; ``gpudash_job_info`` (who holds each job an
attributor knows) carries them and the job's.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from gpudash.catalog import (
    BY_KEY,
    CLOCK_EVENT_REASONS,
    DCGM_EXP_CLOCK_EVENTS,
    DRIVER_VERSION_LABEL,
    EXPORTER_ERRORS,
    EXPORTER_LAST_SWEEP,
    EXPORTER_PENDING,
    EXPORTER_SWEEP_SECONDS,
    EXPORTER_UNSUPPORTED,
    JOB_INFO,
    MIG_INSTANCE_LABEL,
    MIG_PROFILE_LABEL,
    PEER_GPU_LABEL,
    UNSUPPORTED_FIELD_LABEL,
    Signal,
)
from gpudash.escape import label_value
from gpudash.exporter.attribution import Labels
from gpudash.exporter.health_status import health_watches
from gpudash.exporter.link_text import link_error_tails, link_text, link_up_tails, number
from gpudash.exporter.nic_affinity import NIC_INFO, NIC_INFO_HELP, GpuNic, nic_info_lines
from gpudash.exporter.source import (
    COUNT_WINDOW_SECONDS,
    MIG_KEYS,
    PROCESS_KEYS,
    GpuIdentity,
    LinkHealth,
    MigInstance,
    PeerStatus,
    ProcessUsage,
    XidState,
    count_in_window,
)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(frozen=True)
class GpuView:
    """What the exporter knows about one GPU after the latest sweeps."""

    identity: GpuIdentity
    up: bool
    values: Mapping[str, float] = field(default_factory=dict)
    xid: XidState = field(default_factory=XidState)
    processes: tuple[ProcessUsage, ...] = ()
    # Job attribution (gpudash.exporter.attribution): one label set per copy of this GPU's series (empty: one
    # copy, no extra labels), and the labels of each process's series by pid.
    copies: tuple[Labels, ...] = ()
    process_labels: Mapping[int, Labels] = field(default_factory=dict)
    links: tuple[LinkHealth, ...] = ()  # NVLink links, with their state and error counters
    clock_events: tuple[tuple[float, int], ...] = ()  # (time, reason bit) of each clock event activation
    clock_event_totals: Mapping[int, int] = field(default_factory=dict)  # activations since start, by reason bit
    peers: tuple[PeerStatus, ...] = ()  # NVLink P2P status to each peer GPU
    unsupported: frozenset[str] = frozenset()  # published keys NVML cannot give on this GPU (NotSupported)
    instances: tuple[MigInstance, ...] = ()  # its MIG GPU instances
    instance_copies: Mapping[int, tuple[Labels, ...]] = field(default_factory=dict)  # by GPU instance id


@dataclass(frozen=True)
class Snapshot:
    gpus: Sequence[GpuView]
    keys: Sequence[str]  # the published signals (catalog keys), in catalog order
    hostname: str | None  # None: no host label (dcgm-exporter's --no-hostname)
    hostname_label: str = "hostname"  # or "Hostname", dcgm-exporter's spelling before 3.3
    driver_version: str | None = None  # None: no DCGM_FI_DRIVER_VERSION label
    sweep_seconds: Mapping[str, float] = field(default_factory=dict)  # by loop: fast, slow, static
    errors_total: Mapping[str, int] = field(default_factory=dict)  # by field
    last_sweep: float | None = None
    pending: int | None = None  # supported fields read but without a value yet, summed over GPUs that are up
    now: float | None = None  # time of the latest sweep: the end of the DCGM_EXP_*_COUNT windows
    count_window: float = COUNT_WINDOW_SECONDS  # seconds those windows span (dcgm-exporter's --xid-count-window-size)
    gpus_expected: int | None = None  # gpudash_node_gpus_expected; None: not published
    nics: Sequence[GpuNic] = ()  # gpudash_gpu_nic_info: the RDMA ports under each GPU's PCIe switch
    node_text: str = ""  # series of the node in text format, written as given (a simulated node's ports)
    job_info: Sequence[Labels] = ()  # gpudash_job_info: one label set per job (its label, user, account, ...)


class Exposition:
    """The bytes one scrape writes, rendered once per sweep; the gzip body is made on first request."""

    __slots__ = ("_gzipped", "body")

    def __init__(self, body: bytes) -> None:
        self.body = body
        self._gzipped: bytes | None = None

    def gzipped(self) -> bytes:
        if self._gzipped is None:  # two threads may both compress once; either result is correct
            self._gzipped = gzip.compress(self.body, compresslevel=1, mtime=0)
        return self._gzipped


def escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def gpu_labels(identity: GpuIdentity, snap: Snapshot, instance: MigInstance | None = None) -> str:
    parts = [
        f'gpu="{identity.index}"',
        f'UUID="{label_value(identity.uuid)}"',
        f'pci_bus_id="{label_value(identity.pci_bus_id)}"',
        f'device="{label_value(identity.device)}"',
        f'modelName="{label_value(identity.model_name)}"',
        "" if instance is None else
        f'{MIG_PROFILE_LABEL}="{label_value(instance.profile)}",{MIG_INSTANCE_LABEL}="{instance.gpu_instance}"',
        node_labels(snap),
    ]
    return ",".join(p for p in parts if p)


def node_labels(snap: Snapshot) -> str:
    """The labels every series of this node carries: the host name and the driver version, when published."""
    parts = []
    if snap.hostname is not None:
        parts.append(f'{snap.hostname_label}="{label_value(snap.hostname)}"')
    if snap.driver_version is not None:
        parts.append(f'{DRIVER_VERSION_LABEL}="{label_value(snap.driver_version)}"')
    return ",".join(parts)


_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
# Labels an attribution may not set: the fixed per-GPU ones and each signal's own.
_RESERVED = frozenset({"gpu", "UUID", "pci_bus_id", "device", "modelName", "hostname", "Hostname",
                       DRIVER_VERSION_LABEL, "clock_event", "xid", "pid", "process_name", "job", "instance",
                       "link", "error", "window_size_in_ms", "health_watch", "health_error_code",
                       PEER_GPU_LABEL, MIG_PROFILE_LABEL, MIG_INSTANCE_LABEL})


def extra_labels(labels: Labels) -> str:
    """`,name="value"` for each attribution label; names that are not label names or are reserved are left out."""
    return "".join(f',{name}="{label_value(value)}"' for name, value in labels
                   if name not in _RESERVED and not name.startswith("__") and _LABEL_NAME.fullmatch(name))


def instance_rows(snap: Snapshot) -> list[tuple[MigInstance, str]]:
    """Each MIG instance of a GPU that is up, with its label text once per copy of its series."""
    rows = []
    for view in snap.gpus:
        for instance in view.instances if view.up else ():
            base = gpu_labels(view.identity, snap, instance)
            copies = view.instance_copies.get(instance.gpu_instance, ())
            rows += [(instance, base + extra_labels(copy)) for copy in copies] if copies else [(instance, base)]
    return rows


def attributed(view: GpuView, base: str) -> list[tuple[GpuView, str]]:
    """The GPU's label text (`base`: its gpu_labels) once per copy of its series."""
    if not view.copies:
        return [(view, base)]
    return [(view, base + extra_labels(copy)) for copy in view.copies]


Lines = Iterator[str]
_Series = Callable[[Signal, Sequence[tuple[GpuView, str]], Snapshot], Lines]


def _plain(signal: Signal, gpus: Sequence[tuple[GpuView, str]], _snap: Snapshot) -> Lines:
    for view, labels in gpus:
        value = view.values.get(signal.key)
        if view.up and value is not None:
            yield f"{signal.dcgm_name}{{{labels}}} {number(value)}\n"


def _clock_events(signal: Signal, gpus: Sequence[tuple[GpuView, str]], _snap: Snapshot) -> Lines:
    for view, labels in gpus:
        mask = view.values.get("clock_event_reasons")
        if view.up and mask is not None:
            for bit, reason in CLOCK_EVENT_REASONS:
                on = 1 if int(mask) & bit else 0
                yield f'{signal.dcgm_name}{{{labels},clock_event="{reason}"}} {on}\n'


def _xid_total(signal: Signal, gpus: Sequence[tuple[GpuView, str]], _snap: Snapshot) -> Lines:
    for view, labels in gpus:
        for code, count in sorted(view.xid.counts.items()):
            yield f'{signal.dcgm_name}{{{labels},xid="{code}"}} {count}\n'


def _xid_last(signal: Signal, gpus: Sequence[tuple[GpuView, str]], _snap: Snapshot) -> Lines:
    for view, labels in gpus:
        if view.up:
            yield f"{signal.dcgm_name}{{{labels}}} {view.xid.last_code}\n"


def _xid_last_time(signal: Signal, gpus: Sequence[tuple[GpuView, str]], _snap: Snapshot) -> Lines:
    for view, labels in gpus:
        if view.xid.last_time is not None:
            yield f"{signal.dcgm_name}{{{labels}}} {number(view.xid.last_time)}\n"


def _process_series(value_of: Callable[[ProcessUsage], float | None]) -> _Series:
    """One series per GPU process, labelled with its pid, name and its own job or pod (not the GPU's copies)."""
    def series(signal: Signal, gpus: Sequence[tuple[GpuView, str]], _snap: Snapshot) -> Lines:
        for view, labels in gpus:
            if not view.up:
                continue
            for proc in view.processes:
                value = value_of(proc)
                if value is None:
                    continue
                name = label_value(proc.name)
                extra = extra_labels(view.process_labels.get(proc.pid, ()))
                yield f'{signal.dcgm_name}{{{labels}{extra},pid="{proc.pid}",process_name="{name}"}} {number(value)}\n'

    return series


def _up(signal: Signal, gpus: Sequence[tuple[GpuView, str]], _snap: Snapshot) -> Lines:
    for view, labels in gpus:
        yield f"{signal.dcgm_name}{{{labels}}} {1 if view.up else 0}\n"


def _windowed(signal: Signal, labels: str, counts: Mapping[str, int], label: str, snap: Snapshot) -> Lines:
    """dcgm-exporter's windowed count: one series per value seen in the window, else one 0 without ``label``."""
    window = f'window_size_in_ms="{round(snap.count_window * 1000)}"'
    if not counts:
        yield f"{signal.dcgm_name}{{{labels},{window}}} 0\n"
    for value, count in counts.items():
        yield f'{signal.dcgm_name}{{{labels},{label}="{value}",{window}}} {count}\n'


def _xid_window(signal: Signal, gpus: Sequence[tuple[GpuView, str]], snap: Snapshot) -> Lines:
    for view, labels in gpus:
        counts = count_in_window(view.xid.recent, snap.now, snap.count_window) if snap.now is not None else {}
        yield from _windowed(signal, labels, {str(c): n for c, n in sorted(counts.items())}, "xid", snap)


_EXP_CLOCK_EVENT = dict(DCGM_EXP_CLOCK_EVENTS)


def _clock_events_window(signal: Signal, gpus: Sequence[tuple[GpuView, str]], snap: Snapshot) -> Lines:
    for view, labels in gpus:
        if not view.up:
            continue
        counts = count_in_window(view.clock_events, snap.now, snap.count_window) if snap.now is not None else {}
        named = {_EXP_CLOCK_EVENT[bit]: n for bit, n in sorted(counts.items()) if bit in _EXP_CLOCK_EVENT}
        yield from _windowed(signal, labels, named, "clock_event", snap)


def _clock_events_total(signal: Signal, gpus: Sequence[tuple[GpuView, str]], _snap: Snapshot) -> Lines:
    """Activations since start per reason, every reason from the first read on (a counter must start at 0)."""
    for view, labels in gpus:
        if view.up and "clock_event_reasons" in view.values:
            for bit, reason in DCGM_EXP_CLOCK_EVENTS:
                yield f'{signal.dcgm_name}{{{labels},clock_event="{reason}"}} {view.clock_event_totals.get(bit, 0)}\n'


def _health_status(signal: Signal, gpus: Sequence[tuple[GpuView, str]], _snap: Snapshot) -> Lines:
    for view, labels in gpus:
        if view.up:
            for watch, result, code in health_watches(view.values, view.links):
                yield f'{signal.dcgm_name}{{{labels},health_watch="{watch}",health_error_code="{code}"}} {result}\n'


def _p2p_status(signal: Signal, gpus: Sequence[tuple[GpuView, str]], _snap: Snapshot) -> Lines:
    for view, labels in gpus:
        if view.up:
            for peer in view.peers:
                yield f'{signal.dcgm_name}{{{labels},{PEER_GPU_LABEL}="{peer.peer}"}} {peer.status}\n'


def _link_errors(signal: Signal, gpus: Sequence[tuple[GpuView, str]], _snap: Snapshot) -> Lines:
    for view, labels in gpus:
        if view.up and view.links:
            yield link_text(link_error_tails, signal.dcgm_name, view.identity.uuid, view.links, labels)


def _link_up(signal: Signal, gpus: Sequence[tuple[GpuView, str]], _snap: Snapshot) -> Lines:
    for view, labels in gpus:
        if view.up and view.links:
            yield link_text(link_up_tails, signal.dcgm_name, view.identity.uuid, view.links, labels)


def _gpus_expected(signal: Signal, _gpus: Sequence[tuple[GpuView, str]], snap: Snapshot) -> Lines:
    if snap.gpus_expected is not None:
        labels = node_labels(snap)
        yield f"{signal.dcgm_name}{{{labels}}} {snap.gpus_expected}\n"


# Signals that are not a plain per-GPU value: how each is drawn from the snapshot.
_SPECIAL: dict[str, _Series] = {
    "clock_event_active": _clock_events,
    "xid_total": _xid_total,
    "xid_last": _xid_last,
    "xid_last_time": _xid_last_time,
    "process_fb_used": _process_series(lambda proc: proc.fb_used_mib),
    "process_sm_util": _process_series(lambda proc: proc.sm_util),
    "gpu_up": _up,
    "xid_count_window": _xid_window,
    "clock_events_count": _clock_events_window,
    "xid_count_total": _xid_total,
    "clock_events_total": _clock_events_total,
    "gpu_health_status": _health_status,
    "p2p_status": _p2p_status,
    "nvlink_link_errors": _link_errors,
    "nvlink_link_up": _link_up,
    "gpus_expected": _gpus_expected,
}


def _family(name: str, kind: str, help_: str, lines: list[str], out: list[str]) -> None:
    if lines:
        out.append(f"# HELP {name} {escape_help(help_)}\n# TYPE {name} {kind}\n")
        out.extend(lines)


def render(snap: Snapshot) -> bytes:
    # A process belongs to one job: its series carries the GPU's labels and its own attribution, once.
    bases = [(view, gpu_labels(view.identity, snap)) for view in snap.gpus]
    gpus = [pair for view, base in bases for pair in attributed(view, base)]
    instances = instance_rows(snap)
    out: list[str] = []
    for key in snap.keys:
        signal = BY_KEY[key]
        lines = list(_SPECIAL.get(key, _plain)(signal, bases if key in PROCESS_KEYS else gpus, snap))
        if instances and key in MIG_KEYS:
            lines += [f"{signal.dcgm_name}{{{labels}}} {number(value)}\n" for instance, labels in instances
                      if (value := instance.values.get(key)) is not None]
        _family(signal.dcgm_name, signal.type, signal.help, lines, out)
    host = f'{snap.hostname_label}="{label_value(snap.hostname)}"' if snap.hostname is not None else ""
    _family(NIC_INFO, "gauge", NIC_INFO_HELP, list(nic_info_lines(snap.nics, host)), out)
    out.append(snap.node_text)
    _family(
        EXPORTER_UNSUPPORTED,
        "gauge",
        "1 for each field this exporter publishes that NVML does not support on this GPU (no NVLink, no GPM "
        "profiling): its series is left out, which is no fault.",
        [f'{EXPORTER_UNSUPPORTED}{{{labels},{UNSUPPORTED_FIELD_LABEL}="{BY_KEY[key].dcgm_name}"}} 1\n'
         for view, labels in bases if view.up for key in snap.keys if key in view.unsupported],
        out,
    )
    _family(JOB_INFO, "gauge", "Who holds each job on this node (always 1): on Slurm its user, account, partition and "
            "job name as the Prolog recorded them (an unknown one left out); on Kubernetes each pod holding a GPU, its "
            "namespace and its published pod labels.",
            [f"{JOB_INFO}{{{(host + extra_labels(tuple(p for p in info if p[1]))).lstrip(',')}}} 1\n"
             for info in snap.job_info], out)
    _family(
        EXPORTER_SWEEP_SECONDS,
        "gauge",
        "Seconds the last sweep of each collection loop took (fast: every interval; slow: costly fields).",
        [f'{EXPORTER_SWEEP_SECONDS}{{loop="{loop}"}} {number(s)}\n' for loop, s in sorted(snap.sweep_seconds.items())],
        out,
    )
    _family(
        EXPORTER_ERRORS,
        "counter",
        "Failed reads since the exporter started, by field (NotSupported is not counted).",
        [f'{EXPORTER_ERRORS}{{field="{label_value(f)}"}} {n}\n' for f, n in sorted(snap.errors_total.items())],
        out,
    )
    if snap.pending is not None:
        _family(
            EXPORTER_PENDING,
            "gauge",
            "Supported fields without a value yet, summed over the GPUs that are up: a rate (PCIe, GPM "
            "profiling) needs two reads of the slow loop. 0 once every field has reported.",
            [f"{EXPORTER_PENDING} {snap.pending}\n"],
            out,
        )
    if snap.last_sweep is not None:
        _family(
            EXPORTER_LAST_SWEEP,
            "gauge",
            "Unix time of the last sweep that read every GPU without an unexpected error.",
            [f"{EXPORTER_LAST_SWEEP} {number(snap.last_sweep)}\n"],
            out,
        )
    return "".join(out).encode("utf-8")
