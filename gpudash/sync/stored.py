"""What Grafana stores a dashboard as, read from `status.conversion`, and comparing it in that version.

Grafana 13 keeps each dashboard in the schema it was written in; a read at another version answers a
converted spec and `status.conversion.storedVersion` (grafana-13-apis.md §1.11-1.12). A save from 13's
editor stores v2. gpudash records on every write which schema it wrote (`gpudash/schema`) and the content
hash of what it wrote in that schema, so a dashboard stored in another schema than gpudash wrote was saved
by a person, and a dashboard is compared only in the schema Grafana stores it in: the converted answer is
never compared (the conversion is lossy and normalises).
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from typing import Any

from gpudash.compare.content import canonical, hash_of_canonical
from gpudash.compare.content_v2 import canonical_v2
from gpudash.sync.schema import family

SCHEMA_ANNOTATION = "gpudash/schema"  # the schema gpudash wrote: v1 or v2 (absent: v1, as before)
V2_HASH_ANNOTATION = "gpudash/contentHashV2"  # the v2 content hash gpudash wrote (v1's is the marker's)


@dataclass(frozen=True)
class Storage:
    """One /apis dashboard's schemas: stored, read (the answer's) and written (by gpudash, last)."""

    stored: str
    read: str
    written: str
    spec: dict[str, Any] | None = field(default=None, compare=False)  # in `stored`; None: not read or failed
    hashes: dict[str, str] = field(default_factory=dict, compare=False)  # schema -> hash gpudash wrote
    failed: str = ""  # the conversion's error, when Grafana could not convert

    @property
    def person_saved(self) -> bool:
        """Stored in another schema than gpudash wrote: a save from Grafana's editor."""
        return self.stored != self.written

    @property
    def compared_as_stored(self) -> bool:
        """Whether the plan must compare in the stored schema (anything but v1 read, stored and written)."""
        return bool(self.failed) or "v2" in (self.stored, self.read, self.written)

    @property
    def as_gpudash_wrote(self) -> bool:
        """The stored content is exactly what gpudash last wrote (same schema, same content hash)."""
        if self.person_saved or self.spec is None or self.failed:
            return False
        return self.hashes.get(self.stored) == hash_in(self.stored, self.spec)


def canonical_in(version: str, spec: dict[str, Any]) -> dict[str, Any]:
    return canonical_v2(spec) if family(version) == "v2" else canonical(spec)


def hash_in(version: str, spec: dict[str, Any]) -> str:
    return hash_of_canonical(canonical_in(version, spec))


def storage_of(item: dict[str, Any], annotations: dict[str, str], v1_hash: str | None) -> Storage:
    """The storage of a resource as Grafana answered it; `spec` only when the answer is not converted."""
    read = family(str(item.get("apiVersion", "")).rpartition("/")[2])
    status = item.get("status")
    conversion = status.get("conversion") if isinstance(status, dict) else None
    conversion = conversion if isinstance(conversion, dict) else {}
    raw = str(conversion.get("storedVersion") or "")
    stored = family(raw) if raw else read
    failed = str(conversion.get("error") or "failed") if conversion.get("failed") else ""
    spec = item.get("spec")
    hashes = {"v1": v1_hash} if v1_hash else {}
    if annotations.get(V2_HASH_ANNOTATION):
        hashes["v2"] = annotations[V2_HASH_ANNOTATION]
    usable = dict(spec) if isinstance(spec, dict) and stored == read and not failed else None
    return Storage(stored, read, family(annotations.get(SCHEMA_ANNOTATION, "v1")), usable, hashes, failed)


def written_annotations(version: str, spec: dict[str, Any]) -> dict[str, str]:
    """What a write records beside the marker: the schema written and, for v2, its content hash."""
    recorded = {SCHEMA_ANNOTATION: family(version)}
    if family(version) == "v2":
        recorded[V2_HASH_ANNOTATION] = hash_in("v2", spec)
    return recorded


def stored_diff(storage: Storage, local_spec: dict[str, Any] | None, uid: str) -> str:
    """The unified diff from Grafana's stored spec to the local dashboard in that schema ("" when equal)."""
    if storage.spec is None or local_spec is None:
        if storage.failed:
            why = f"Grafana could not convert ({storage.failed})"
        elif local_spec is None:
            why = f"this gpudash cannot write (no v1 -> {storage.stored} dashboard conversion)"
        else:
            why = "gpudash could not read as stored"
        return f"{uid}: stored as {storage.stored}, which {why}: no diff in that schema\n"
    texts = [json.dumps(canonical_in(storage.stored, s), sort_keys=True, indent=2, ensure_ascii=False) + "\n"
             for s in (storage.spec, local_spec)]
    body = "".join(difflib.unified_diff(texts[0].splitlines(keepends=True), texts[1].splitlines(keepends=True),
                                        f"grafana/{uid} (stored as {storage.stored})",
                                        f"local/{uid}.json (as {storage.stored})", n=3))
    return f"{uid}: compared as Grafana stores it ({storage.stored})\n{body}" if body else ""
