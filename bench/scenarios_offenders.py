"""The repeat-offender fault for the alert corpus (bench/alert_corpus.py appends it to SCENARIOS).

One GPU of a training node needs a reset three times within the scenario's hours: XIDs whose action in the
XID table is reset_gpu, each followed by a reset (the simulated exporter holds the last code 5 minutes, then
shows 0), an hour apart. GPURepeatOffender counts 3 within its 7-day window and fires at the third; the window
itself cannot pass within hours of series at 15 s (tests/rules/sites/repeat_offender_days.yaml shows it pass).
Each entry is the keyword arguments of one `alert_corpus.Scenario`.
"""

from __future__ import annotations

from typing import Any

GPU = 6

OFFENDERS: tuple[dict[str, Any], ...] = (
    {"name": "repeat-offender", "kind": "fault", "hours": 4.0,
     "description": f"GPU {GPU} needs a reset three times, an hour apart: XID 48 at 1h10m, 119 at 2h10m, 48 at 3h10m",
     "faults": (f"{GPU}=xid:48@1h10m", f"{GPU}=xid:119@2h10m", f"{GPU}=xid:48@3h10m"), "fault_gpu": GPU,
     "expected": ("GPURepeatOffender", "GPUXidError"), "notes": {"third_reset": 3 * 3600 + 600}},
)
