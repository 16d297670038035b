"""Each GPU process's share of the SMs, from NVML's process utilization samples.

`nvmlDeviceGetProcessUtilization(handle, since)` returns the samples the driver took after `since` (a
timestamp in microseconds), one per process and sample, with its SM share in percent. A process with no
sample since the previous read used no SM time in between: 0. NVML_ERROR_NOT_FOUND means no process had a
sample at all. Where the call is not supported (some GPUs, vGPU guests) the signal is left out for that GPU.
"""

from __future__ import annotations

import threading
from typing import Any


class ProcessUtilization:
    """pid -> SM % of one GPU since the previous read; `nv` is pynvml (tests pass a stand-in)."""

    def __init__(self, nv: Any) -> None:
        self.nv = nv
        self._since: dict[int, int] = {}  # GPU index -> the newest sample's timestamp seen
        self._lock = threading.Lock()

    def sm_by_pid(self, handle: Any, index: int) -> dict[int, float] | None:
        """The latest SM share of each process sampled since the previous call; None: NVML cannot tell here."""
        nv = self.nv
        with self._lock:
            since = self._since.get(index, 0)
        try:
            samples = nv.nvmlDeviceGetProcessUtilization(handle, since)
        except nv.NVMLError as exc:
            return {} if exc.value == nv.NVML_ERROR_NOT_FOUND else None
        latest: dict[int, tuple[int, float]] = {}
        for sample in samples:
            pid, stamp = int(sample.pid), int(sample.timeStamp)
            if pid not in latest or stamp >= latest[pid][0]:
                latest[pid] = (stamp, float(sample.smUtil))
        with self._lock:
            self._since[index] = max([since, *(stamp for stamp, _ in latest.values())])
        return {pid: sm for pid, (_, sm) in latest.items()}
