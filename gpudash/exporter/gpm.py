"""NVML GPM (GPU performance monitoring, Hopper and later): DCGM's profiling ratios and PCIe throughput.

Each read takes a sample and reports the averages over the window since the previous one, as DCGM's GPM
path does (shared/reference/nvml-mapping.md): percentages become ratios, MiB/s becomes B/s.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

MIB = 1024.0 * 1024.0
# catalog key -> (NVML GPM metric id, scale to the DCGM unit): percentages -> ratios, MiB/s -> B/s
GPM_METRICS: dict[str, tuple[int, float]] = {
    "gr_engine_active": (1, 0.01),  # NVML_GPM_METRIC_GRAPHICS_UTIL
    "sm_active": (2, 0.01),  # NVML_GPM_METRIC_SM_UTIL
    "sm_occupancy": (3, 0.01),  # NVML_GPM_METRIC_SM_OCCUPANCY
    "tensor_active": (5, 0.01),  # NVML_GPM_METRIC_ANY_TENSOR_UTIL
    "dram_active": (10, 0.01),  # NVML_GPM_METRIC_DRAM_BW_UTIL
    "pcie_tx": (20, MIB),  # NVML_GPM_METRIC_PCIE_TX_PER_SEC
    "pcie_rx": (21, MIB),  # NVML_GPM_METRIC_PCIE_RX_PER_SEC
}


class GpmUnsupported(Exception):
    """This GPU has no GPM."""


class Gpm:
    """GPM metrics of one GPU: each read takes a sample and reports the window since the previous one."""

    def __init__(self, nv: Any, handle: Any, gpu_instance: int | None = None) -> None:
        """`gpu_instance`: sample one MIG GPU instance of the GPU `handle` (nvmlGpmMigSampleGet) instead of it all."""
        self.nv, self.handle, self.gpu_instance = nv, handle, gpu_instance
        self.lock = threading.Lock()
        self.supported = False
        self.samples: list[Any] = []
        self.have_previous = False
        self.unsupported: set[str] = set()
        try:
            self.supported = bool(nv.nvmlGpmQueryDeviceSupport(handle).isSupportedDevice)
            if self.supported:
                self.samples = [nv.nvmlGpmSampleAlloc(), nv.nvmlGpmSampleAlloc()]
                self.request = nv.c_nvmlGpmMetricsGet_t()
        except (nv.NVMLError, AttributeError):
            self.supported = False

    def read(self) -> dict[str, float]:
        nv = self.nv
        with self.lock:
            if not self.samples:  # freed: the GPU was lost and re-found; its new _Gpm takes over
                return {}
            previous, current = self.samples
            if self.gpu_instance is None:
                nv.nvmlGpmSampleGet(self.handle, current)
            else:
                nv.nvmlGpmMigSampleGet(self.handle, self.gpu_instance, current)
            self.samples = [current, previous]
            if not self.have_previous:  # a ratio needs a window: the first sweep has none yet
                self.have_previous = True
                return {}
            request = self.request
            request.version = nv.NVML_GPM_METRICS_GET_VERSION
            request.numMetrics = len(GPM_METRICS)
            request.sample1, request.sample2 = previous, current
            for slot, (metric_id, _scale) in enumerate(GPM_METRICS.values()):
                request.metrics[slot].metricId = metric_id
            nv.nvmlGpmMetricsGet(request)
            values: dict[str, float] = {}
            for slot, (key, (_id, scale)) in enumerate(GPM_METRICS.items()):
                metric = request.metrics[slot]
                if metric.nvmlReturn == nv.NVML_SUCCESS:
                    values[key] = float(metric.value) * scale
                elif metric.nvmlReturn == nv.NVML_ERROR_NOT_SUPPORTED:
                    self.unsupported.add(key)
            return values

    def free(self) -> None:
        with self.lock:  # never while the other loop is between sampling and reading metrics
            for sample in self.samples:
                with contextlib.suppress(self.nv.NVMLError):
                    self.nv.nvmlGpmSampleFree(sample)
            self.samples, self.supported = [], False
