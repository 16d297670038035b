"""DCGM_EXP_GPU_HEALTH_STATUS from the exporter's own health reads, as DCGM's health watches would judge them.

dcgm-exporter asks DCGM's health check and publishes, per GPU and watch (``health_watch``: PCIE, NVLINK, MEM,
THERMAL, POWER, ...), the result (0 pass, 10 warn, 20 fail) with the incident's error code
(``health_error_code``: ``DCGM_FR_OK`` when it passes), one incident per watch. The bundled exporter has no
DCGM: it judges the watches its NVML reads can speak for, with the error codes DCGM raises for the same
conditions, and leaves out the watches it cannot judge (PCIE, PMU, MCU, SM, INFOROM, DRIVER) rather than
claim they pass. A watch appears only where at least one of its inputs was read on this GPU.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gpudash.catalog import CLOCK_EVENT_REASONS
from gpudash.exporter.source import LinkHealth

PASS, WARN, FAIL = 0, 10, 20  # dcgmHealthWatchResult_t
OK = "DCGM_FR_OK"

_BIT = {name: bit for bit, name in CLOCK_EVENT_REASONS}
_THERMAL_BITS = _BIT["sw_thermal_slowdown"] | _BIT["hw_thermal_slowdown"]
_POWER_BITS = _BIT["hw_power_brake_slowdown"]

Values = Mapping[str, float]


@dataclass(frozen=True)
class Condition:
    """One incident DCGM raises on a watch: when it holds, the result and DCGM's error code for it."""

    watch: str
    inputs: frozenset[str]  # catalog keys it reads ("links": the GPU's NVLink links)
    holds: Callable[[Values, tuple[LinkHealth, ...]], bool]
    result: int
    code: str


def _positive(key: str) -> Callable[[Values, tuple[LinkHealth, ...]], bool]:
    return lambda v, _links: v.get(key, 0.0) > 0


def _reasons(bits: int) -> Callable[[Values, tuple[LinkHealth, ...]], bool]:
    return lambda v, _links: int(v.get("clock_event_reasons", 0.0)) & bits != 0


def _link_down(_v: Values, links: tuple[LinkHealth, ...]) -> bool:
    return any(not link.up for link in links)


# The conditions per watch, the worse first: a watch shows the first that holds (DCGM reports one per watch).
CONDITIONS: tuple[Condition, ...] = (
    Condition("MEM", frozenset({"ecc_dbe_vol"}), _positive("ecc_dbe_vol"), FAIL, "DCGM_FR_VOLATILE_DBE_DETECTED"),
    Condition("MEM", frozenset({"row_remap_failure"}), _positive("row_remap_failure"), FAIL,
              "DCGM_FR_ROW_REMAP_FAILURE"),
    Condition("MEM", frozenset({"row_remap_pending"}), _positive("row_remap_pending"), WARN,
              "DCGM_FR_PENDING_ROW_REMAP"),
    Condition("MEM", frozenset({"retired_pending"}), _positive("retired_pending"), WARN,
              "DCGM_FR_PENDING_PAGE_RETIREMENTS"),
    Condition("NVLINK", frozenset({"links"}), _link_down, FAIL, "DCGM_FR_NVLINK_DOWN"),
    Condition("THERMAL", frozenset({"clock_event_reasons"}), _reasons(_THERMAL_BITS), WARN,
              "DCGM_FR_CLOCK_THROTTLE_THERMAL"),
    Condition("POWER", frozenset({"clock_event_reasons"}), _reasons(_POWER_BITS), WARN,
              "DCGM_FR_CLOCK_THROTTLE_POWER"),
)
WATCHES: tuple[str, ...] = tuple(dict.fromkeys(c.watch for c in CONDITIONS))
# The catalog keys the judgement reads: the poller reads them whenever the health status is published.
INPUT_KEYS = frozenset(key for c in CONDITIONS for key in c.inputs if key != "links")


def health_watches(values: Values, links: tuple[LinkHealth, ...]) -> list[tuple[str, int, str]]:
    """(watch, result, error code) for each watch this GPU's reads can judge, in WATCHES order."""
    present = set(values) | ({"links"} if links else set())
    out = []
    for watch in WATCHES:
        judged = [c for c in CONDITIONS if c.watch == watch and c.inputs & present]
        if not judged:
            continue
        hit = next((c for c in judged if c.holds(values, links)), None)
        out.append((watch, hit.result, hit.code) if hit is not None else (watch, PASS, OK))
    return out
