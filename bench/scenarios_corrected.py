"""Benign scenarios of corrected errors for the alert corpus (bench/alert_corpus.py appends them to SCENARIOS).

Each is a node of 8 GPUs training while every GPU counts errors its hardware corrected: NVLink replays (a
link-level retry that succeeded, with the CRC error it corrected), CRC flit errors at the rate of normal wear,
and single-bit ECC errors. None of them may fire anything. The simulator's faults make the counts
(gpudash.exporter.sim.faults_health); each entry is the keyword arguments of one `alert_corpus.Scenario`.
"""

from __future__ import annotations

from typing import Any

GPUS = range(8)

CORRECTED: tuple[dict[str, Any], ...] = (
    {"name": "replay-trickle", "kind": "benign", "hours": 3.0,
     "description": "training; one NVLink link of every GPU replays (and counts the CRC error it corrected) "
                    "every 10 min",
     "faults": tuple(f"{i}=nvlink-replay-trickle:6" for i in GPUS)},
    {"name": "crc-trickle", "kind": "benign", "hours": 3.0,
     "description": "training; one NVLink link of every GPU counts two CRC flit errors an hour (wear)",
     "faults": tuple(f"{i}=nvlink-crc-trickle:2" for i in GPUS)},
    {"name": "ecc-correctable-trickle", "kind": "benign", "hours": 3.0,
     "description": "training; every GPU counts a corrected single-bit ECC error every 2 min",
     "faults": tuple(f"{i}=sbe-trickle:30" for i in GPUS)},
)
