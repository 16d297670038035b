"""Writing generated files all or nothing, and a record of what gpudash wrote so a clean-up deletes only that.

Every generator (dashboards, rules, provisioning YAML) writes through `write_tree`: each changed file is
first staged as a temp file beside its target, which is where permission, read-only and disk-full errors
surface; only when every file is staged are they renamed into place. A folder that gpudash cleans up
(the dashboard JSON) also holds RECORD, {file name: sha256 of the bytes written}: a file is deleted only
when it is recorded and still holds exactly those bytes, so files gpudash did not write are never lost.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from gpudash.errors import OutputError

RECORD = ".gpudash-files"  # not *.json: readers of the folder glob *.json


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _current(path: Path) -> bytes | None:
    """The bytes at `path`, or None when there is no file there."""
    try:
        return path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise OutputError(f"{path}: cannot read: {_reason(exc)}") from exc


def _make_folders(folder: Path) -> list[Path]:
    """Create `folder` and its missing parents; return the ones created, outermost first."""
    missing = []
    while not folder.is_dir():
        if folder.exists() or folder.is_symlink():
            raise OutputError(f"{folder}: cannot write there: not a directory")
        missing.append(folder)
        folder = folder.parent
    for created in reversed(missing):
        created.mkdir()
    return list(reversed(missing))


def _stage(target: Path, data: bytes) -> Path:
    """Write `data` to a temp file in the target's folder and flush it to disk; return the temp path."""
    handle, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    temp = Path(name)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fchmod(stream.fileno(), 0o644)  # mkstemp creates 0600; generated files are for everyone to read
            os.fsync(stream.fileno())  # a full disk fails here, before any target is replaced
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return temp


def _changed(out: Path, files: Mapping[str, bytes]) -> dict[str, bytes]:
    """The files (by path relative to `out`, sorted) whose bytes differ from what `out` holds now."""
    return {rel: files[rel] for rel in sorted(files) if _current(out / rel) != files[rel]}


def write_tree(out: Path, files: Mapping[str, bytes]) -> list[Path]:
    """Write the files (paths relative to `out`) that differ from what is there; return the paths written.

    All or nothing: on any error the staged temp files and the folders made for them are removed and
    OutputError names the path and the reason; nothing under `out` has changed.
    """
    for rel in files:
        if PurePosixPath(rel).is_absolute() or ".." in PurePosixPath(rel).parts:
            raise ValueError(f"{rel!r}: generated files stay inside the output folder")
    changed = _changed(out, files)
    made: list[Path] = []
    staged: list[tuple[Path, Path]] = []
    try:
        for rel, data in changed.items():
            target = out / rel
            try:
                made += _make_folders(target.parent)
                staged.append((_stage(target, data), target))
            except OSError as exc:
                raise OutputError(f"{target}: cannot write: {_reason(exc)}") from exc
        for done, (temp, target) in enumerate(staged):
            try:
                os.replace(temp, target)
            except OSError as exc:
                # A rename in one folder after its file was staged there: the rare failure left after staging.
                already = f" ({done} of {len(staged)} files already replaced)" if done else ""
                raise OutputError(f"{target}: cannot write: {_reason(exc)}{already}") from exc
    except BaseException:
        for temp, _ in staged:
            temp.unlink(missing_ok=True)
        for folder in reversed(made):
            with contextlib.suppress(OSError):  # not empty: a file was already replaced into it
                folder.rmdir()
        raise
    return [target for _, target in staged]


def write_text_tree(out: Path, files: Mapping[str, str]) -> list[Path]:
    """`write_tree` for text files (UTF-8): the generated rules, configs and provisioning YAML."""
    return write_tree(out, {relative: text.encode("utf-8") for relative, text in files.items()})


