"""A GPU's NVSwitch fabric state through NVML, as DCGM publishes it (DCGM_FI_DEV_FABRIC_MANAGER_STATUS).

``nvmlDeviceGetGpuFabricInfo`` answers the fabric's state (0 not supported, 1 not started, 2 in progress,
3 completed), the status of a completed registration (an nvmlReturn_t) and the clique the GPU joined. DCGM
folds them into one status, and so does this reader: 0 not supported, 1 not started, 2 in progress, 3 success,
4 failure (completed with an error status), 5 unrecognized. A GPU without the call (before Hopper, or an older
nvidia-ml-py) leaves both fields out; nothing else is affected.
"""

from __future__ import annotations

import ctypes
from typing import Any

from gpudash.exporter.nvml_reader import NvmlReader, Unsupported, Values

FABRIC_KEYS = frozenset({"fabric_status", "fabric_clique"})
# dcgmFabricManagerStatus_t, DCGM's fold of the NVML state and status
NOT_SUPPORTED, NOT_STARTED, IN_PROGRESS, SUCCESS, FAILURE, UNRECOGNIZED = range(6)
_NVML_COMPLETED = 3  # NVML_GPU_FABRIC_STATE_COMPLETED


def fabric_status(state: int, status: int, success: int = 0) -> int:
    """DCGM's fabric manager status from NVML's fabric state and registration status."""
    if state in (NOT_SUPPORTED, NOT_STARTED, IN_PROGRESS):
        return state
    if state == _NVML_COMPLETED:
        return SUCCESS if status == success else FAILURE
    return UNRECOGNIZED


def fabric_reader(nv: Any) -> NvmlReader:
    """The reader of fabric_status and fabric_clique (NVML's clique id, 0 before the GPU joined one)."""
    call = getattr(nv, "nvmlDeviceGetGpuFabricInfo", None)
    structure = getattr(nv, "c_nvmlGpuFabricInfo_t", None)

    def read(handle: Any, _index: int) -> Values:
        if call is None or structure is None:
            raise Unsupported()
        info = structure()
        # nvidia-ml-py hands its second argument to NVML as it is: the structure goes by reference (by value, an
        # H200 answered the first call and refused every later one with Invalid Argument)
        call(handle, ctypes.byref(info))
        status = fabric_status(int(info.state), int(info.status), int(nv.NVML_SUCCESS))
        return {"fabric_status": float(status), "fabric_clique": float(info.cliqueId)}

    return NvmlReader(FABRIC_KEYS, read)
