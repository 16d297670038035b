"""Generated files are written all or nothing, and a clean-up deletes only files gpudash provably wrote."""

from __future__ import annotations

import errno
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from support.paths import ROOT
from support.staging import fail_staging, oserror

from gpudash.cli import main
from gpudash.errors import OutputError
from gpudash.files import RECORD, write_owned, write_text_tree, write_tree


def tree(folder: Path) -> dict[str, bytes | None]:
    """Every file (bytes) and folder (None) under `folder`, hidden ones included."""
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else None for p in sorted(folder.rglob("*"))}


def test_a_failure_staging_the_second_file_leaves_the_folder_exactly_as_before(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "one.yml").write_text("old\n")
    before = tree(tmp_path)
    fail_staging(monkeypatch, "two.yml", oserror(errno.ENOSPC))
    with pytest.raises(OutputError) as info:
        write_text_tree(tmp_path, {"a/one.yml": "new\n", "b/two.yml": "new\n"}, "old")
    assert info.value.format_message() == f"{tmp_path / 'b' / 'two.yml'}: cannot write: No space left on device"
    assert tree(tmp_path) == before  # no half-update, no temp file, no journal, no folder b/


@pytest.mark.parametrize("error", [errno.EACCES, errno.EROFS])
def test_a_folder_that_cannot_be_written_is_one_error_and_nothing_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: int) -> None:
    # Root ignores chmod, so "unwritable" is simulated where the operating system would refuse.
    fail_staging(monkeypatch, None, oserror(error))
    with pytest.raises(OutputError, match=rf"^{tmp_path / 'out'}: cannot write: {os.strerror(error)}$"):
        write_tree(tmp_path / "out", {"one.yml": b"1\n", "two.yml": b"2\n"})
    assert tree(tmp_path) == {}


def test_a_rename_refused_after_staging_is_finished_by_the_next_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "one.yml").write_text("old\n")
    real = os.replace

    def refuse_one(source: Any, target: Any) -> None:
        if Path(source).name.startswith(".one.yml."):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
        real(source, target)

    monkeypatch.setattr(os, "replace", refuse_one)
    with pytest.raises(OutputError, match=rf"^{tmp_path}: cannot finish the write: Permission denied; the next "
                                          r"gpudash run that writes or checks .* finishes it$"):
        write_tree(tmp_path, {"one.yml": b"new\n", "two.yml": b"new\n"})
    monkeypatch.undo()
    assert write_tree(tmp_path, {"one.yml": b"new\n", "two.yml": b"new\n"}) == []  # finished first: nothing left
    assert tree(tmp_path) == {"one.yml": b"new\n", "two.yml": b"new\n"}


def test_the_command_line_shows_one_line_and_exits_2(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    monkeypatch.chdir(ROOT)
    fail_staging(monkeypatch, None, oserror(errno.EROFS))
    out = tmp_path / "dash"
    with pytest.raises(SystemExit) as info:
        main(["dashboards", "--out", str(out)])
    assert info.value.code == 2
    captured = capsys.readouterr()
    assert captured.err == f"gpudash: {out}: cannot write: Read-only file system\n"
    assert not out.exists()


def test_an_output_path_under_a_file_is_one_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("mine\n")
    with pytest.raises(OutputError, match=r"file: cannot write there: not a directory$"):
        write_tree(tmp_path / "file" / "sub", {"one.yml": b"1\n"})
    assert tree(tmp_path) == {"file": b"mine\n"}


def test_missing_folders_are_created_and_files_readable_by_everyone(tmp_path: Path) -> None:
    written = write_tree(tmp_path / "new" / "deep", {"x/one.yml": b"1\n", "two.yml": b"2\n"})
    assert written == [tmp_path / "new" / "deep" / "two.yml", tmp_path / "new" / "deep" / "x" / "one.yml"]
    assert {oct(p.stat().st_mode & 0o777) for p in written} == {"0o644"}
    assert write_tree(tmp_path / "new" / "deep", {"x/one.yml": b"1\n", "two.yml": b"2\n"}) == []


def test_a_path_outside_the_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="inside the output folder"):
        write_tree(tmp_path / "out", {"../escaped.yml": b"x"})
    assert tree(tmp_path) == {}


def record(folder: Path, entries: dict[str, bytes]) -> None:
    digests = {name: hashlib.sha256(data).hexdigest() for name, data in entries.items()}
    (folder / RECORD).write_text(json.dumps(digests))


def test_a_link_is_never_deleted_even_when_its_target_matches_the_record(tmp_path: Path) -> None:
    (tmp_path / "precious").write_bytes(b"data")
    out = tmp_path / "out"
    out.mkdir()
    (out / "link.json").symlink_to(tmp_path / "precious")
    record(out, {"link.json": b"data"})
    outcome = write_owned(out, {"new.json": b"{}\n"}, "*.json")
    assert outcome.removed == [] and outcome.kept == [(out / "link.json", "not written by gpudash")]
    assert (out / "link.json").is_symlink() and (tmp_path / "precious").read_bytes() == b"data"


def test_a_record_naming_files_outside_the_folder_deletes_nothing_there(tmp_path: Path) -> None:
    (tmp_path / "victim.json").write_bytes(b"data")
    out = tmp_path / "out"
    out.mkdir()
    record(out, {"../victim.json": b"data", str(tmp_path / "victim.json"): b"data"})
    write_owned(out, {"new.json": b"{}\n"}, "*.json")
    assert (tmp_path / "victim.json").read_bytes() == b"data"
    assert json.loads((out / RECORD).read_text()).keys() == {"new.json"}


def test_an_unreadable_record_is_treated_as_none(tmp_path: Path) -> None:
    (tmp_path / "old.json").write_bytes(b"{}\n")
    (tmp_path / RECORD).write_text("not json")
    outcome = write_owned(tmp_path, {"new.json": b"{}\n"}, "*.json")
    assert not outcome.recorded and outcome.removed == [] and (tmp_path / "old.json").exists()


def test_previews_record_theirs_keep_the_others_and_never_replace_someone_elses(tmp_path: Path) -> None:
    from gpudash.preview.previewer import write_previews

    out = tmp_path / "previews"
    write_previews(out, {"gpudash-fleet.png": b"fleet", "gpudash-node.png": b"node"})
    (out / "team-slide.png").write_bytes(b"theirs")
    # One dashboard drawn again: the other picture stays and stays recorded; the foreign file is not touched.
    assert write_previews(out, {"gpudash-node.png": b"node v2"}) == [out / "gpudash-node.png"]
    assert (out / "gpudash-fleet.png").read_bytes() == b"fleet"
    assert (out / "gpudash-node.png").read_bytes() == b"node v2"
    assert json.loads((out / RECORD).read_text()) == {"gpudash-fleet.png": hashlib.sha256(b"fleet").hexdigest(),
                                                      "gpudash-node.png": hashlib.sha256(b"node v2").hexdigest()}
    before = tree(out)
    # A picture named like someone else's file: refused, nothing written, theirs intact.
    with pytest.raises(OutputError, match=r"team-slide\.png: would be overwritten but was not written by gpudash"):
        write_previews(out, {"gpudash-node.png": b"node v3", "team-slide.png": b"ours"})
    assert tree(out) == before
