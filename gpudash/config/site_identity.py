"""A site's identity in Grafana (`site_id`): how a new one is made, how it is written into gpudash.yaml, and
the id gpudash derived from the clusters before, which an existing install may keep.

A new id is a slug of a name (the cluster names, or the folder `gpudash init` makes) and 32 random bits, so
two repositories never get one id by accident, however alike their configs. It is written into the site
config the first time it is needed and committed with it: every clone of that repository is then the same
site. The old derived id was a function of the cluster names and targets alone, so every repository that
ran with the same clusters (the embedded default, or an unedited `gpudash init`) had the same one.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import secrets
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpudash.config.site import Cluster, parse_site
from gpudash.errors import ConfigError
from gpudash.yamlfile import YamlError, parse_yaml

RANDOM_HEX = 8  # 32 bits: two sites meet one id once in about four billion pairs
_SLUG_LENGTH = 21  # slug + "-" + 8 hex stays within site_id's 30 characters
WRITTEN_NOTE = "# written by gpudash on first use: this site's identity in Grafana; commit it with this file"
NEW_FILE_HEADER = "# gpudash site config (gpudash's docs/thresholds.md); every other key is optional, at its default\n"


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower())[:_SLUG_LENGTH].strip("-") or "site"


def new_site_id(name: str, random_hex: Callable[[int], str] = secrets.token_hex) -> str:
    """e.g. "prod-a-3f9c21d4": the slug of `name`, then 8 random hex digits."""
    return f"{slug(name)}-{random_hex(RANDOM_HEX // 2)}"


def cluster_names(clusters: tuple[Cluster, ...]) -> str:
    return "-".join(c.name for c in clusters)


def legacy_site_id(clusters: tuple[Cluster, ...]) -> str:
    """The id gpudash derived before it wrote one: the cluster names as a slug, then 6 hex of a hash of the
    (name, address) pairs. An install that pushed with it keeps it by naming it in gpudash.yaml."""
    name_slug = re.sub(r"[^a-z0-9-]+", "-", cluster_names(clusters).lower())[:20].strip("-")
    pairs = sorted((c.name, t.address) for c in clusters for t in c.targets)
    digest = hashlib.sha256(json.dumps(pairs).encode("utf-8")).hexdigest()[:6]
    return f"{name_slug or 'site'}-{digest}"


def with_site_id(text: str, site_id: str) -> str:
    """The site config's text with `site_id:` added as its last key; everything already there kept as it was."""
    if not text.strip():
        return f"{NEW_FILE_HEADER}site_id: {site_id}  {WRITTEN_NOTE}\n"
    ending = "" if text.endswith("\n") else "\n"
    return f"{text}{ending}\nsite_id: {site_id}  {WRITTEN_NOTE}\n"


def _site_id_in(path: Path, text: str) -> tuple[str, Any]:
    """The site_id the text names ("" for none), checked as the site config it is, and the text's data."""
    try:
        data = parse_yaml(text)
    except YamlError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return parse_site(str(path), data).site_id, data


def _appended(path: Path, text: str, data: Any, site_id: str, by_hand: str) -> str:
    """`with_site_id`, read back as exactly the config it was plus the id (a flow-style file would not be)."""
    new_text = with_site_id(text, site_id)
    try:
        same = parse_yaml(new_text) == {**(data or {}), "site_id": site_id}
    except YamlError:
        same = False
    if not same:
        raise ConfigError(f"{path}: cannot add site_id at its end (its YAML is not a plain block of keys); "
                          f"{by_hand}")
    return new_text


def _stage(folder: Path, name: str, text: str, mode: int) -> Path:
    handle, temp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fchmod(stream.fileno(), mode)
            os.fsync(stream.fileno())
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return Path(temp)


def _create(path: Path, text: str) -> None:
    """Create `path` holding `text`, unless a file appeared there meanwhile (then leave that one)."""
    temp = _stage(path.parent, path.name, text, 0o644)
    try:
        os.link(temp, path)  # fails when the name exists: another gpudash was first
    except FileExistsError:
        pass
    finally:
        temp.unlink(missing_ok=True)


def write_site_id(path: Path, site_id: str) -> str:
    """Write `site_id: <site_id>` into the site config at `path` (a new file when there is none) and return
    the id the file holds afterwards: when another gpudash wrote one first, that one, so both use one id.

    The rest of the file is kept byte for byte; the new text replaces it in one rename, after it was read
    back as the same config plus the id. ConfigError naming the file, and nothing written, when it cannot be.
    """
    target = path.resolve() if path.is_symlink() else path
    by_hand = f"add `site_id: {site_id}` to {path} by hand"
    try:
        if not target.exists():
            _create(target, with_site_id("", site_id))
        with target.open("rb") as held:
            fcntl.flock(held, fcntl.LOCK_EX)  # one writer at a time; each reads the file again by its name
            text = target.read_bytes().decode("utf-8")
            held_id, data = _site_id_in(path, text)
            if held_id:
                return held_id
            new_text = _appended(path, text, data, site_id, by_hand)
            temp = _stage(target.parent, target.name, new_text, target.stat().st_mode & 0o7777)
            try:
                os.replace(temp, target)
            finally:
                temp.unlink(missing_ok=True)
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot write site_id: {exc.strerror or exc}; {by_hand}") from None
    return site_id
