"""The GPU-health reads through NVML: ECC, retired pages, NVLink per link, thermal limits, violations, recovery.

Each function builds readers over the pynvml module ``nv``, in DCGM's units (shared/reference/xid-catalog.md
§3-4, nvml-mapping.md). A call that raises NotSupported marks its keys unsupported for that GPU (the caller
does that); a reader raises ``Unsupported`` where NVML answers without an error but the GPU has nothing to
report (no NVLink link at all).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpudash.catalog import NVLINK_ERROR_KINDS
from gpudash.exporter.nvml_reader import NvmlReader, Unsupported, Values
from gpudash.exporter.source import LinkHealth

ECC_KEYS = frozenset({"ecc_sbe_vol", "ecc_dbe_vol", "ecc_sbe_agg", "ecc_dbe_agg"})
RETIRED_KEYS = frozenset({"retired_sbe", "retired_dbe", "retired_pending"})
NVLINK_KEYS = frozenset({kind for _, kind in NVLINK_ERROR_KINDS} | {"nvlink_link_errors", "nvlink_link_up"})
_RECOVERY_ACTION_FIELD = 230  # NVML_FI_DEV_GET_GPU_RECOVERY_ACTION (R565), for bindings that lack the name
_GPU_MAX, _MEM_MAX = 3, 2  # NVML_TEMPERATURE_THRESHOLD_GPU_MAX / _MEM_MAX
_THERMAL, _POWER = 1, 0  # NVML_PERF_POLICY_THERMAL / _POWER
# nvmlDeviceGetNvLinkErrorCounter's counters (NVML_NVLINK_ERROR_DL_*), by gpudash's error label
_LINK_COUNTERS = (("replay", 0), ("recovery", 1), ("crc_flit", 2), ("crc_data", 3))
# Hopper's per-link field values (NVML_FI_DEV_NVLINK_ERROR_DL_*, scope = link); its CRC counter is the
# flow-control (flit) CRC, the data CRC has no field of its own there
_LINK_FIELDS = (("replay", 161), ("recovery", 162), ("crc_flit", 163))

LinkSink = Callable[[int, tuple[LinkHealth, ...]], None]


def _const(nv: Any, name: str, default: int) -> int:
    return int(getattr(nv, name, default))


def health_readers(nv: Any, store_links: LinkSink) -> list[NvmlReader]:
    """Every health reader; ``store_links(index, links)`` receives each GPU's per-link reading."""
    return [
        NvmlReader(ECC_KEYS, lambda h, _i: ecc(nv, h)),
        NvmlReader(RETIRED_KEYS, lambda h, _i: retired_pages(nv, h)),
        NvmlReader(frozenset({"gpu_max_op_temp"}), lambda h, _i: threshold(nv, h, "gpu_max_op_temp")),
        NvmlReader(frozenset({"mem_max_op_temp"}), lambda h, _i: threshold(nv, h, "mem_max_op_temp")),
        NvmlReader(frozenset({"temp_margin"}), lambda h, _i: margin(nv, h)),
        NvmlReader(frozenset({"thermal_violation"}), lambda h, _i: violation(nv, h, "thermal_violation")),
        NvmlReader(frozenset({"power_violation"}), lambda h, _i: violation(nv, h, "power_violation")),
        NvmlReader(frozenset({"recovery_action"}), lambda h, _i: recovery_action(nv, h)),
        NvmlReader(NVLINK_KEYS, lambda h, i: _store(nvlink_health(nv, h), i, store_links), partial=True),
    ]


