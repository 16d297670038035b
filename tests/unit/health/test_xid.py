"""The XID table: the codes a training fleet meets, each with a valid action; malformed rows are refused."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from gpudash.errors import ConfigError
from gpudash.health import xid
from gpudash.health.xid import ACTIONS, XID_TABLE, XidCatalogError, action_for, parse_catalog, with_overrides

CSV = Path(xid.__file__).parent / xid.CATALOG_FILE
# The codes training fleets meet most.
FLEET_CODES = (13, 31, 43, 45, 48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140, 154)
HEADER = ",".join(xid.COLUMNS)


def test_every_fleet_code_is_in_the_csv_with_a_valid_action() -> None:
    with CSV.open(encoding="utf-8") as f:
        rows = {int(r["code"]): r for r in csv.DictReader(f)}
    for code in FLEET_CODES:
        assert code in rows, code
        assert rows[code]["action"] in ACTIONS, code
        assert XID_TABLE[code].action == rows[code]["action"]


@pytest.mark.parametrize(("code", "action", "severity"), [
    (13, "restart_job", "warning"), (43, "none", "info"), (48, "reset_gpu", "critical"),
    (63, "none", "info"), (64, "reset_gpu", "critical"), (79, "reboot_node", "critical"),
    (94, "restart_job", "warning"), (95, "reset_gpu", "critical"), (154, "none", "info"),
])
def test_catalog_buckets_map_onto_actions(code: int, action: str, severity: str) -> None:
    row = action_for(code)
    assert (row.action, row.severity) == (action, severity)


def test_an_unknown_code_gets_the_safe_default() -> None:
    row = action_for(999)
    assert (row.code, row.action, row.severity) == (999, "reset_gpu", "warning")
    assert 999 not in XID_TABLE


def test_severity_follows_the_action_in_every_row() -> None:
    for row in XID_TABLE.values():
        assert row.severity == xid.severity_for(row.action), row.code


def test_overrides_change_the_action_and_its_severity() -> None:
    table = with_overrides(XID_TABLE, {13: "none", 777: "drain"})
    assert (table[13].action, table[13].severity) == ("none", "info")
    assert (table[777].action, table[777].severity) == ("drain", "critical")
    assert XID_TABLE[13].action == "restart_job"  # the bundled table is left alone


@pytest.mark.parametrize(("row", "message"), [
    ("13,A,meaning,restart_now,warning,application,", "t.csv:3: action: expected one of none, restart_job"),
    ("13,A,meaning,restart_job,critical,application,", "t.csv:3: severity: action restart_job is warning"),
    ("x1,A,meaning,none,info,application,", "t.csv:3: code: expected a whole number from 1 to 999, got 'x1'"),
    ("13,A,meaning,none,info,gpu,", "t.csv:3: class: expected one of application"),
    ("13,A,meaning,none,info", "t.csv:3: expected 7 columns"),
    ("8,B,again,none,info,driver,", "t.csv:3: code 8 is listed twice"),
])
def test_a_malformed_row_names_file_and_line(row: str, message: str) -> None:
    text = f"{HEADER}\n8,A,meaning,none,info,driver,\n{row}\n"
    with pytest.raises(XidCatalogError) as err:
        parse_catalog("t.csv", text)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)
    assert isinstance(err.value, ConfigError) and err.value.exit_code == 2  # the CLI prints `gpudash: <message>`


def test_a_wrong_header_is_refused() -> None:
    with pytest.raises(XidCatalogError, match=r"^t.csv:1: expected the header code,name"):
        parse_catalog("t.csv", "code,name\n1,a\n")


def test_docs_show_the_table_as_the_csv_has_it(root: Path) -> None:
    text = (root / "docs" / "alerts.md").read_text()
    assert "## XID classes\n" in text
    assert f"\n\n{xid.markdown_table(XID_TABLE)}\n\n" in text  # whole: no row more, none less
