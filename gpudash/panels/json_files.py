"""Reading generated dashboard JSON back (dashboards/json): which files are dashboards, and their JSON.

The sync and the live check both read dashboards through here. Each words its own errors, because each
accepts something different (the check also takes a dashboard as Grafana's API exports it).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

from gpudash.journal import recover


def read_json_files(path: Path, unreadable: Callable[[Path, Exception], NoReturn]) -> Iterator[tuple[Path, Any]]:
    """(file, parsed JSON) of `path`, or of every *.json in it when it is a folder, sorted by file name.

    Files are read one at a time, as the caller asks; for one that cannot be read, is not UTF-8 or is not
    JSON, `unreadable(file, error)` raises the caller's error.
    """
    if path.is_dir():
        recover(path)  # a `gpudash dashboards` killed part-way: all its files, or none
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    for file in files:
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
            # ValueError: not JSON, or an integer of thousands of digits; RecursionError: nested thousands deep
            unreadable(file, exc)
        yield file, data
