"""Replacing several files as one: after a crash at any point (kill -9; a power cut, where the file system keeps
what fsync flushed), the next run finds either every old file or every new one.

A write goes in four steps, and may stop after any of them:

1. the journal, `<out>/.gpudash-journal`, is written in state "staging": each staged file and the file it
   will replace, the folders to make, the files to delete (each with the sha256 it must still hold);
2. the folders are made and every file is staged beside its target (`.<name>.<id>.gpudash.tmp`) and flushed
   to disk; a refused write or a full disk shows up here, before anything final has changed;
3. the journal is rewritten in state "commit": from here on the write has happened;
4. each staged file is renamed over its target, the deletions are made, and the journal is removed.

The journal is itself written to a temp file and renamed, so it is whole or absent. `recover(out)` runs before
every command that writes or checks `out`: a journal in state "staging" is rolled back (its staged files and the
folders it made removed), one in state "commit" rolled forward (the renames and deletions still to do are
done). A write holds an advisory lock (flock) on `out`, so two gpudash runs never interleave in one folder,
and a recovery never removes the staged files of a write still running.

A target that is a symbolic link is written through: the file is staged beside the file the link points to
and replaces that; the link stays. A replaced file keeps its permissions; a new one is 0644.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import secrets
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from gpudash.errors import OutputError

JOURNAL = ".gpudash-journal"
_SUFFIX = ".gpudash.tmp"
_ID = "[0-9a-f]{16}"
_JOURNAL_TEMP = re.compile(rf"{re.escape(JOURNAL)}\.{_ID}{re.escape(_SUFFIX)}")
_HELD: set[str] = set()  # the folders whose lock this process holds


def reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _staged_name(final: Path, write_id: str) -> str:
    return f".{final.name}.{write_id}{_SUFFIX}"


def _leftover(name: str) -> re.Pattern[str]:
    """A file staged for `name` by this naming. (Older gpudash staged as `.<name>.<8 random>.tmp`, which a
    person's `.<name>.original.tmp` matches too: those are left alone.)"""
    return re.compile(rf"\.{re.escape(name)}\.{_ID}{re.escape(_SUFFIX)}")


@dataclass
class _Journal:
    write_id: str
    made: list[Path]  # folders inside `out` to make, outermost first
    writes: list[tuple[Path, Path]]  # (staged, final)
    deletes: list[tuple[Path, str]]  # (file directly in `out`, the sha256 it must still hold to be deleted)
    state: str = "staging"

    def to_bytes(self, out: Path) -> bytes:
        def rel(path: Path) -> str:
            return os.path.relpath(path, out)

        return json.dumps({"state": self.state, "id": self.write_id, "made": [rel(p) for p in self.made],
                           "writes": [[rel(s), rel(f)] for s, f in self.writes],
                           "deletes": [[rel(p), digest] for p, digest in self.deletes]}, indent=1).encode("utf-8")


def _read_journal(out: Path) -> _Journal:
    path = out / JOURNAL
    try:
        data = json.loads(path.read_bytes())
        journal = _Journal(data["id"], [out / p for p in data["made"]],
                           [(out / s, out / f) for s, f in data["writes"]],
                           [(out / p, d) for p, d in data["deletes"]], data["state"])
        problem = _problem(out, journal)
    except OSError as exc:
        raise OutputError(f"{path}: cannot read the journal of an unfinished write: {reason(exc)}") from None
    except (ValueError, KeyError, TypeError):
        problem = "not JSON of the expected shape"
    if problem:
        raise OutputError(f"{path}: not a journal gpudash can finish ({problem}); check the files of {out}, "
                          "then delete it")
    return journal


def _problem(out: Path, journal: _Journal) -> str | None:
    """What makes a journal unsafe to act on (a path outside what gpudash stages, makes or deletes), or None."""
    if journal.state not in ("staging", "commit") or not re.fullmatch(_ID, journal.write_id):
        return "unknown state or id"
    for staged, final in journal.writes:
        if staged.name != _staged_name(final, journal.write_id) or staged.parent != final.parent:
            return f"{staged} is not a staged file of {final}"
    for folder in journal.made:
        if not folder.is_relative_to(out) or ".." in folder.relative_to(out).parts:
            return f"{folder} is outside {out}"
    for path, digest in journal.deletes:
        if path.parent != out or not re.fullmatch("[0-9a-f]{64}", str(digest)):
            return f"{path} is not a file of {out}"
    return None


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    """Hold gpudash's lock on `folder` (again within this process: at once); nothing to lock while it does not exist."""
    key = os.path.realpath(folder)
    fd = None if key in _HELD or not os.path.isdir(key) else _lock(key)
    if fd is None:
        yield
        return
    _HELD.add(key)
    try:
        yield
    finally:
        _HELD.discard(key)
        os.close(fd)


def _lock(folder: str) -> int | None:
    """An open descriptor of `folder` holding its lock, or None where it cannot be locked (the write says why)."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # waits for another gpudash run writing here
    except OSError:  # a file system without flock: written unlocked
        os.close(fd)
        return None
    return fd


def recover(out: Path) -> None:
    """Finish (roll forward) or undo (roll back) a write to `out` that stopped part-way; no-op when none did."""
    if not os.path.lexists(out / JOURNAL) and not _journal_temps(out):
        return
    with locked(out):
        _recover(out)


def _recover(out: Path) -> None:
    if os.path.lexists(out / JOURNAL):
        journal = _read_journal(out)
        try:
            (_roll_forward if journal.state == "commit" else _roll_back)(out, journal)
        except OSError as exc:
            raise OutputError(f"{out}: cannot finish an interrupted write: {reason(exc)}") from None
    for temp in _journal_temps(out):
        with contextlib.suppress(OSError):
            os.unlink(temp)


def _journal_temps(out: Path) -> list[Path]:
    try:
        return [out / name for name in os.listdir(out) if _JOURNAL_TEMP.fullmatch(name)]
    except OSError:  # no folder yet, or not one
        return []


def _roll_back(out: Path, journal: _Journal) -> None:
    for staged, _ in journal.writes:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(staged)
    for folder in reversed(journal.made):
        with contextlib.suppress(OSError):  # not empty: not ours alone
            os.rmdir(folder)
    os.unlink(out / JOURNAL)


def _roll_forward(out: Path, journal: _Journal) -> None:
    for staged, final in journal.writes:
        if os.path.lexists(staged):  # absent: already renamed
            os.replace(staged, final)
    for path, digest in journal.deletes:
        with contextlib.suppress(OSError):  # gone, changed or refused: it stays (and is no longer recorded)
            if stat.S_ISREG(path.lstat().st_mode) and hashlib.sha256(path.read_bytes()).hexdigest() == digest:
                os.unlink(path)
    for folder in sorted({final.parent for _, final in journal.writes}):
        _sync(folder)
    os.unlink(out / JOURNAL)
    _sync(out)


def _sync(folder: Path) -> None:
    """Flush a folder's entries (the renames in it) to disk."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_new(path: Path, data: bytes, mode: int) -> None:
    """Create `path` (it must not exist) with `data` and `mode`, flushed to disk."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)  # a full disk fails here, before any target is replaced
    except BaseException:
        os.close(fd)
        os.unlink(path)
        raise
    os.close(fd)


def _write_journal(out: Path, journal: _Journal) -> None:
    temp = out / f"{JOURNAL}.{journal.write_id}{_SUFFIX}"
    try:
        _write_new(temp, journal.to_bytes(out), 0o644)
        os.replace(temp, out / JOURNAL)
        _sync(out)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise OutputError(f"{out}: cannot write: {reason(exc)}") from exc


def make_folders(folder: Path) -> list[Path]:
    """Create `folder` and its missing parents; return the ones created, outermost first."""
    missing = missing_folders(folder)
    for created in missing:
        os.mkdir(created)
    return missing


def missing_folders(folder: Path) -> list[Path]:
    """The folders to create for `folder` to exist, outermost first; OutputError when a file is in the way."""
    missing = []
    while not folder.is_dir():
        if folder.exists() or folder.is_symlink():
            raise OutputError(f"{folder}: cannot write there: not a directory")
        missing.append(folder)
        folder = folder.parent
    return list(reversed(missing))


def _final(target: Path) -> Path:
    """Where the bytes for `target` go: the file a symbolic link points to, else `target` itself."""
    return Path(os.path.realpath(target)) if target.is_symlink() else target


def _mode(final: Path) -> int:
    try:
        info = final.stat()
    except OSError:
        return 0o644  # generated files are for everyone to read
    return stat.S_IMODE(info.st_mode) if stat.S_ISREG(info.st_mode) else 0o644


def replace_files(out: Path, files: Mapping[str, bytes], deletes: Mapping[str, str] | None = None) -> list[Path]:
    """Write `files` (paths relative to `out`) and delete `deletes` (names in `out` -> the sha256 each must still
    hold) as one; return the paths written. On an error before the commit nothing has changed (the staged files
    and new folders are removed) and OutputError names the path and the reason."""
    if not files and not deletes:
        return []
    try:
        outer = make_folders(out)
    except OSError as exc:
        raise OutputError(f"{out}: cannot write: {reason(exc)}") from exc
    try:
        with locked(out):
            _recover(out)
            return _replace(out, files, deletes or {})
    except BaseException:
        for folder in reversed(outer):
            with contextlib.suppress(OSError):  # not empty: the write was committed
                os.rmdir(folder)
        raise


def _replace(out: Path, files: Mapping[str, bytes], deletes: Mapping[str, str]) -> list[Path]:
    journal = _Journal(secrets.token_hex(8), [], [], [(out / name, digest) for name, digest in deletes.items()])
    for rel in files:
        target = out / rel
        journal.made += [f for f in missing_folders(target.parent) if f not in journal.made]
        final = _final(target)
        _remove_leftovers(final)
        journal.writes.append((final.parent / _staged_name(final, journal.write_id), final))
    journal.made.sort(key=lambda folder: len(folder.parts))
    _write_journal(out, journal)
    try:
        for folder in journal.made:
            try:
                os.mkdir(folder)
            except OSError as exc:
                raise OutputError(f"{folder}: cannot write: {reason(exc)}") from exc
        for rel, (staged, final) in zip(files, journal.writes, strict=True):
            try:
                _write_new(staged, files[rel], _mode(final))
            except OSError as exc:
                raise OutputError(f"{out / rel}: cannot write: {reason(exc)}") from exc
        try:  # the staged files' names on disk before the journal says they are there
            for folder in sorted({staged.parent for staged, _ in journal.writes} | {f.parent for f in journal.made}):
                _sync(folder)
        except OSError as exc:
            raise OutputError(f"{out}: cannot write: {reason(exc)}") from exc
        journal.state = "commit"
        _write_journal(out, journal)
    except BaseException:
        with contextlib.suppress(OSError):  # what is left, the next run's recover() removes
            _roll_back(out, journal)  # in this process; after a kill, the next run's recover() does the same
        raise
    try:
        _roll_forward(out, journal)
    except OSError as exc:  # a rename in a folder just staged into: the rare failure left after staging
        raise OutputError(f"{out}: cannot finish the write: {reason(exc)}; the next gpudash run that writes or "
                          f"checks {out} finishes it") from exc
    return [out / rel for rel in files]


def _remove_leftovers(final: Path) -> None:
    """Remove files staged for `final` by a run that ended without a journal naming them (the caller holds the lock)."""
    pattern = _leftover(final.name)
    with contextlib.suppress(OSError):
        for name in os.listdir(final.parent):
            if pattern.fullmatch(name):
                with contextlib.suppress(OSError):
                    os.unlink(final.parent / name)
