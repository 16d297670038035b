"""DCGM_EXP_P2P_STATUS through NVML: the NVLink P2P status from one GPU to each peer GPU of the node.

``nvmlDeviceGetP2PStatus(gpu, peer, NVML_P2P_CAPS_INDEX_NVLINK)`` answers an ``nvmlGpuP2PStatus_t``: 0 OK,
1 chipset, 2 GPU, 3 IOH topology not supported, 4 disabled by a registry key, 5 not supported, 6 unknown. That
number is the series' value. A peer NVML cannot answer for (lost, or an error this time) is left out; a GPU
whose every peer answers NotSupported cannot give the field at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpudash.exporter.source import PeerStatus


def peer_status(nv: Any, handle: Any, index: int, handles: Sequence[Any],
                lost: Sequence[bool]) -> tuple[PeerStatus, ...] | None:
    """GPU ``index``'s status to every other GPU that is not lost; None when NVML does not support the call."""
    out = []
    not_supported = 0
    for peer, peer_handle in enumerate(handles):
        if peer == index or lost[peer]:
            continue
        try:
            status = nv.nvmlDeviceGetP2PStatus(handle, peer_handle, nv.NVML_P2P_CAPS_INDEX_NVLINK)
        except nv.NVMLError as exc:
            not_supported += exc.value in (nv.NVML_ERROR_NOT_SUPPORTED, nv.NVML_ERROR_FUNCTION_NOT_FOUND)
            continue
        out.append(PeerStatus(peer, int(status)))
    return None if not_supported and not out else tuple(out)