def read_record(folder: Path) -> dict[str, str] | None:
    """The record of files gpudash wrote in `folder`; None when there is none or it cannot be trusted."""
    try:
        data = json.loads((folder / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        return None
    return data


def record_bytes(record: Mapping[str, str]) -> bytes:
    return (json.dumps(dict(record), indent=2, sort_keys=True) + "\n").encode("utf-8")


@dataclass(frozen=True)
class Cleanup:
    """What a run does with the files in a folder that no current definition produces any more."""

    recorded: bool  # whether the folder had a usable record
    remove: dict[str, str] = field(default_factory=dict)  # name -> recorded sha256: gpudash's and unchanged
    kept: list[tuple[Path, str]] = field(default_factory=list)  # (path, why it stays)
    record: dict[str, str] = field(default_factory=dict)  # the record once the run is done
    foreign: list[Path] = field(default_factory=list)  # files a write would replace that gpudash never recorded


def _why_kept(path: Path, recorded: str | None) -> str | None:
    """Why `path` must stay, or None when it is gpudash's to delete."""
    if recorded is None:
        return "not written by gpudash"
    try:
        info = path.lstat()
        if not stat.S_ISREG(info.st_mode):
            return "not written by gpudash"  # gpudash writes regular files, never links
        same = sha256(path.read_bytes()) == recorded
    except OSError as exc:
        return f"cannot read it: {_reason(exc)}"
    return None if same else "changed since gpudash wrote it"


def plan_cleanup(out: Path, files: Mapping[str, bytes], pattern: str) -> Cleanup:
    """Decide which files matching `pattern` in `out`, and not in `files`, are gpudash's to delete, and which
    files of `files` would replace one gpudash did not write (same name, other bytes, not in the record)."""
    previous = read_record(out)
    plan = Cleanup(previous is not None, record={name: sha256(data) for name, data in files.items()})
    plan.foreign.extend(out / name for name, data in sorted(files.items())
                        if name not in (previous or {}) and _current(out / name) not in (None, data))
    for path in sorted(out.glob(pattern) if out.is_dir() else []):
        if path.name in files:
            continue
        recorded = (previous or {}).get(path.name)
        why = _why_kept(path, recorded)
        if why is None and recorded is not None:
            plan.remove[path.name] = recorded
            continue
        plan.kept.append((path, str(why)))
        if recorded is not None:
            plan.record[path.name] = recorded  # still gpudash's file, edited: remembered, not deleted
    return plan


@dataclass(frozen=True)
class Outcome:
    written: list[Path]
    removed: list[Path]
    kept: list[tuple[Path, str]]
    recorded: bool  # whether the folder had a usable record before this run


def write_owned(out: Path, files: Mapping[str, bytes], pattern: str) -> Outcome:
    """Write `files` all or nothing, delete the recorded and unchanged files that `files` no longer holds,
    then write the record. OutputError, nothing written, when a write would replace a file gpudash did not
    write (a same-named file that is not in the record)."""
    plan = plan_cleanup(out, files, pattern)
    if plan.foreign:
        more = f" (and {len(plan.foreign) - 1} more)" if len(plan.foreign) > 1 else ""
        raise OutputError(f"{plan.foreign[0]}{more}: would be overwritten but was not written by gpudash (not in "
                          f"{out / RECORD}); move or delete it, or write elsewhere with --out; nothing written")
    written = write_tree(out, files)
    removed, kept, record = [], list(plan.kept), dict(plan.record)
    for name, digest in plan.remove.items():
        try:
            (out / name).unlink()
            removed.append(out / name)
        except FileNotFoundError:
            pass
        except OSError as exc:
            kept.append((out / name, f"cannot remove it: {_reason(exc)}"))
            record[name] = digest
    written += write_tree(out, {RECORD: record_bytes(record)})
    return Outcome(written, removed, kept, plan.recorded)


def stale_owned(out: Path, files: Mapping[str, bytes], pattern: str) -> list[str]:
    """What `write_owned` would change in `out`: files to write or delete and the record; [] when current."""
    stale = [str(out / name) for name in _changed(out, files)]
    plan = plan_cleanup(out, files, pattern)
    stale += [f"{out / name} (no definition)" for name in plan.remove]
    if _current(out / RECORD) != record_bytes(plan.record):
        stale.append(f"{out / RECORD} (record of the files gpudash wrote)")
    return stale
