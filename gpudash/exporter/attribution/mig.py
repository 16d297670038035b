"""MIG device UUID -> parent GPU UUID, for the kubelet's `MIG-<uuid>` device ids (driver R470 and later).

The id names only the MIG device, so its GPU is asked from NVML, as dcgm-exporter does: the MIG device's
handle by its UUID, then the handle of the GPU it lives on. Answers are cached (a MIG layout changes
only when an administrator reconfigures the GPU, and then the device UUIDs change too). Lookups run on
the kubelet thread, never on the sweep. A simulated node has no MIG devices: `no_mig` answers None.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import threading
from typing import Any

log = logging.getLogger("gpudash.exporter")


def no_mig(_mig_uuid: str) -> str | None:
    """The lookup of a node without NVML (the simulated one): no MIG device is known."""
    return None


class NvmlMigLookup:
    """Callable MIG UUID -> parent GPU UUID through NVML; `nv` is pynvml (tests pass a stand-in)."""

    def __init__(self, nv: Any | None = None) -> None:
        self.nv = nv if nv is not None else importlib.import_module("pynvml")
        self.nv.nvmlInit()  # NVML counts its initialisations: the source's own stays valid after close()
        self._cache: dict[str, str] = {}
        self._failed: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, mig_uuid: str) -> str | None:
        with self._lock:
            if mig_uuid in self._cache:
                return self._cache[mig_uuid]
        nv = self.nv
        try:
            mig = nv.nvmlDeviceGetHandleByUUID(mig_uuid)
            parent = str(nv.nvmlDeviceGetUUID(nv.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig)))
        except Exception as exc:  # NVMLError, or a pynvml too old for MIG: this id labels nothing
            with self._lock:
                if mig_uuid not in self._failed:
                    self._failed.add(mig_uuid)
                    log.warning("kubelet device %s: NVML does not know this MIG device (%s); it labels no GPU",
                                mig_uuid, exc)
            return None
        with self._lock:
            self._cache[mig_uuid] = parent
            self._failed.discard(mig_uuid)
        return parent

    def close(self) -> None:
        with contextlib.suppress(self.nv.NVMLError):
            self.nv.nvmlShutdown()
