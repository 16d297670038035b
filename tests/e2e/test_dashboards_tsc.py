"""The dashboards type-check with `tsc --strict` against Grafana's own published types, every pinned release.

tests/schema/ pins @grafana/schema 11.6, 12.4 and 13.2 and TypeScript (package-lock.json committed); `make
test` runs `npm ci` there. Here npm ci runs too when its node_modules are missing, and the tests skip only
when npm itself is absent.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from support.paths import REFERENCE, ROOT
from support.slack import budget
from support.tsc import SCHEMA_DIR, Finding, check, check_v2, releases, tsc, v2_releases

from gpudash.catalog import PROFILES, profile
from gpudash.config.loading import load_settings
from gpudash.panels import typescript
from gpudash.panels.build import build_all
from gpudash.panels.formats import v2_resources
from gpudash.panels.json_files import read_json_files
from gpudash.schema_v2.layout import TABS

WRONG = REFERENCE / "grafana_schema" / "wrong-options.json"
WRONG_V2 = REFERENCE / "grafana_schema" / "wrong-v2.json"


@pytest.fixture(scope="module")
def schema_tools() -> Path:
    if not tsc().exists():
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip("npm is not installed: the @grafana/schema check needs Node.js and npm (`make test` "
                        "installs them through apt-get)")
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=SCHEMA_DIR, check=True, timeout=budget(300),
                       capture_output=True)
    return SCHEMA_DIR


def _unreadable(file: Path, exc: Exception) -> Any:
    raise AssertionError(f"{file}: {exc}")


def committed(folder: str = "json") -> dict[str, dict[str, Any]]:
    return {file.name: data for file, data in read_json_files(ROOT / "dashboards" / folder, _unreadable)}


def test_the_supported_releases_are_pinned() -> None:
    assert [r.key[0] for r in releases()] == [11, 12, 13]
    assert next(r.key for r in releases()) == (11, 6)


def test_the_committed_dashboards_type_check_against_every_release(schema_tools: Path, tmp_path: Path) -> None:
    findings = check(committed(), tmp_path)
    assert not findings, "\n".join(map(str, findings))


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_every_profile_type_checks(schema_tools: Path, tmp_path: Path, profile: str) -> None:
    built = build_all(load_settings(ROOT / "thresholds.yaml"), ROOT / "dashboards", profile_name=profile)
    findings = check(built, tmp_path)
    assert not findings, "\n".join(map(str, findings))


def _by_release(findings: list[Finding]) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {}
    for f in findings:
        found.setdefault(f.release.key[0], []).append(f"{f.panel}: {f.message}")
    return found


def test_a_wrong_option_fails_naming_the_panel_and_the_option(schema_tools: Path, tmp_path: Path) -> None:
    findings = check({WRONG.name: json.loads(WRONG.read_text())}, tmp_path)
    assert all(f.dashboard == WRONG.name for f in findings)
    by_release = _by_release(findings)
    unknown = ("panel 1: An option no Grafana knows: error TS2353: Object literal may only specify known "
               "properties, and '\"sideways\"' does not exist in type")
    mistyped = "panel 2: An option of the wrong type: error TS2322: Type 'string' is not assignable to type 'boolean'."
    footer = ("panel 3: The table footer Grafana 12.2 removed: error TS2353: Object literal may only specify known "
              "properties, and '\"footer\"' does not exist in type")
    for major in (11, 12, 13):
        messages = by_release[major]
        assert any(m.startswith(unknown) for m in messages), messages
        assert mistyped in messages, messages
    # The footer is an option of 11.6's table and gone from 12.2 on: only the newer releases refuse it.
    assert not any(m.startswith("panel 3") for m in by_release[11])
    assert any(m.startswith(footer) for m in by_release[12]) and any(m.startswith(footer) for m in by_release[13])
    assert len(findings) == 8


def test_each_option_left_out_for_an_older_release_is_one_it_does_not_know(
        schema_tools: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Without the allowances, the releases before an option came fail on it (tsc names the first unknown key
    # of each object), and the others still pass: no allowance is stale or wider than it needs to be.
    allowed = dict(typescript.ADDED_OPTIONS)
    monkeypatch.setattr(typescript, "ADDED_OPTIONS", {})
    findings = check(committed(), tmp_path)
    assert findings
    for f in findings:
        assert "error TS2353: Object literal may only specify known properties" in f.message, str(f)
        key = f.message.split("'\"", 1)[1].split("\"'", 1)[0]
        assert any(key in {path.rsplit(".", 1)[-1] for path in paths} and f.release.key < added_in
                   for added_in, paths in allowed.values()), str(f)
    older = {r.key for r in releases() if any(r.key < added_in for added_in, _ in allowed.values())}
    assert {f.release.key for f in findings} == older


def test_the_check_takes_seconds_not_minutes(schema_tools: Path, tmp_path: Path) -> None:
    start = time.monotonic()
    check(committed(), tmp_path)
    assert time.monotonic() - start < budget(30)


def test_the_v2_types_come_with_the_newest_release() -> None:
    assert [r.key for r in v2_releases()] == [max(r.key for r in releases())] == [(13, 2)]


def test_the_committed_v2_resources_type_check(schema_tools: Path, tmp_path: Path) -> None:
    resources = committed("v2")
    assert sorted(resources) == sorted(committed("json"))
    findings = check_v2(resources, tmp_path)
    assert not findings, "\n".join(map(str, findings))


@pytest.mark.parametrize("profile_name", sorted(PROFILES))
def test_every_profile_type_checks_as_v2_in_rows_and_in_tabs(schema_tools: Path, tmp_path: Path,
                                                              profile_name: str) -> None:
    built = build_all(load_settings(ROOT / "thresholds.yaml"), ROOT / "dashboards", profile_name=profile_name)
    rows = v2_resources(built, profile(profile_name))
    tabs = {f"tabs-{name}": r for name, r in v2_resources(built, profile(profile_name), sections=TABS).items()}
    findings = check_v2({**rows, **tabs}, tmp_path)
    assert not findings, "\n".join(map(str, findings))


def test_a_wrong_v2_field_fails_naming_the_element_and_the_field(schema_tools: Path, tmp_path: Path) -> None:
    findings = check_v2({WRONG_V2.name: json.loads(WRONG_V2.read_text())}, tmp_path)
    assert all(f.dashboard == WRONG_V2.name and f.release.key == (13, 2) for f in findings)
    found = [f"{f.panel}: {f.message}" for f in findings]
    expected = [
        ("panel 2: An option no Grafana knows (panel-2): error TS2353: Object literal may only specify known "
         "properties, and '\"sideways\"' does not exist in type"),
        "panel 3: A query hidden as text (panel-3): error TS2322: Type 'string' is not assignable to type 'boolean'.",
        (": error TS2353: Object literal may only specify known properties, and '\"conditionalRendering\"' does "
         "not exist in type 'GridLayoutItemSpec'."),
        ": error TS2322: Type 'number' is not assignable to type 'VariableHide'.",
    ]
    for start in expected:
        assert any(m.startswith(start) for m in found), (start, found)
    assert len(findings) == len(expected)
