"""Real GPUs through NVML (nvidia-ml-py), converted to DCGM's units as dcgm-exporter reports them.

shared/reference/nvml-mapping.md gives the NVML call behind each DCGM field. Each reader below is one
NVML call feeding one or more catalog keys; a call that raises NotSupported marks its keys unsupported
for that GPU (never asked again), GPU_IS_LOST marks the GPU down until its UUID answers again, any other
error is reported for that field and retried next sweep. Hopper's profiling ratios and PCIe throughput
come from GPM: two samples one slow sweep apart, averaged over that window. Computing the metrics costs
~0.8 ms of CPU per GPU (measured on an H200), and without GPM PCIe throughput blocks ~20 ms per
direction, so both are read on the slow cadence.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpudash.errors import ExporterError
from gpudash.exporter.fabric_state import fabric_reader
from gpudash.exporter.gpm import GPM_METRICS, MIB, Gpm, GpmUnsupported
from gpudash.exporter.health_reads import NVLINK_KEYS, health_readers
from gpudash.exporter.mig_reads import MigReader
from gpudash.exporter.nvml_reader import NvmlReader, Unsupported, Values
from gpudash.exporter.p2p import peer_status
from gpudash.exporter.process_util import ProcessUtilization
from gpudash.exporter.source import (
    COSTLY_KEYS,
    LIST_KEYS,
    MIG_INSTANCES,
    MIG_KEYS,
    PROCESS_KEYS,
    XID_HOLD_SECONDS,
    GpuIdentity,
    GpuReading,
    LinkHealth,
    MigInstance,
    ProcessUsage,
    XidLedger,
)

log = logging.getLogger("gpudash.exporter")

_UINT_MAX = 0xFFFFFFFF
_PCIE = frozenset({"pcie_tx", "pcie_rx"})
_UNSUPPORTED = (Unsupported, GpmUnsupported)


def _no_gpm(_handle: Any, _index: int) -> dict[str, float]:
    raise Unsupported()  # before Hopper these ratios need DCGM's own profiling module


def _load_pynvml() -> Any:
    try:
        return importlib.import_module("pynvml")
    except ImportError:
        raise ExporterError(
            "nvidia-ml-py is not installed: pip install nvidia-ml-py (or run with --simulate N)"
        ) from None


class NvmlSource:
    """The Source over every GPU NVML sees on this node."""

    def __init__(self, xid_hold_seconds: float = XID_HOLD_SECONDS) -> None:
        nv = self.nv = _load_pynvml()
        try:
            nv.nvmlInit()
        except nv.NVMLError as exc:
            raise ExporterError(
                f"cannot start NVML: {exc} (is the NVIDIA driver installed and loaded? "
                "--simulate N serves a simulated node instead)"
            ) from None
        try:
            self._driver = str(nv.nvmlSystemGetDriverVersion())
            count = nv.nvmlDeviceGetCount()
            self._handles: list[Any] = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
            self._gpus = [self._identity(i, h) for i, h in enumerate(self._handles)]
        except nv.NVMLError as exc:
            nv.nvmlShutdown()
            raise ExporterError(f"NVML cannot list the GPUs: {exc}") from None
        if not self._gpus:
            nv.nvmlShutdown()
            raise ExporterError("NVML sees no GPU on this node (--simulate N serves a simulated node instead)")
        self._lost = [False] * count
        self._unsupported: list[set[str]] = [set() for _ in range(count)]
        self._ledgers = [XidLedger(xid_hold_seconds) for _ in range(count)]
        self._memory_v2 = [True] * count
        self._gpm = [Gpm(nv, h) for h in self._handles]
        self._mig = MigReader(nv)
        self._process_names: dict[int, str] = {}
        self._process_util = ProcessUtilization(self.nv)
        self._links: list[tuple[LinkHealth, ...] | None] = [None] * count
        self._event_lock = threading.Lock()
        self._handle_lock = threading.Lock()
        self._events = self._register_xid_events()
        # errors that will not go away by asking again: the field is left out for that GPU
        self._permanent = (nv.NVML_ERROR_NOT_SUPPORTED, nv.NVML_ERROR_FUNCTION_NOT_FOUND, nv.NVML_ERROR_NO_PERMISSION)
        self._common = self._build_readers()
        self._readers = [self._readers_for(i) for i in range(count)]

    # -- setup -------------------------------------------------------------------------------------

    def _identity(self, index: int, handle: Any) -> GpuIdentity:
        nv = self.nv
        bus = nv.nvmlDeviceGetPciInfo(handle).busId
        bus = bus.decode() if isinstance(bus, bytes) else str(bus)
        try:
            minor = int(nv.nvmlDeviceGetMinorNumber(handle))
        except nv.NVMLError:
            minor = index
        return GpuIdentity(index, str(nv.nvmlDeviceGetUUID(handle)), bus, str(nv.nvmlDeviceGetName(handle)), minor)

    def _register_xid_events(self) -> Any:
        nv = self.nv
        try:
            events = nv.nvmlEventSetCreate()
        except nv.NVMLError as exc:
            log.info("XID events unavailable: %s", exc)
            return None
        for gpu, handle in zip(self._gpus, self._handles, strict=True):
            try:
                nv.nvmlDeviceRegisterEvents(handle, nv.nvmlEventTypeXidCriticalError, events)
            except nv.NVMLError as exc:
                log.info("GPU %d: XID events unavailable: %s", gpu.index, exc)
        return events

    def _build_readers(self) -> list[NvmlReader]:
        nv = self.nv

        def util(h: Any, _i: int) -> Values:
            u = nv.nvmlDeviceGetUtilizationRates(h)
            return {"gpu_util": float(u.gpu), "mem_copy_util": float(u.memory)}

        def temp(h: Any, _i: int) -> Values:
            value = float(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))
            return {"gpu_temp": value} if value <= 200 else {}  # DCGM drops values over 200 C as bogus

        def hbm_temp(h: Any, _i: int) -> Values:
            (field,) = nv.nvmlDeviceGetFieldValues(h, [nv.NVML_FI_DEV_MEMORY_TEMP])
            if field.nvmlReturn != nv.NVML_SUCCESS:
                raise nv.NVMLError(field.nvmlReturn)
            value = float(field.value.uiVal)  # as DCGM: r545 drivers report a wrong valueType here
            return {"hbm_temp": value} if value <= 200 else {}

        def nvlink(h: Any, _i: int) -> Values:
            ids = [
                (nv.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, _UINT_MAX),  # KiB, summed over all links
                (nv.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, _UINT_MAX),
            ]
            total = 0.0
            for field in nv.nvmlDeviceGetFieldValues(h, ids):
                if field.nvmlReturn in (nv.NVML_ERROR_NOT_SUPPORTED, nv.NVML_ERROR_INVALID_ARGUMENT):
                    raise Unsupported()
                if field.nvmlReturn != nv.NVML_SUCCESS:
                    raise nv.NVMLError(field.nvmlReturn)
                total += float(field.value.ullVal)
            return {"nvlink_bandwidth": total}

        def vgpu_license(h: Any, _i: int) -> Values:
            feats = nv.nvmlDeviceGetGridLicensableFeatures(h)
            if not feats.isGridLicenseSupported:
                raise Unsupported()
            vgpu = nv.NVML_GRID_LICENSE_FEATURE_CODE_VGPU
            listed = feats.gridLicensableFeatures[: feats.licensableFeaturesCount]
            return {"vgpu_license": float(any(f.featureCode == vgpu and f.featureState for f in listed))}

        def remapped(h: Any, _i: int) -> Values:
            corr, unc, pending, failure = nv.nvmlDeviceGetRemappedRows(h)
            return {
                "remapped_rows_cor": float(corr),
                "remapped_rows_unc": float(unc),
                "row_remap_pending": float(pending),
                "row_remap_failure": float(failure),
            }

        def pcie_throughput(h: Any, _i: int) -> Values:
            tx = nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_TX_BYTES)
            rx = nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_RX_BYTES)
            return {"pcie_tx": tx * 1024.0, "pcie_rx": rx * 1024.0}  # KB/s -> B/s

        threshold = nv.nvmlDeviceGetTemperatureThreshold

        def one(key: str, call: Callable[[Any], float], scale: float = 1.0) -> NvmlReader:
            return NvmlReader(frozenset({key}), lambda h, _i: {key: float(call(h)) * scale})

        readers = [
            NvmlReader(frozenset({"gpu_util", "mem_copy_util"}), util),
            NvmlReader(frozenset({"fb_used", "fb_free", "fb_reserved", "fb_total"}), self._memory),
            one("sm_clock", lambda h: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
            one("mem_clock", lambda h: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM)),
            NvmlReader(frozenset({"gpu_temp"}), temp),
            NvmlReader(frozenset({"hbm_temp"}), hbm_temp),
            one("power", nv.nvmlDeviceGetPowerUsage, 0.001),  # mW -> W
            one("energy", nv.nvmlDeviceGetTotalEnergyConsumption),  # mJ, as DCGM
            one("pcie_replay", nv.nvmlDeviceGetPcieReplayCounter),
            one("enc_util", lambda h: nv.nvmlDeviceGetEncoderUtilization(h)[0]),
            one("dec_util", lambda h: nv.nvmlDeviceGetDecoderUtilization(h)[0]),
            one("clock_event_reasons", nv.nvmlDeviceGetCurrentClocksEventReasons),
            one("power_limit", nv.nvmlDeviceGetEnforcedPowerLimit, 0.001),
            one("sm_clock_max", lambda h: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM)),
            one("slowdown_temp", lambda h: threshold(h, nv.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN)),
            one("shutdown_temp", lambda h: threshold(h, nv.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN)),
            NvmlReader(frozenset({"nvlink_bandwidth"}), nvlink),
            NvmlReader(frozenset({"vgpu_license"}), vgpu_license),
            NvmlReader(frozenset({"remapped_rows_cor", "remapped_rows_unc", "row_remap_pending", "row_remap_failure"}),
                   remapped),
            *health_readers(nv, self._links.__setitem__),
            fabric_reader(nv),
        ]
        self._pcie_throughput = NvmlReader(_PCIE, pcie_throughput)
        return readers

    def _readers_for(self, index: int) -> list[NvmlReader]:
        """The common readers plus this GPU's source of profiling ratios and PCIe throughput."""
        gpm_keys = frozenset(GPM_METRICS)
        if self._gpm[index].supported:
            return [*self._common, NvmlReader(gpm_keys, lambda h, i: self._gpm[i].read())]
        return [*self._common, NvmlReader(gpm_keys - _PCIE, _no_gpm), self._pcie_throughput]

    # -- Source ------------------------------------------------------------------------------------

    def driver_version(self) -> str:
        return self._driver

    def gpus(self) -> Sequence[GpuIdentity]:
        return self._gpus

    def costly_keys(self) -> frozenset[str]:
        return COSTLY_KEYS  # includes every GPM key: see source.COSTLY_KEYS

    def read(self, index: int, keys: frozenset[str], now: float) -> GpuReading:
        nv = self.nv
        self._drain_xid_events(now)
        xid = self._ledgers[index].state(now)
        handle = self._handle(index)
        if handle is None:
            return GpuReading(index, up=False, xid=xid)
        values: Values = {}
        unsupported: set[str] = set()
        errors: dict[str, str] = {}
        skip = self._unsupported[index]
        for reader in self._readers[index]:
            wanted = (reader.keys & keys) - skip
            if not wanted:
                continue
            try:
                got = reader.read(handle, index)
                values.update(got)
                if reader.partial:
                    unsupported |= wanted - got.keys() - LIST_KEYS
            except _UNSUPPORTED:
                unsupported |= wanted
            except nv.NVMLError as exc:
                if exc.value in (nv.NVML_ERROR_GPU_IS_LOST, nv.NVML_ERROR_RESET_REQUIRED):
                    self._lost[index] = True
                    return GpuReading(index, up=False, xid=xid)
                if exc.value in self._permanent:
                    unsupported |= wanted
                else:
                    errors.update((k, str(exc)) for k in wanted)
        unsupported |= self._gpm[index].unsupported & keys
        peers = None
        if "p2p_status" in keys - skip:
            peers = peer_status(nv, handle, index, self._handles, self._lost)
            if peers is None:
                unsupported.add("p2p_status")
        instances: tuple[MigInstance, ...] | None = None
        if MIG_INSTANCES in keys - skip:
            try:
                instances = self._mig.read(handle, index, MIG_KEYS)  # what the GPU lacks in MIG mode, too
            except nv.NVMLError as exc:
                errors[MIG_INSTANCES] = str(exc)
            else:
                if instances is None:
                    unsupported.add(MIG_INSTANCES)
        skip |= unsupported
        processes = None
        if keys & PROCESS_KEYS:
            processes = self._processes(handle)
        if processes is not None and "process_sm_util" in keys - skip:
            sm = self._process_util.sm_by_pid(handle, index)
            if sm is None:
                skip.add("process_sm_util")
            else:
                processes = tuple(replace(p, sm_util=sm.get(p.pid, 0.0)) for p in processes)
        links = None
        if keys & NVLINK_KEYS:  # only the loop that reads NVLink takes what its reader left (the slow one)
            links, self._links[index] = self._links[index], None
        # every key known unsupported, not only those found now: a second reader of this source learns them too
        return GpuReading(index, True, values, frozenset(skip & keys), errors, xid, processes, links, peers,
                          instances)

    def close(self) -> None:
        nv = self.nv
        for gpm in self._gpm:
            gpm.free()
        self._mig.free()
        if self._events is not None:
            with contextlib.suppress(nv.NVMLError):
                nv.nvmlEventSetFree(self._events)
            self._events = None
        with contextlib.suppress(nv.NVMLError):
            nv.nvmlShutdown()

    # -- internals ---------------------------------------------------------------------------------

    def _handle(self, index: int) -> Any:
        if not self._lost[index]:
            return self._handles[index]
        nv = self.nv
        with self._handle_lock:  # the fast and slow loops may both find it lost
            if not self._lost[index]:
                return self._handles[index]
            try:  # back on the bus? its UUID answers again
                handle = nv.nvmlDeviceGetHandleByUUID(self._gpus[index].uuid)
                nv.nvmlDeviceGetTemperature(handle, nv.NVML_TEMPERATURE_GPU)
            except nv.NVMLError:
                return None
            self._gpm[index].free()
            self._gpm[index] = Gpm(nv, handle)
            self._mig.forget(index)
            self._readers[index] = self._readers_for(index)
            self._handles[index], self._lost[index] = handle, False
            return handle

    def _memory(self, handle: Any, index: int) -> Values:
        nv = self.nv
        if self._memory_v2[index]:
            try:
                m = nv.nvmlDeviceGetMemoryInfo(handle, version=nv.nvmlMemory_v2)
                return {
                    "fb_used": m.used / MIB,
                    "fb_free": m.free / MIB,
                    "fb_reserved": m.reserved / MIB,
                    "fb_total": m.total / MIB,
                }
            except nv.NVMLError as exc:
                if exc.value not in (nv.NVML_ERROR_FUNCTION_NOT_FOUND, nv.NVML_ERROR_ARGUMENT_VERSION_MISMATCH):
                    raise
                self._memory_v2[index] = False  # drivers before 510: no reserved field
        m = nv.nvmlDeviceGetMemoryInfo(handle)
        return {"fb_used": m.used / MIB, "fb_free": m.free / MIB, "fb_total": m.total / MIB}

    def _processes(self, handle: Any) -> tuple[ProcessUsage, ...] | None:
        nv = self.nv
        try:
            running = nv.nvmlDeviceGetComputeRunningProcesses(handle)
        except nv.NVMLError:
            return None
        out = []
        for proc in running:
            used = proc.usedGpuMemory
            out.append(ProcessUsage(int(proc.pid), self._process_name(int(proc.pid)), (used or 0) / MIB))
        return tuple(out)

    def _process_name(self, pid: int) -> str:
        name = self._process_names.get(pid)
        if name is None:
            try:
                name = str(self.nv.nvmlSystemGetProcessName(pid))
            except self.nv.NVMLError:
                try:
                    name = Path(f"/proc/{pid}/comm").read_text(encoding="utf-8", errors="replace").strip()
                except OSError:
                    name = ""
            if len(self._process_names) > 4096:
                self._process_names.clear()
            self._process_names[pid] = name
        return name

    def _drain_xid_events(self, now: float) -> None:
        if self._events is None:
            return
        nv = self.nv
        with self._event_lock:
            for _ in range(1000):  # bounded: a storm of events must not stall the sweep
                try:
                    event = nv.nvmlEventSetWait(self._events, 0)
                except nv.NVMLError:
                    return  # Timeout: nothing pending
                index = self._index_of(event.device)
                if index is not None and event.eventType & nv.nvmlEventTypeXidCriticalError:
                    self._ledgers[index].record(int(event.eventData), now)
                    log.warning("GPU %d: XID %d", index, int(event.eventData))

    def _index_of(self, device: Any) -> int | None:
        address = ctypes.cast(device, ctypes.c_void_p).value
        for i, handle in enumerate(self._handles):
            if ctypes.cast(handle, ctypes.c_void_p).value == address:
                return i
        return None
