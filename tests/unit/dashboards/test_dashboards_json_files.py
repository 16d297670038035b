"""Reading dashboard JSON back: the one reader the sync and the check share."""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn

import pytest

from gpudash.check.queries import load_dashboards
from gpudash.errors import ConfigError
from gpudash.files import RECORD
from gpudash.panels.json_files import read_json_files
from gpudash.repository import DASHBOARDS_JSON_DIR
from gpudash.sync.local import load_local


def _named(path: Path, exc: Exception) -> NoReturn:
    raise LookupError(path.name, type(exc).__name__)


def test_a_folder_gives_its_json_files_sorted_and_not_the_record(tmp_path: Path) -> None:
    (tmp_path / "b.json").write_text('{"n": 2}')
    (tmp_path / "a.json").write_text('{"n": 1}')
    (tmp_path / RECORD).write_text('{"a.json": "0"}')
    (tmp_path / "notes.txt").write_text("not JSON")
    assert [(p.name, data) for p, data in read_json_files(tmp_path, _named)] == [("a.json", {"n": 1}),
                                                                                 ("b.json", {"n": 2})]
    assert [p.name for p, _ in read_json_files(tmp_path / "b.json", _named)] == ["b.json"]


@pytest.mark.parametrize(("name", "content", "error"), [
    ("bad.json", b"{", "JSONDecodeError"),
    ("latin1.json", b'{"t": "\xe9"}', "UnicodeDecodeError"),
    ("long.json", b'{"version": ' + b"9" * 5001 + b"}", "ValueError"),
    ("deep.json", b"[" * 100_000 + b"]" * 100_000, "RecursionError"),
])
def test_an_unreadable_file_goes_to_the_callers_wording(tmp_path: Path, name: str, content: bytes,
                                                         error: str) -> None:
    (tmp_path / name).write_bytes(content)
    with pytest.raises(LookupError) as caught:
        list(read_json_files(tmp_path, _named))
    assert caught.value.args == (name, error)
    with pytest.raises(LookupError) as caught:
        list(read_json_files(tmp_path / "missing.json", _named))
    assert caught.value.args == ("missing.json", "FileNotFoundError")


def test_the_sync_and_the_check_read_the_same_committed_dashboards(root: Path) -> None:
    folder = root / DASHBOARDS_JSON_DIR
    assert (folder / RECORD).is_file()
    assert [d["uid"] for d in load_local(folder)] == [d["uid"] for d, _ in load_dashboards([folder])]


def test_a_folder_with_only_the_record_has_no_dashboards(tmp_path: Path) -> None:
    (tmp_path / RECORD).write_text("{}")
    with pytest.raises(ConfigError, match=r"no dashboards \(\*\.json\) found"):
        load_local(tmp_path)
    with pytest.raises(ConfigError, match=r"no dashboard JSON files \(\*\.json\)"):
        load_dashboards([tmp_path])
