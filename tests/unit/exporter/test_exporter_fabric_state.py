"""The NVSwitch fabric state on a fake NVML: DCGM's status from NVML's state and status, absent without the call."""

from __future__ import annotations

import ctypes
from types import SimpleNamespace
from typing import Any

import pytest

from gpudash.exporter.fabric_state import FAILURE, SUCCESS, fabric_reader, fabric_status
from gpudash.exporter.nvml_reader import Unsupported


class _NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value


class _FabricInfo(ctypes.Structure):
    """nvidia-ml-py's c_nvmlGpuFabricInfo_t: built empty by the caller, filled in by NVML through a pointer."""

    _fields_ = [("clusterUuid", ctypes.c_uint8 * 16), ("status", ctypes.c_int), ("cliqueId", ctypes.c_uint32),
                ("state", ctypes.c_uint8)]


def _nv(**info: Any) -> Any:
    """nvidia-ml-py's call as it is: nvmlDeviceGetGpuFabricInfo(handle, info) passes `info` on to NVML, which
    writes through the pointer it must be (a structure passed by value is refused)."""
    def call(_handle: Any, out: Any) -> int:
        if "error" in info:
            raise _NVMLError(info["error"])
        target = out._obj  # what ctypes.byref points at; a bare structure has no _obj
        for name, value in info.items():
            setattr(target, name, value)
        return 0

    return SimpleNamespace(NVML_SUCCESS=0, NVMLError=_NVMLError, nvmlDeviceGetGpuFabricInfo=call,
                           c_nvmlGpuFabricInfo_t=_FabricInfo)


@pytest.mark.parametrize(("state", "status", "expected"), [
    (0, 0, 0), (1, 0, 1), (2, 0, 2), (3, 0, SUCCESS), (3, 10, FAILURE), (27, 0, 5)])
def test_dcgm_status_from_nvml_state(state: int, status: int, expected: int) -> None:
    assert fabric_status(state, status) == expected
    values = fabric_reader(_nv(state=state, status=status, cliqueId=7)).read(object(), 0)
    assert values == {"fabric_status": float(expected), "fabric_clique": 7.0}


def test_without_the_call_the_fields_are_unsupported() -> None:
    reader = fabric_reader(SimpleNamespace(NVML_SUCCESS=0))  # an nvidia-ml-py older than the fabric API
    with pytest.raises(Unsupported):
        reader.read(object(), 0)


def test_nvml_errors_reach_the_source_which_sorts_them() -> None:
    with pytest.raises(_NVMLError):  # NvmlSource takes NotSupported as permanent, anything else as this sweep's
        fabric_reader(_nv(error=3)).read(object(), 0)
