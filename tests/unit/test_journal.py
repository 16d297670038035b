"""A multi-file write killed at any step is, once the next run has recovered, all old or all new; links are written
through; a journal that names files outside what gpudash writes is refused."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpudash.errors import OutputError
from gpudash.files import RECORD, record_bytes, stale_owned, write_owned, write_tree
from gpudash.journal import JOURNAL, recover

# The calls that change the disk; a process killed before one of them makes none of them again.
MUTATIONS = ("open", "write", "fchmod", "fsync", "replace", "unlink", "rmdir", "mkdir")


class Killed(BaseException):
    """The process died here (kill -9): no handler, no clean-up runs after it."""


def tree(folder: Path) -> dict[str, bytes | None]:
    """Every file (bytes) and folder (None) under `folder`, hidden ones included."""
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else None for p in sorted(folder.rglob("*"))}


def kill_at(monkeypatch: pytest.MonkeyPatch, step: int) -> None:
    """From the `step`-th call that changes the disk on, every such call raises Killed."""
    calls: list[str] = []

    def mortal(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            if len(calls) >= step:
                raise Killed(f"killed before call {step} ({name})")
            return real(*args, **kwargs)

        return call

    for name in MUTATIONS:
        monkeypatch.setattr(os, name, mortal(name, getattr(os, name)))


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def dashboards_before(out: Path) -> None:
    out.mkdir()
    old = {"a.json": b"old a\n", "c.json": b"old c\n", "gone.json": b"old gone\n"}
    for name, data in old.items():
        (out / name).write_bytes(data)
    (out / RECORD).write_bytes(record_bytes({name: digest(data) for name, data in old.items()}))


NEW_DASHBOARDS = {"a.json": b"new a\n", "c.json": b"new c\n", "n.json": b"new n\n"}


def rules_before(out: Path) -> None:
    (out / "sub").mkdir(parents=True)
    (out / "one.yml").write_bytes(b"old one\n")
    (out / "sub" / "two.yml").write_bytes(b"old two\n")


NEW_RULES = {"one.yml": b"new one\n", "sub/two.yml": b"new two\n", "made/deep/three.yml": b"new three\n"}

CASES = [
    pytest.param(dashboards_before, lambda out: write_owned(out, NEW_DASHBOARDS, "*.json"), id="dashboards"),
    pytest.param(rules_before, lambda out: write_tree(out, NEW_RULES), id="rules"),
]


@pytest.mark.parametrize(("before", "write"), CASES)
def test_a_kill_before_any_step_leaves_all_old_or_all_new_once_recovered(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, before: Callable[[Path], None],
        write: Callable[[Path], object]) -> None:
    reference = tmp_path / "reference"
    before(reference)
    old = tree(reference)
    write(reference)
    new = tree(reference)
    assert old != new
    seen = []
    for step in range(1, 200):
        out = tmp_path / f"run-{step}"
        before(out)
        with monkeypatch.context() as patch:
            kill_at(patch, step)
            try:
                write(out)
            except Killed:
                pass
            else:
                break
        recover(out)
        after = tree(out)
        assert after in (old, new), f"killed before step {step}: {sorted(after)}"
        seen.append("old" if after == old else "new")
    else:
        pytest.fail("the write never finished")
    assert tree(out) == new
    # Every step was a place to die at: the early ones roll back, the late ones forward.
    assert seen[0] == "old" and seen[-1] == "new" and seen == sorted(seen, key=["old", "new"].index)


def test_the_next_write_or_check_finishes_an_interrupted_write_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "json"
    dashboards_before(out)
    for step in range(1, 200):  # the first step after which the write is committed
        with monkeypatch.context() as patch:
            kill_at(patch, step)
            with pytest.raises(Killed):
                write_owned(out, NEW_DASHBOARDS, "*.json")
        if (out / JOURNAL).exists() and json.loads((out / JOURNAL).read_text())["state"] == "commit":
            break
        recover(out)
    assert (out / "a.json").read_bytes() == b"old a\n"  # committed, not yet renamed
    assert stale_owned(out, NEW_DASHBOARDS, "*.json") == []  # the check finished it, then found it current
    assert not (out / JOURNAL).exists() and not (out / "gone.json").exists()
    assert sorted(p.name for p in out.iterdir()) == [RECORD, "a.json", "c.json", "n.json"]


def test_a_link_is_written_through_and_stays_a_link(tmp_path: Path) -> None:
    real = tmp_path / "etc" / "alertmanager.yml"
    real.parent.mkdir()
    real.write_text("old\n")
    real.chmod(0o640)
    out = tmp_path / "generated"
    out.mkdir()
    (out / "alertmanager.yml").symlink_to(real)
    assert write_tree(out, {"alertmanager.yml": b"new\n"}) == [out / "alertmanager.yml"]
    assert (out / "alertmanager.yml").is_symlink() and real.read_text() == "new\n"
    assert oct(real.stat().st_mode & 0o777) == "0o640"  # a replaced file keeps its permissions
    assert sorted(p.name for p in real.parent.iterdir()) == ["alertmanager.yml"]  # no staged file left


def test_files_staged_by_a_run_without_a_journal_are_removed_and_no_others(tmp_path: Path) -> None:
    leftovers = [".one.yml.0123456789abcdef.gpudash.tmp", f"{JOURNAL}.0123456789abcdef.gpudash.tmp"]
    theirs = [".one.yml.bak", ".one.yml.original.tmp", ".other.yml.0123456789abcdef.gpudash.tmp",
              "one.yml.0123456789abcdef.gpudash.tmp"]
    for name in leftovers + theirs:
        (tmp_path / name).write_text("x")
    write_tree(tmp_path, {"one.yml": b"1\n"})
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["one.yml", *theirs])


@pytest.mark.parametrize("journal", [
    {"state": "commit", "id": "0123456789abcdef", "made": [], "writes": [], "deletes": [["../victim", "0" * 64]]},
    {"state": "staging", "id": "0123456789abcdef", "made": ["../.."], "writes": [], "deletes": []},
    {"state": "commit", "id": "0123456789abcdef", "made": [], "writes": [["../victim", "x"]], "deletes": []},
    "not json",
])
def test_a_journal_gpudash_did_not_write_is_refused_and_nothing_touched(tmp_path: Path, journal: object) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "victim").write_text("precious")
    (out / JOURNAL).write_text(journal if isinstance(journal, str) else json.dumps(journal))
    before = tree(tmp_path)
    with pytest.raises(OutputError, match=rf"^{out / JOURNAL}: not a journal gpudash can finish \(.*\); check the "
                                          rf"files of {out}, then delete it$"):
        write_tree(out, {"x.yml": b"x"})
    assert tree(tmp_path) == before
