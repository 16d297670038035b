"""The XID table: code -> name, meaning, action, severity and class, read from xid_catalog.csv.

The rows follow NVIDIA's XID catalog (its *immediate* resolution bucket; shared reference xid-catalog.md):
RESTART_APP -> restart_job, RESET_GPU -> reset_gpu, RESTART_BM -> reboot_node, IGNORE -> none, and
CONTACT_SUPPORT -> the safe reading (a GPU reset) since no XID's bucket itself says "replace the GPU";
the `note` column says why wherever a row departs from its bucket. Severity follows the action, so a code
pages exactly when someone must act on the GPU: none -> info (never pages), restart_job -> warning,
reset_gpu and above -> critical. A code the table does not know gets `UNKNOWN`: warning, reset_gpu.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from dataclasses import dataclass, replace
from importlib import resources

from gpudash.errors import ConfigError

# In increasing cost; the `action` label of every health alert is one of these.
ACTIONS = ("none", "restart_job", "reset_gpu", "reboot_node", "drain", "rma")
SEVERITIES = ("info", "warning", "critical")
CLASSES = ("application", "memory", "nvlink", "pcie", "driver", "hardware", "thermal", "informational")
COLUMNS = ("code", "name", "meaning", "action", "severity", "class", "note")
CATALOG_FILE = "xid_catalog.csv"


class XidCatalogError(ConfigError):
    """A malformed row of an XID table: the message is one line naming file:line (`gpudash: ...`, exit 2)."""


def severity_for(action: str) -> str:
    """The severity an action implies: only a GPU someone must reset, reboot, drain or replace pages."""
    if action == "none":
        return "info"
    if action == "restart_job":
        return "warning"
    return "critical"


@dataclass(frozen=True)
class XidClass:
    code: int
    name: str
    meaning: str
    action: str
    severity: str
    cls: str
    note: str = ""


UNKNOWN_ACTION = "reset_gpu"
UNKNOWN_SEVERITY = "warning"  # not critical: a code nobody has classified should be looked at, not page at night


def unknown(code: int) -> XidClass:
    return XidClass(code, "unknown", "an XID gpudash's table does not list", UNKNOWN_ACTION, UNKNOWN_SEVERITY,
                    "driver", "Not classified: reset the GPU when idle and look the code up in NVIDIA's catalog")


def _row(source: str, line: int, row: dict[str, str]) -> XidClass:
    def fail(message: str) -> XidCatalogError:
        return XidCatalogError(f"{source}:{line}: {message}")

    if None in row or any(row.get(c) is None for c in COLUMNS):
        raise fail(f"expected {len(COLUMNS)} columns ({', '.join(COLUMNS)})")
    text = row["code"].strip()
    if not text.isdigit() or not 1 <= int(text) <= 999:
        raise fail(f"code: expected a whole number from 1 to 999, got {text!r}")
    for column, choices in (("action", ACTIONS), ("severity", SEVERITIES), ("class", CLASSES)):
        if row[column] not in choices:
            raise fail(f"{column}: expected one of {', '.join(choices)}, got {row[column]!r}")
    if row["severity"] != severity_for(row["action"]):
        raise fail(f"severity: action {row['action']} is {severity_for(row['action'])}, got {row['severity']!r}")
    if not row["name"].strip() or not row["meaning"].strip():
        raise fail("name and meaning must not be empty")
    return XidClass(int(text), row["name"], row["meaning"], row["action"], row["severity"], row["class"],
                    row["note"])


def parse_catalog(source: str, text: str) -> dict[int, XidClass]:
    """Every row of an XID table's CSV text, by code; a malformed row raises XidCatalogError naming file:line."""
    reader = csv.DictReader(io.StringIO(text))
    if tuple(reader.fieldnames or ()) != COLUMNS:
        raise XidCatalogError(f"{source}:1: expected the header {','.join(COLUMNS)}")
    table: dict[int, XidClass] = {}
    for row in reader:
        xid = _row(source, reader.line_num, row)
        if xid.code in table:
            raise XidCatalogError(f"{source}:{reader.line_num}: code {xid.code} is listed twice")
        table[xid.code] = xid
    return table


def with_overrides(table: Mapping[int, XidClass], overrides: Mapping[int, str]) -> dict[int, XidClass]:
    """The table with a site's actions (thresholds.yaml alerts.xid.overrides); severity follows the action."""
    out = dict(table)
    for code, action in overrides.items():
        base = out.get(code) or unknown(code)
        out[code] = replace(base, action=action, severity=severity_for(action))
    return dict(sorted(out.items()))


def _bundled() -> dict[int, XidClass]:
    text = resources.files(__package__).joinpath(CATALOG_FILE).read_text(encoding="utf-8")
    return parse_catalog(f"gpudash/health/{CATALOG_FILE}", text)


XID_TABLE: dict[int, XidClass] = _bundled()


def action_for(code: int, table: Mapping[int, XidClass] = XID_TABLE) -> XidClass:
    """The row of `code`, or the safe default for a code the table does not list (warning, reset_gpu)."""
    return table.get(code) or unknown(code)


def markdown_table(table: Mapping[int, XidClass]) -> str:
    """The table as docs/alerts.md shows it under "XID classes" (a unit test keeps the two the same)."""
    lines = ["| XID | name | class | action | severity | meaning | note |", "|---|---|---|---|---|---|---|"]
    for row in table.values():
        cells = (str(row.code), f"`{row.name}`" if row.name.isupper() else row.name, row.cls, row.action,
                 row.severity, row.meaning, row.note)
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)
