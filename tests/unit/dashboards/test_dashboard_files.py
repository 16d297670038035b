"""Writing the dashboards: identical bytes run after run, all or nothing, the record of what gpudash wrote,
someone else's files beside ours kept; and loading the definitions."""

from __future__ import annotations

import errno
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from support.paths import ROOT
from support.staging import fail_staging, oserror

from gpudash.config.loading import load_settings
from gpudash.errors import ConfigError, OutputError, StaleOutputError
from gpudash.files import RECORD, record_bytes, sha256
from gpudash.panels.build import build_all, check_all, render, write_all


@pytest.fixture(scope="module")
def built() -> dict[str, dict[str, Any]]:
    return build_all(load_settings(ROOT / "thresholds.yaml"), ROOT / "dashboards")


def test_two_runs_give_identical_bytes_and_the_second_writes_nothing(tmp_path: Path) -> None:
    settings = load_settings(ROOT / "thresholds.yaml")
    first = build_all(settings, ROOT / "dashboards")
    outcome = write_all(first, tmp_path)
    assert [p.name for p in outcome.written] == ["gpudash-fabric.json", "gpudash-fleet.json", "gpudash-health.json",
                                                 "gpudash-job.json", "gpudash-node.json", RECORD]
    snapshot = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    second = build_all(settings, ROOT / "dashboards")
    assert {name: render(d) for name, d in second.items()} == {k: v for k, v in snapshot.items() if k != RECORD}
    again = write_all(second, tmp_path)
    assert (again.written, again.removed, again.kept) == ([], [], [])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(snapshot), "a temp file was left behind"


def test_the_record_is_sorted_json_of_sha256_with_a_newline(tmp_path: Path,
                                                            built: dict[str, dict[str, Any]]) -> None:
    write_all(built, tmp_path)
    expected = {name: hashlib.sha256(render(d)).hexdigest() for name, d in sorted(built.items())}
    assert (tmp_path / RECORD).read_bytes() == (json.dumps(expected, indent=2) + "\n").encode()
    committed = ROOT / "dashboards" / "json"
    assert json.loads((committed / RECORD).read_text()) == \
        {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in committed.glob("*.json")}


def test_a_file_gpudash_did_not_write_is_kept_and_ignored_by_check(
        tmp_path: Path, built: dict[str, dict[str, Any]]) -> None:
    write_all(built, tmp_path)
    (tmp_path / "package.json").write_text("{}\n")
    check_all(built, tmp_path)  # a foreign file is not gpudash's business
    outcome = write_all(built, tmp_path)
    assert (tmp_path / "package.json").read_text() == "{}\n"
    assert outcome.removed == [] and outcome.kept == [(tmp_path / "package.json", "not written by gpudash")]
    assert "package.json" not in (tmp_path / RECORD).read_text()


def test_a_renamed_definition_leaves_no_old_json_behind(tmp_path: Path, built: dict[str, dict[str, Any]]) -> None:
    write_all({name: built[name] for name in ("gpudash-fleet.json", "gpudash-node.json")}, tmp_path)
    fleet_only = {"gpudash-fleet.json": built["gpudash-fleet.json"]}
    with pytest.raises(StaleOutputError, match=r"gpudash-node\.json \(no definition\)"):
        check_all(fleet_only, tmp_path)
    outcome = write_all(fleet_only, tmp_path)
    assert outcome.removed == [tmp_path / "gpudash-node.json"] and not (tmp_path / "gpudash-node.json").exists()
    assert json.loads((tmp_path / RECORD).read_text()).keys() == {"gpudash-fleet.json"}
    check_all(fleet_only, tmp_path)


def test_a_recorded_file_edited_by_hand_is_kept(tmp_path: Path, built: dict[str, dict[str, Any]]) -> None:
    write_all(built, tmp_path)
    (tmp_path / "gpudash-node.json").write_text('{"edited": true}\n')
    outcome = write_all({"gpudash-fleet.json": built["gpudash-fleet.json"]}, tmp_path)
    assert (tmp_path / "gpudash-node.json").read_text() == '{"edited": true}\n'
    assert outcome.kept == [(tmp_path / "gpudash-node.json", "changed since gpudash wrote it")]
    # Still recorded with the bytes gpudash wrote: put back as written, it is removed on the next run.
    assert json.loads((tmp_path / RECORD).read_text())["gpudash-node.json"] == \
        hashlib.sha256(render(built["gpudash-node.json"])).hexdigest()


