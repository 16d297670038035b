"""A MIG GPU's instances through NVML, with dcgm-exporter's labels and what NVML gives per instance.

MIG mode is asked of each GPU (NotSupported: a GPU without MIG, never asked again). While it is on, every MIG
device slot of the GPU is read: the device's GPU instance id (``GPU_I_ID``), its profile (``GPU_I_PROFILE``,
from its name: "NVIDIA H200 MIG 1g.18gb"), its UUID and its memory, and on Hopper the GPU instance's GPM ratios
(nvmlGpmMigSampleGet: two samples one slow sweep apart, as for a whole GPU). A GPU instance split into several
compute instances shows as one MIG device per compute instance, sharing the instance's memory: it is read once,
through its first.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any

from gpudash.exporter.gpm import MIB, Gpm
from gpudash.exporter.source import MIG_KEYS, PROFILING_KEYS, MigInstance

_PROFILE = re.compile(r"([0-9]+g\.[0-9]+gb(?:\+[a-z0-9]+)*)\s*$")


def profile_of(name: str) -> str:
    """The MIG profile at the end of a MIG device's name ("NVIDIA H200 MIG 1g.18gb" -> "1g.18gb"), else ''."""
    match = _PROFILE.search(name)
    return match.group(1) if match else ""


class MigReader:
    """The MIG instances of a node's GPUs; `nv` is pynvml (tests pass a stand-in)."""

    def __init__(self, nv: Any) -> None:
        self.nv = nv
        self._gpm: dict[tuple[int, int], Gpm] = {}  # (GPU index, GPU instance id): its GPM samples

    def read(self, handle: Any, index: int, keys: frozenset[str]) -> tuple[MigInstance, ...] | None:
        """GPU `index`'s instances, in GPU instance order; () while MIG is off; None when the GPU has no MIG."""
        nv = self.nv
        try:
            current, _pending = nv.nvmlDeviceGetMigMode(handle)
        except nv.NVMLError as exc:
            if exc.value in (nv.NVML_ERROR_NOT_SUPPORTED, nv.NVML_ERROR_FUNCTION_NOT_FOUND):
                return None
            raise
        found: dict[int, MigInstance] = {}
        if current == nv.NVML_DEVICE_MIG_ENABLE:
            for slot in range(int(nv.nvmlDeviceGetMaxMigDeviceCount(handle))):
                try:
                    mig = nv.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
                except nv.NVMLError as exc:
                    if exc.value in (nv.NVML_ERROR_NOT_FOUND, nv.NVML_ERROR_INVALID_ARGUMENT):
                        continue  # an empty slot
                    raise
                gpu_instance = int(nv.nvmlDeviceGetGpuInstanceId(mig))
                if gpu_instance not in found:
                    found[gpu_instance] = self._instance(handle, index, mig, gpu_instance, keys)
        self.forget(index, frozenset(found))
        return tuple(found[gi] for gi in sorted(found))

    def free(self) -> None:
        for gpm in self._gpm.values():
            gpm.free()
        self._gpm.clear()

    def _instance(self, handle: Any, index: int, mig: Any, gpu_instance: int, keys: frozenset[str]) -> MigInstance:
        nv = self.nv
        name = str(nv.nvmlDeviceGetName(mig))
        values: dict[str, float] = {}
        if keys & {"fb_used", "fb_free", "fb_total"}:
            with contextlib.suppress(nv.NVMLError):  # left out this time; its other values still count
                memory = nv.nvmlDeviceGetMemoryInfo(mig)
                values.update(fb_used=memory.used / MIB, fb_free=memory.free / MIB, fb_total=memory.total / MIB)
        if keys & PROFILING_KEYS:
            gpm = self._gpm.get((index, gpu_instance))
            if gpm is None:
                gpm = self._gpm[(index, gpu_instance)] = Gpm(nv, handle, gpu_instance)
            if gpm.supported:
                with contextlib.suppress(nv.NVMLError):
                    values.update((k, v) for k, v in gpm.read().items() if k in MIG_KEYS)
        return MigInstance(gpu_instance, profile_of(name), str(nv.nvmlDeviceGetUUID(mig)),
                           {k: v for k, v in values.items() if k in keys})

    def forget(self, index: int, kept: frozenset[int] = frozenset()) -> None:
        """Free the GPM samples of GPU `index`'s instances but `kept` (destroyed, MIG off, or the GPU re-found)."""
        for key in [key for key in self._gpm if key[0] == index and key[1] not in kept]:
            self._gpm.pop(key).free()
