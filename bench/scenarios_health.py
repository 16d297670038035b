"""Alert-quality scenarios of the health alerts' latching and of the driver's recovery action, as keyword
arguments of bench.alert_corpus.Scenario (that module appends them to its SCENARIOS)."""

from __future__ import annotations

from typing import Any

HEALTH_SCENARIOS: tuple[dict[str, Any], ...] = (
    {"name": "xid-79-latched", "kind": "fault",
     "description": "GPU 6 reports XID 79 at 1h10m and nobody resets it: still firing 4h50m later",
     "hours": 6.0, "faults": ("6=xid:79@1h10m",), "fault_gpu": 6, "expected": ("GPUXidError",)},
    {"name": "recovery-action", "kind": "fault",
     "description": "GPU 2's recovery action reads 1 (GPU reset) from 1h10m, with XID 154, until a reset 1 hour "
                    "later (dcgm-exporter's default counters do not publish the field)",
     "hours": 3.0, "faults": ("2=recovery-action:1@1h10m+1h",), "fault_gpu": 2,
     "expected": ("GPURecoveryAction",)},
)
