"""dcgm-exporter's declared type and help per field: its counters CSV, with the 2026 declarations over it.

default-counters.csv (an older copy) declares every field it knows, enabled or commented out;
exporter-fields-4.8.md quotes the rows dcgm-exporter's 2026 counters file changed or added (its DCGM_EXP_*
fields, and DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL now a gauge). Both are in tests/fixtures/dcgm-exporter/.
"""

from __future__ import annotations

import re
from pathlib import Path

_ROW = re.compile(r"^#?\s*(DCGM_[A-Z0-9_]+)\s*,\s*(gauge|counter|label)\s*,\s*(.*?)\s*$")


def _rows(text: str) -> dict[str, tuple[str, str]]:
    return {m.group(1): (m.group(2), m.group(3)) for line in text.splitlines() if (m := _ROW.match(line))}


def declared_48(reference: Path) -> dict[str, tuple[str, str]]:
    """The rows exporter-fields-4.8.md quotes from dcgm-exporter's 2026 counters file: name -> (type, help)."""
    return _rows((reference / "dcgm-exporter" / "exporter-fields-4.8.md").read_text())


def declared_types(reference: Path) -> dict[str, str]:
    """Every field dcgm-exporter declares, with the type of its 2026 counters file: name -> type."""
    rows = _rows((reference / "dcgm-exporter" / "default-counters.csv").read_text())
    rows.update(declared_48(reference))
    text = (reference / "dcgm-exporter" / "exporter-fields-4.8.md").read_text()
    if "`DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL` is declared `gauge`" in text:
        rows["DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"] = ("gauge", rows["DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"][1])
    return {name: kind for name, (kind, _help) in rows.items()}
