"""What gpudash compares, and how it marks what it pushed.

The canonical form of a dashboard is its JSON without what the server owns (`id`, `uid`, `version`) and
without the gpudash marker, with the normalisation Grafana applies on save (title trimmed, refresh raised
to the 5 s minimum, integral floats written as integers as Go does) and what Grafana's migrations and
editor change (gpudash.compare.normalise: schemaVersion, pluginVersion, plugin defaults, nulls). Two
dashboards are equal when their canonical forms are.

Every dashboard gpudash writes carries a marker, a top-level key holding the hash of the canonical form
it wrote, the site it wrote it for and the uid it wrote it under. When the remote canonical form still
hashes to the marker, nobody changed the dashboard since gpudash pushed it; when it does not, or the
marker is gone (a save from the Grafana UI drops unknown keys), someone did. The site and the uid say
whose it is: a copy made through the API keeps the marker but not the uid, and another site's marker
names that site. On /apis the marker travels as metadata annotations (`marker_annotations`), which a
save from the UI keeps.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Literal

from gpudash.compare.normalise import normalise_owned_copy
from gpudash.config.durations import grafana_ms

MARKER_KEY = "gpudashSync"
SERVER_OWNED_KEYS = ("id", "version")
COMPARED_WITHOUT = (*SERVER_OWNED_KEYS, "uid", MARKER_KEY)  # the uid is compared as the dashboard's address
# Annotations (grafana-13-apis.md §1.3, §4.2): a manager kind Grafana defines, gpudash as its identity, edits in
# the UI allowed (a manager without it makes the dashboard read-only there), the content hash as the
# source checksum; the site, the uid and the commit under gpudash's own prefix.
MANAGED_BY, MANAGER_ID = "grafana.app/managedBy", "grafana.app/managerId"
MANAGER_ALLOWS_EDITS, SOURCE_CHECKSUM = "grafana.app/managerAllowsEdits", "grafana.app/sourceChecksum"
MANAGER_KIND, MANAGER_NAME = "kubectl", "gpudash"
SITE_ANNOTATION, UID_ANNOTATION, COMMIT_ANNOTATION = "gpudash/site", "gpudash/uid", "gpudash/commit"
MIN_REFRESH_SECONDS = 5  # Grafana's default min_refresh_interval; shorter values are raised on save


Provenance = Literal["pushed", "edited", "unmarked"]


def _go_number(value: float) -> float | int:
    return int(value) if value.is_integer() and abs(value) < 2**53 else value


def _go_list(items: list[Any], drop_nulls: bool) -> list[Any]:
    out: list[Any] = []
    for item in items:
        kind = type(item)
        if kind is dict:
            out.append(_go_dict(item, drop_nulls))
        elif kind is list:
            out.append(_go_list(item, drop_nulls))
        else:
            out.append(_go_number(item) if kind is float else item)
    return out


def _go_dict(members: dict[str, Any], drop_nulls: bool) -> dict[str, Any]:
    """A deep copy in which 80.0 is 80, as Grafana (Go) returns it; with `drop_nulls`, without the null members
    of objects (as Grafana's editor saves). Scalars are handled inline: a dashboard has thousands of them."""
    out: dict[str, Any] = {}
    for key, item in members.items():
        kind = type(item)
        if kind is dict:
            out[key] = _go_dict(item, drop_nulls)
        elif kind is list:
            out[key] = _go_list(item, drop_nulls)
        elif item is None and drop_nulls:
            continue
        else:
            out[key] = _go_number(item) if kind is float else item
    return out


def saved_copy(body: dict[str, Any]) -> dict[str, Any]:
    """A deep copy as Grafana stores and its editor saves it: integral floats as integers, no null members."""
    return _go_dict(body, drop_nulls=True)


def _clamped_refresh(refresh: Any) -> Any:
    if not isinstance(refresh, str):
        return refresh
    ms = grafana_ms(refresh.strip())
    if ms is not None and ms < MIN_REFRESH_SECONDS * 1000:
        return f"{MIN_REFRESH_SECONDS}s"
    return refresh


def _as_saved(dashboard: dict[str, Any], dropped: tuple[str, ...], drop_nulls: bool = False) -> dict[str, Any]:
    body = _go_dict({key: value for key, value in dashboard.items() if key not in dropped}, drop_nulls)
    if isinstance(body.get("title"), str):
        body["title"] = body["title"].strip()
    if isinstance(body.get("uid"), str):
        body["uid"] = body["uid"].strip()
    if "refresh" in body:
        body["refresh"] = _clamped_refresh(body["refresh"])
    return body


def canonical(dashboard: dict[str, Any]) -> dict[str, Any]:
    """The dashboard as gpudash compares it (new dicts and lists all the way down; the argument is unchanged)."""
    return normalise_owned_copy(_as_saved(dashboard, COMPARED_WITHOUT, drop_nulls=True))


def legacy_canonical(dashboard: dict[str, Any]) -> dict[str, Any]:
    """The canonical form of gpudash before the Grafana normalisation: what older markers hash."""
    return _as_saved(dashboard, (*SERVER_OWNED_KEYS, MARKER_KEY))


def canonical_text(dashboard: dict[str, Any]) -> str:
    """Canonical JSON as text: sorted keys, two-space indent; what `gpudash diff` shows."""
    return json.dumps(canonical(dashboard), sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def hash_of_canonical(body: dict[str, Any]) -> str:
    compact = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(compact.encode("utf-8")).hexdigest()


def content_hash(dashboard: dict[str, Any]) -> str:
    return hash_of_canonical(canonical(dashboard))


def same_content(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return canonical(a) == canonical(b)


@dataclass(frozen=True)
class Marker:
    """The marker gpudash left on a dashboard. `site` and `uid` are None on one written before sites existed."""

    content_hash: str
    commit: str
    site: str | None
    uid: str | None


def marked(dashboard: dict[str, Any], commit: str, site: str) -> dict[str, Any]:
    """The dashboard as gpudash posts it: the local JSON plus the marker, without server-owned keys."""
    body = {key: value for key, value in dashboard.items() if key not in (*SERVER_OWNED_KEYS, MARKER_KEY)}
    body[MARKER_KEY] = {"contentHash": content_hash(dashboard), "commit": commit, "site": site,
                        "uid": str(dashboard.get("uid", "")).strip()}
    return body


def read_marker(dashboard: dict[str, Any]) -> Marker | None:
    """The marker, or None when there is none (or it is not one gpudash could have written)."""
    marker = dashboard.get(MARKER_KEY)
    if not isinstance(marker, dict) or not isinstance(marker.get("contentHash"), str):
        return None
    site, uid = marker.get("site"), marker.get("uid")
    return Marker(str(marker["contentHash"]), str(marker.get("commit") or ""),
                  str(site) if site is not None else None, str(uid) if uid is not None else None)


def provenance(remote: dict[str, Any], remote_canonical: dict[str, Any] | None = None) -> Provenance:
    """`pushed`: exactly what gpudash wrote; `edited`: written by gpudash, changed since; `unmarked`: neither."""
    marker = read_marker(remote)
    if marker is None:
        return "unmarked"
    body = canonical(remote) if remote_canonical is None else remote_canonical
    if marker.content_hash == hash_of_canonical(body):
        return "pushed"
    # a marker an older gpudash wrote hashes the form it compared then: unchanged since is still "pushed"
    return "pushed" if marker.content_hash == hash_of_canonical(legacy_canonical(remote)) else "edited"


def marker_annotations(marker: dict[str, Any]) -> dict[str, str]:
    """The marker `marked` puts in the JSON, as /apis metadata annotations."""
    return {MANAGED_BY: MANAGER_KIND, MANAGER_ID: MANAGER_NAME, MANAGER_ALLOWS_EDITS: "true",
            SOURCE_CHECKSUM: str(marker["contentHash"]), SITE_ANNOTATION: str(marker["site"]),
            UID_ANNOTATION: str(marker["uid"]), COMMIT_ANNOTATION: str(marker["commit"])}


def marker_of_annotations(annotations: dict[str, Any]) -> dict[str, Any] | None:
    """The marker in the JSON's shape from /apis annotations; None when gpudash is not the manager."""
    if annotations.get(MANAGER_ID) != MANAGER_NAME or not isinstance(annotations.get(SOURCE_CHECKSUM), str):
        return None
    return {"contentHash": annotations[SOURCE_CHECKSUM], "commit": str(annotations.get(COMMIT_ANNOTATION, "")),
            "site": annotations.get(SITE_ANNOTATION), "uid": annotations.get(UID_ANNOTATION)}
