"""The small interface every GPU source implements: NVML on a real node, the simulated fleet elsewhere.

A source knows its GPUs (static identity, read once) and reads one GPU on demand. The poller decides
*which* signals to read and when (fast ones every sweep, slow ones on their own cadence); the source
only reads what it is asked for and reports what it got:

- ``values`` maps a catalog key (``gpudash.catalog``) to a number already in the catalog's unit
  (MiB, W, mJ, MHz, C, %, ratio). A key missing from ``values`` was not read or is not supported.
- ``unsupported`` names keys this GPU cannot provide (NVML NotSupported): their series are left out.
- ``errors`` maps a key to a short error text for a read that failed this time (it may work next time).
- ``up`` is False when the GPU fell off the bus or NVML lost it; then ``values`` is empty.
- ``instances`` are the GPU's MIG GPU instances, each with its own values of ``MIG_KEYS`` (None: not read).

XID errors come as cumulative counts per XID code since the source started, plus the last code and the
time it was seen, because a counter is what Prometheus can take a rate of.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

# Fields that cost milliseconds per GPU through NVML (shared/reference/h200-nvml-costs.md and our H200
# run): the energy counter (~4 ms), the PCIe replay counter, NVLink counters, row remapping, the enforced
# power limit (which rarely changes), and the GPM profiling ratios and PCIe throughput (computing GPM
# metrics takes ~0.8 ms of CPU; without GPM, PCIe throughput blocks ~20 ms per direction). The poller
# reads these on its slow cadence; the ratios are then averages over that window.
PROFILING_KEYS = frozenset({"gr_engine_active", "sm_active", "sm_occupancy", "tensor_active", "dram_active"})
MIG_INSTANCES = "mig_instances"  # a MIG GPU's instances (below)
COSTLY_KEYS = PROFILING_KEYS | frozenset(
    {
        "pcie_tx",
        "pcie_rx",
        "energy",
        "pcie_replay",
        "nvlink_bandwidth",
        "vgpu_license",
        "remapped_rows_unc",
        "remapped_rows_cor",
        "row_remap_failure",
        "row_remap_pending",
        "power_limit",
        # NVLink: one state call and four error counters per link, up to 18 links on an SXM GPU
        "nvlink_crc_flit",
        "nvlink_crc_data",
        "nvlink_replay",
        "nvlink_recovery",
        "nvlink_link_errors",
        "nvlink_link_up",
        # about 1 ms each on an H200 (bench/results/health-h200-x2.txt)
        "temp_margin",
        "thermal_violation",
        "power_violation",
        # NVLink P2P status: one call per peer GPU, and it changes only with the links
        "p2p_status",
        # up to 7 MIG devices, a few calls each
        MIG_INSTANCES,
        # the NVSwitch fabric state: it changes only when the fabric manager registers the GPU
        "fabric_status",
        "fabric_clique",
    }
)
# A MIG GPU's instances, read as a list on the slow loop (the layout changes only when an administrator changes
# it), with the values NVML gives per instance: its memory, and its GPM profiling ratios on Hopper.
MIG_KEYS = frozenset({"fb_used", "fb_free", "fb_total"}) | PROFILING_KEYS
# Signals read as a list (per process, per link, per MIG instance) rather than one value: never in ``values``.
LIST_KEYS = frozenset({"process_fb_used", "process_sm_util", "nvlink_link_errors", "nvlink_link_up", "p2p_status",
                       MIG_INSTANCES})
# Either asks for the GPU's processes; each process's SM share only when "process_sm_util" is asked.
PROCESS_KEYS = frozenset({"process_fb_used", "process_sm_util"})

# How long DCGM_FI_DEV_XID_ERRORS keeps showing the last XID code before it returns to 0: dcgm-exporter's
# gauge never resets, which pages forever; the counter and the timestamp keep the full history.
XID_HOLD_SECONDS = 300.0
# dcgm-exporter's default window for DCGM_EXP_XID_ERRORS_COUNT and DCGM_EXP_CLOCK_EVENTS_COUNT (300000 ms); the
# longest window they may count over, and how many events of one GPU are kept for it.
COUNT_WINDOW_SECONDS = 300.0
MAX_COUNT_WINDOW_SECONDS = 86400.0
MAX_RECENT_EVENTS = 10000


@dataclass(frozen=True)
class GpuIdentity:
    """What never changes while the exporter runs: these become the per-GPU labels."""

    index: int
    uuid: str
    pci_bus_id: str
    model_name: str
    minor_number: int

    @property
    def device(self) -> str:
        return f"nvidia{self.minor_number}"


@dataclass(frozen=True)
class ProcessUsage:
    pid: int
    name: str
    fb_used_mib: float
    sm_util: float | None = None  # % of the SMs' time this process had over the last sample window; None: not read


@dataclass(frozen=True)
class XidState:
    """XID errors seen on one GPU: cumulative count per code, last code (0 once held long enough), when."""

    counts: Mapping[int, int] = field(default_factory=dict)
    last_code: int = 0
    last_time: float | None = None
    recent: tuple[tuple[float, int], ...] = ()  # (time, code) of the events of the last day, for windowed counts


@dataclass(frozen=True)
class LinkHealth:
    """One NVLink link of one GPU: whether it is active and its error counters (None: not readable here)."""

    link: int
    up: bool
    errors: Mapping[str, float] = field(default_factory=dict)  # catalog.NVLINK_ERROR_KINDS name -> count


@dataclass(frozen=True)
class PeerStatus:
    """NVLink P2P from one GPU to one peer GPU of the node: NVML's nvmlGpuP2PStatus_t (0 OK)."""

    peer: int  # the peer's GPU index
    status: int


