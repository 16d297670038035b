"""The local side: the generated dashboard JSON files, read and checked before anything is sent."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any, NoReturn

from gpudash import __version__
from gpudash.config.site import SITE_ID_TEXT
from gpudash.errors import ConfigError
from gpudash.panels.json_files import read_json_files
from gpudash.repository import GRAFANA_UID

MESSAGE_LIMIT = 500  # Grafana 11+ refuses longer version messages
_SLUG = re.compile(r"[^a-z0-9]+")
SITE_MESSAGE = re.compile(rf"^gpudash \S+ for site ({SITE_ID_TEXT})(?: |$)")


def slug(title: str) -> str:
    """Grafana's slug of a title, which is what it compares when it checks titles for uniqueness."""
    return _SLUG.sub("-", title.lower()).strip("-")


def _unreadable(path: Path, exc: Exception) -> NoReturn:
    if isinstance(exc, OSError):
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from exc
    if isinstance(exc, UnicodeDecodeError):
        raise ConfigError(f"{path}: not UTF-8 text") from exc
    if isinstance(exc, json.JSONDecodeError):
        raise ConfigError(f"{path}: line {exc.lineno}, column {exc.colno}: invalid JSON: {exc.msg}") from exc
    raise exc


def _checked(path: Path, data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a dashboard (a JSON object), got {type(data).__name__}")
    uid, title = data.get("uid"), data.get("title")
    if not isinstance(uid, str) or not GRAFANA_UID.fullmatch(uid):
        raise ConfigError(f"{path}: uid: expected 1-40 characters of A-Z a-z 0-9 _ -, got {uid!r}")
    if not isinstance(title, str) or not title.strip():
        raise ConfigError(f"{path}: title: expected a non-empty string, got {title!r}")
    if not isinstance(data.get("panels", []), list):
        raise ConfigError(f"{path}: panels: expected a list")
    return data


def load_local(directory: Path) -> list[dict[str, Any]]:
    """Every *.json dashboard in `directory`, sorted by file name; ConfigError naming the file on bad input.

    Uids must be unique, and so must title slugs, because Grafana up to 11.2 refuses two dashboards
    whose titles slug alike in one folder.
    """
    if not directory.is_dir():
        raise ConfigError(f"{directory}: no such directory (run `gpudash dashboards` first, or pass --dir)")
    seen_uid: dict[str, Path] = {}
    seen_slug: dict[str, Path] = {}
    dashboards = []
    for path, raw in read_json_files(directory, _unreadable):
        data = _checked(path, raw)
        uid, title_slug = data["uid"], slug(data["title"])
        if uid in seen_uid:
            raise ConfigError(f"{path}: uid {uid!r} is also used by {seen_uid[uid]}")
        if title_slug in seen_slug:
            raise ConfigError(f"{path}: title {data['title']!r} collides with the title in {seen_slug[title_slug]}")
        seen_uid[uid], seen_slug[title_slug] = path, path
        dashboards.append(data)
    if not dashboards:
        raise ConfigError(f"{directory}: no dashboards (*.json) found (run `gpudash dashboards` first)")
    return dashboards


def source_commit(directory: Path) -> str:
    """`git rev-parse HEAD` of the repository holding `directory`, or "" outside git."""
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=directory, capture_output=True, text=True,
                              timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def tree_is_dirty(directory: Path) -> bool:
    try:
        done = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "."],
                              cwd=directory, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and bool(done.stdout.strip())


def version_message(directory: Path, site: str) -> tuple[str, str]:
    """(commit, message) for Grafana's version history, e.g. "gpudash 0.1.0 for site lab-1a2b3c from commit 1a2b3c4".

    The site is in the message because a save from the Grafana UI drops the marker: the history then still
    says which site's gpudash wrote the dashboard (read back by `message_site`).
    """
    commit = source_commit(directory)
    if not commit:
        return "", f"gpudash {__version__} for site {site} (not from a git checkout)"
    dirty = " with uncommitted changes" if tree_is_dirty(directory) else ""
    return commit, f"gpudash {__version__} for site {site} from commit {commit}{dirty}"[:MESSAGE_LIMIT]


def message_site(message: str) -> str | None:
    """The site a gpudash version message names; "" for one from a gpudash without sites; None if not gpudash's."""
    if not message.startswith("gpudash "):
        return None
    match = SITE_MESSAGE.match(message)
    return match.group(1) if match else ""
