"""The only door to git: committed dashboard JSON at a revision, read with `git show` and `git ls-tree`.

Both `gpudash diff --git` and `gpudash preview --compare` read dashboards of another revision through here,
so they agree on what "the dashboards at REF" are and say the same line when REF or git is wrong.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path, PurePosixPath
from typing import Any

from gpudash.errors import ConfigError, UsageError


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    binary = shutil.which("git")
    if binary is None:
        raise UsageError("git not found on PATH (needed to read dashboards at a revision)")
    return subprocess.run([binary, *args], cwd=cwd, capture_output=True, timeout=60)


def _git(args: list[str], cwd: Path) -> str:
    done = _run(args, cwd)
    if done.returncode != 0:
        reason = (done.stderr.decode("utf-8", "replace").strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise UsageError(f"git {' '.join(args)} in {cwd}: {reason}")
    return done.stdout.decode("utf-8")


def repository_root(cwd: Path) -> Path:
    return Path(_git(["rev-parse", "--show-toplevel"], cwd).strip())


def resolve(ref: str, cwd: Path) -> str:
    """The commit `ref` names (a one-line error when it names none)."""
    if ref.startswith("-"):
        raise UsageError(f"git revision {ref!r}: a revision cannot start with '-'")
    try:
        return _git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], cwd).strip()
    except UsageError:
        raise UsageError(f"git revision {ref!r}: no such commit in {cwd}") from None


def json_files_at(commit: str, directory: Path, cwd: Path) -> list[PurePosixPath]:
    """The *.json files directly inside `directory` (relative to the repository root) at `commit`."""
    tree = f"{commit}:{directory.as_posix()}"
    listed = _git(["ls-tree", "--name-only", tree], cwd) if _run(["cat-file", "-e", tree], cwd).returncode == 0 else ""
    return [PurePosixPath(directory.as_posix()) / name for name in sorted(listed.splitlines())
            if name.endswith(".json")]


def dashboard_at(commit: str, path: PurePosixPath, cwd: Path) -> dict[str, Any] | None:
    """The dashboard JSON of `path` at `commit`; None when the file did not exist there."""
    done = _run(["show", f"{commit}:{path.as_posix()}"], cwd)
    if done.returncode != 0:
        return None
    try:
        data = json.loads(done.stdout.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path} at {commit[:12]}: not a readable dashboard JSON file: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} at {commit[:12]}: not a Grafana dashboard (not a JSON object)")
    return data


def dashboards_at(commit: str, directory: Path, cwd: Path) -> dict[str, dict[str, Any]]:
    """File name -> dashboard for every *.json directly inside `directory` at `commit`."""
    found: dict[str, dict[str, Any]] = {}
    for path in json_files_at(commit, directory, cwd):
        data = dashboard_at(commit, path, cwd)
        if data is not None:
            found[path.name] = data
    return found