def test_a_folder_without_record_loses_nothing(tmp_path: Path, built: dict[str, dict[str, Any]]) -> None:
    (tmp_path / "gpudash-node.json").write_text("{}\n")  # an install from before the record, or someone else's
    (tmp_path / "old.json").write_text("{}\n")
    with pytest.raises(StaleOutputError) as info:
        check_all(built, tmp_path)
    assert "old.json" not in info.value.format_message() and RECORD in info.value.format_message()
    with pytest.raises(OutputError, match=r"gpudash-node\.json: would be overwritten but was not written by gpudash"):
        write_all(built, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpudash-node.json", "old.json"]  # nothing written
    assert (tmp_path / "gpudash-node.json").read_text() == "{}\n"
    (tmp_path / "gpudash-node.json").unlink()  # what the message asks: move it away, then run again
    outcome = write_all(built, tmp_path)
    assert not outcome.recorded and outcome.removed == []
    assert (tmp_path / "old.json").read_text() == "{}\n"
    assert (tmp_path / "gpudash-node.json").read_bytes() == render(built["gpudash-node.json"])
    assert json.loads((tmp_path / RECORD).read_text()).keys() == set(built)


def test_a_same_named_file_of_someone_else_beside_ours_is_never_replaced(
        tmp_path: Path, built: dict[str, dict[str, Any]]) -> None:
    write_all(built, tmp_path)  # ours, recorded
    theirs = tmp_path / "their-team.json"
    theirs.write_text('{"uid": "their-team"}\n')
    record = json.loads((tmp_path / RECORD).read_text())
    bigger = {**built, "their-team.json": {**built["gpudash-node.json"], "uid": "their-team"}}
    with pytest.raises(OutputError, match=r"their-team\.json: would be overwritten but was not written by gpudash"):
        write_all(bigger, tmp_path)
    assert theirs.read_text() == '{"uid": "their-team"}\n' and json.loads((tmp_path / RECORD).read_text()) == record
    (tmp_path / "gpudash-node.json").write_text("{}\n")  # ours, edited by hand: regenerated, as before
    write_all(built, tmp_path)
    assert (tmp_path / "gpudash-node.json").read_bytes() == render(built["gpudash-node.json"])


def test_check_names_stale_files_and_a_stale_record(tmp_path: Path, built: dict[str, dict[str, Any]]) -> None:
    write_all(built, tmp_path)
    check_all(built, tmp_path)
    (tmp_path / "gpudash-node.json").write_text("{}\n")
    with pytest.raises(StaleOutputError) as info:
        check_all(built, tmp_path)
    message = info.value.format_message()
    assert "gpudash-node.json" in message and "gpudash-fleet.json" not in message and RECORD not in message
    write_all(built, tmp_path)
    (tmp_path / RECORD).write_text("{}\n")
    with pytest.raises(StaleOutputError, match=re.escape(RECORD)):
        check_all(built, tmp_path)
    (tmp_path / RECORD).unlink()
    with pytest.raises(StaleOutputError, match=re.escape(RECORD)):
        check_all(built, tmp_path)


def test_a_failure_staging_the_second_dashboard_leaves_the_folder_as_it_was(
        tmp_path: Path, built: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    for name in built:
        (tmp_path / name).write_text("{}\n")
    (tmp_path / RECORD).write_bytes(record_bytes({name: sha256(b"{}\n") for name in built}))  # gpudash's, edited
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    fail_staging(monkeypatch, "gpudash-health.json", oserror(errno.ENOSPC))
    with pytest.raises(OutputError, match=r"gpudash-health\.json: cannot write: No space left on device$"):
        write_all(built, tmp_path)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_a_bad_uid_cannot_name_a_file_outside_the_folder(tmp_path: Path) -> None:
    definitions = tmp_path / "defs"
    definitions.mkdir()
    (definitions / "evil.py").write_text((ROOT / "dashboards" / "fleet.py").read_text()
                                         .replace("UID = FLEET_UID", 'UID = "../escaped"'))
    with pytest.raises(ConfigError, match=r"UID '\.\./escaped'"):
        build_all(load_settings(ROOT / "thresholds.yaml"), definitions)


def test_a_definition_importing_a_renamed_module_says_where_it_went(tmp_path: Path) -> None:
    definitions = tmp_path / "defs"
    definitions.mkdir()
    source = (ROOT / "dashboards" / "node.py").read_text()
    old = (source.replace("from gpudash.panels.visualizations import", "from gpudash.dashboards.panels import")
           .replace("from gpudash.panels.build import", "from gpudash.dashboards.build import")
           .replace("    PanelGrid,\n", "    Layout,\n"))
    assert old != source
    (definitions / "node.py").write_text(old)
    with pytest.raises(ConfigError) as info:
        build_all(load_settings(ROOT / "thresholds.yaml"), definitions)
    message = info.value.format_message()
    assert message.startswith(f"{definitions / 'node.py'}: imports what gpudash has renamed (")
    assert "gpudash.dashboards.build is now gpudash.panels.build" in message
    assert "gpudash.dashboards.panels is now gpudash.panels.visualizations" in message
    assert "Layout is now PanelGrid" in message


def test_a_definition_with_a_broken_import_of_its_own_fails_as_python_does(tmp_path: Path) -> None:
    definitions = tmp_path / "defs"
    definitions.mkdir()
    (definitions / "mine.py").write_text("import no_such_module_here\nUID = 'mine'\n")
    with pytest.raises(ModuleNotFoundError, match="no_such_module_here"):
        build_all(load_settings(ROOT / "thresholds.yaml"), definitions)