@dataclass(frozen=True)
class MigInstance:
    """One MIG GPU instance: dcgm-exporter's ``GPU_I_ID`` and ``GPU_I_PROFILE`` labels and its own readings."""

    gpu_instance: int  # the GPU instance id (GPU_I_ID), as `nvidia-smi -L` and the job-mapping file name give it
    profile: str  # "1g.18gb" (GPU_I_PROFILE)
    uuid: str  # its MIG device's UUID (MIG-...)
    values: Mapping[str, float] = field(default_factory=dict)  # MIG_KEYS in the catalog's units


@dataclass(frozen=True)
class GpuReading:
    index: int
    up: bool = True
    values: Mapping[str, float] = field(default_factory=dict)
    unsupported: frozenset[str] = frozenset()
    errors: Mapping[str, str] = field(default_factory=dict)
    xid: XidState = field(default_factory=XidState)
    processes: tuple[ProcessUsage, ...] | None = None  # None: not read this time
    links: tuple[LinkHealth, ...] | None = None  # None: not read this time
    peers: tuple[PeerStatus, ...] | None = None  # None: not read this time
    instances: tuple[MigInstance, ...] | None = None  # None: not read this time; (): MIG off or no instance


class Source(Protocol):
    """A set of GPUs that can be read one at a time. Implementations: NvmlSource, SimulatedSource."""

    def driver_version(self) -> str: ...

    def gpus(self) -> Sequence[GpuIdentity]: ...

    def costly_keys(self) -> frozenset[str]:
        """Keys that take milliseconds to read here: the poller reads them on its slow cadence."""
        ...

    def read(self, index: int, keys: frozenset[str], now: float) -> GpuReading:
        """Read the signals named by ``keys`` (catalog keys) of GPU ``index`` at wall time ``now``."""
        ...

    def close(self) -> None: ...


class XidLedger:
    """Accumulates XID events of one GPU into an XidState; shared by every source."""

    def __init__(self, hold_seconds: float = XID_HOLD_SECONDS) -> None:
        self.hold_seconds = hold_seconds
        self._counts: dict[int, int] = {}
        self._last_code = 0
        self._last_time: float | None = None
        self._recent: deque[tuple[float, int]] = deque(maxlen=MAX_RECENT_EVENTS)

    def record(self, code: int, when: float) -> None:
        self._counts[code] = self._counts.get(code, 0) + 1
        self._last_code = code
        self._last_time = when
        self._recent.append((when, code))

    def state(self, now: float) -> XidState:
        while self._recent and self._recent[0][0] <= now - MAX_COUNT_WINDOW_SECONDS:
            self._recent.popleft()
        held = self._last_time is not None and now - self._last_time < self.hold_seconds
        return XidState(dict(self._counts), self._last_code if held else 0, self._last_time, tuple(self._recent))


def count_in_window(events: Iterable[tuple[float, int]], now: float, window: float) -> dict[int, int]:
    """How many events of each value fall in (now - window, now]: dcgm-exporter's DCGM_EXP_*_COUNT."""
    counts: dict[int, int] = {}
    for when, value in events:
        if now - window < when <= now:
            counts[value] = counts.get(value, 0) + 1
    return counts


def xid_state(events: Iterable[tuple[float, int]], now: float, hold_seconds: float = XID_HOLD_SECONDS) -> XidState:
    """The XidState after the (time, code) events up to ``now``, as a pure function (used by simulation)."""
    ledger = XidLedger(hold_seconds)
    for when, code in sorted(events):
        if when <= now:
            ledger.record(code, when)
    return ledger.state(now)