def ecc(nv: Any, h: Any) -> Values:
    sbe = _const(nv, "NVML_MEMORY_ERROR_TYPE_CORRECTED", 0)
    dbe = _const(nv, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
    vol = _const(nv, "NVML_VOLATILE_ECC", 0)
    agg = _const(nv, "NVML_AGGREGATE_ECC", 1)
    total = nv.nvmlDeviceGetTotalEccErrors
    return {
        "ecc_sbe_vol": float(total(h, sbe, vol)),
        "ecc_dbe_vol": float(total(h, dbe, vol)),
        "ecc_sbe_agg": float(total(h, sbe, agg)),
        "ecc_dbe_agg": float(total(h, dbe, agg)),
    }


def retired_pages(nv: Any, h: Any) -> Values:
    """Pre-Ampere page retirement; Hopper answers NotSupported (it remaps rows instead)."""
    sbe = _const(nv, "NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS", 0)
    dbe = _const(nv, "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", 1)
    return {
        "retired_sbe": float(len(nv.nvmlDeviceGetRetiredPages(h, sbe))),
        "retired_dbe": float(len(nv.nvmlDeviceGetRetiredPages(h, dbe))),
        "retired_pending": float(nv.nvmlDeviceGetRetiredPagesPendingStatus(h)),
    }


def threshold(nv: Any, h: Any, key: str) -> Values:
    which = (_const(nv, "NVML_TEMPERATURE_THRESHOLD_GPU_MAX", _GPU_MAX) if key == "gpu_max_op_temp"
             else _const(nv, "NVML_TEMPERATURE_THRESHOLD_MEM_MAX", _MEM_MAX))
    return {key: float(nv.nvmlDeviceGetTemperatureThreshold(h, which))}


def margin(nv: Any, h: Any) -> Values:
    """NVML's margin temperature (R570+): degrees to the max operating temperature; older bindings lack it."""
    call = getattr(nv, "nvmlDeviceGetMarginTemperature", None)
    if call is None:
        raise Unsupported()
    value = call(h)
    return {"temp_margin": float(getattr(value, "marginTemperature", value))}


def violation(nv: Any, h: Any, key: str) -> Values:
    policy = (_const(nv, "NVML_PERF_POLICY_THERMAL", _THERMAL) if key == "thermal_violation"
              else _const(nv, "NVML_PERF_POLICY_POWER", _POWER))
    return {key: float(nv.nvmlDeviceGetViolationStatus(h, policy).violationTime)}  # ns, as DCGM


def recovery_action(nv: Any, h: Any) -> Values:
    (field,) = nv.nvmlDeviceGetFieldValues(h, [_const(nv, "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION",
                                                      _RECOVERY_ACTION_FIELD)])
    if field.nvmlReturn != nv.NVML_SUCCESS:
        raise nv.NVMLError(field.nvmlReturn)
    return {"recovery_action": float(field.value.uiVal)}


def nvlink_health(nv: Any, h: Any) -> tuple[LinkHealth, ...]:
    """Each link the GPU has (its state answers), with its error counters."""
    absent = (nv.NVML_ERROR_NOT_SUPPORTED, nv.NVML_ERROR_INVALID_ARGUMENT)
    links: list[int] = []
    states: dict[int, bool] = {}
    for link in range(_const(nv, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            states[link] = bool(nv.nvmlDeviceGetNvLinkState(h, link))
        except nv.NVMLError as exc:
            if exc.value in absent:
                continue
            raise
        links.append(link)
    if not links:
        raise Unsupported()
    errors = _link_errors(nv, h, links)
    return tuple(LinkHealth(link, states[link], errors.get(link, {})) for link in links)


def _link_errors(nv: Any, h: Any, links: list[int]) -> dict[int, dict[str, float]]:
    """The error counters per link: Hopper's field values (one call for every link, what nvidia-smi nvlink -e
    shows), else the older per-link counter call, else none.

    On an H200 (R580) the per-link counter call answers for the data CRC too, with counts that rise on idle
    links whose CRC field, replays and recoveries stay 0 (bench/results/health-h200-x2.txt): where the field
    values answer, they are the only source."""
    ids = [(field, link) for link in links for _, field in _LINK_FIELDS]
    out: dict[int, dict[str, float]] = {link: {} for link in links}
    for (field_id, link), value in zip(ids, nv.nvmlDeviceGetFieldValues(h, ids), strict=True):
        if value.nvmlReturn == nv.NVML_SUCCESS:
            kind = next(k for k, f in _LINK_FIELDS if f == field_id)
            out[link][kind] = float(value.value.ullVal)
    if any(out.values()):
        return out
    unsupported = (nv.NVML_ERROR_NOT_SUPPORTED, nv.NVML_ERROR_FUNCTION_NOT_FOUND, nv.NVML_ERROR_INVALID_ARGUMENT)
    try:
        return {link: {kind: float(nv.nvmlDeviceGetNvLinkErrorCounter(h, link, code))
                       for kind, code in _LINK_COUNTERS} for link in links}
    except nv.NVMLError as exc:
        if exc.value not in unsupported:
            raise
    return out


def link_totals(links: tuple[LinkHealth, ...]) -> Values:
    """The DCGM per-GPU totals: each error kind summed over the links that report it."""
    out: Values = {}
    for kind, key in NVLINK_ERROR_KINDS:
        counts = [link.errors[kind] for link in links if kind in link.errors]
        if counts:
            out[key] = sum(counts)
    return out


def _store(links: tuple[LinkHealth, ...], index: int, sink: LinkSink) -> Values:
    sink(index, links)
    return link_totals(links)
