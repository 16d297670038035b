"""`gpudash sync --watch`: regenerate and sync whenever a definition or thresholds.yaml changes.

Polls modification times (no platform file-event API needed, and it works on network filesystems).
A failing cycle is reported and the loop goes on; the next change tries again.
"""

from __future__ import annotations

import contextlib
import io
import time
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path

from gpudash.errors import GpudashError

Snapshot = dict[Path, float]
WATCHED_SUFFIXES = (".py", ".yaml", ".yml", ".json")


def snapshot(paths: Iterable[Path]) -> Snapshot:
    """Modification time of every watched file (directories: their *.py/*.yaml/*.json, recursively)."""
    seen: Snapshot = {}
    for path in paths:
        if path.is_dir():
            for item in path.rglob("*"):
                if item.suffix in WATCHED_SUFFIXES and item.is_file() and "__pycache__" not in item.parts:
                    seen[item] = item.stat().st_mtime
        elif path.is_file():
            seen[path] = path.stat().st_mtime
    return seen


def changed(before: Snapshot, after: Snapshot) -> list[Path]:
    return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))


def regenerate(definitions: Path, out: Path, thresholds: Path | None, site: Path | None) -> None:
    """What `gpudash dashboards` writes, built in this process: the classic JSON into `out` (what sync reads)
    and the v2 resources into <definitions>/v2, both rendered before either is written. Any failure is one
    GpudashError line."""
    from gpudash.catalog import profile
    from gpudash.config.loading import load_settings
    from gpudash.files import write_owned
    from gpudash.panels.build import build_all
    from gpudash.panels.formats import CLASSIC, V2, files_for
    from gpudash.repository import V2_DIR_NAME

    try:
        with contextlib.redirect_stdout(io.StringIO()):  # grafanalib warns on stdout; not among the sync's lines
            settings = load_settings(thresholds, site)
            built = build_all(settings, definitions)
            site_profile = profile(settings.site.profile)
            rendered = [(out, files_for(CLASSIC, built, site_profile)),
                        (definitions / V2_DIR_NAME, files_for(V2, built, site_profile))]
            for target, files in rendered:
                write_owned(target, files, "*.json")
    except GpudashError as exc:
        raise GpudashError(f"regenerating the dashboards failed: gpudash: {exc.format_message()}") from None
    except Exception as exc:  # a broken definition raises its own error: name it as its traceback would end
        last = traceback.format_exception_only(exc)[-1].strip()
        raise GpudashError(f"regenerating the dashboards failed: {last}") from None


def watch(paths: list[Path], cycle: Callable[[], None], echo: Callable[[str], None], interval: float = 1.0,
          polls: int | None = None, sleep: Callable[[float], None] = time.sleep) -> int:
    """Run `cycle` once, then again after each change; stop after `polls` polls (None: never). Return cycles run."""
    def attempt() -> None:
        try:
            cycle()
        except GpudashError as exc:
            echo(f"watch: {exc.format_message()}")

    attempt()
    cycles = 1
    last = snapshot(paths)
    done = 0
    echo(f"watch: watching {', '.join(str(p) for p in paths)} every {interval:g} s (Ctrl-C to stop)")
    while polls is None or done < polls:
        sleep(interval)
        done += 1
        now = snapshot(paths)
        moved = changed(last, now)
        if not moved:
            continue
        shown = ", ".join(str(p) for p in moved[:3]) + (f" and {len(moved) - 3} more" if len(moved) > 3 else "")
        echo(f"watch: {shown} changed")
        attempt()
        cycles += 1
        last = snapshot(paths)  # what the cycle itself wrote (the regenerated JSON) is not a new change
    return cycles
