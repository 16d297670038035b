"""A recorded sysfs tree (bench/record_sysfs.py's text) rebuilt under a temporary folder, links included."""

from __future__ import annotations

from pathlib import Path

from support.paths import REFERENCE

SYSFS_TREES = REFERENCE / "sysfs"


def build(name: str, root: Path) -> Path:
    """Rebuild tests/fixtures/sysfs/<name>.txt under ``root``; returns ``root``."""
    for raw in (SYSFS_TREES / f"{name}.txt").read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        kind, _, rest = line.partition(" ")
        if kind == "L":
            path, _, target = rest.partition(" -> ")
            (root / target).mkdir(parents=True, exist_ok=True)
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).symlink_to(root / target)
        elif kind == "F":
            path, _, text = rest.partition(" = ")
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text + "\n", encoding="ascii")
        else:
            raise ValueError(f"{name}.txt: unknown entry {line!r}")
    return root
