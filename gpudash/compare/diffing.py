"""How a remote dashboard differs from the local one: a summary a reviewer can read, then a unified diff.

Both sides are compared in canonical form (gpudash.compare.content), so what the server owns (id, version)
and gpudash's own marker never show up as differences.
"""

from __future__ import annotations

import difflib
import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

from gpudash.compare.content import canonical, canonical_text

_SKIP_TOP = ("panels", "templating")
_WIDTH = 70


def _short(value: Any, width: int = _WIDTH) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 1] + "…"


def flat_panels(panels: Any) -> list[dict[str, Any]]:
    """Panels in order, the panels of collapsed rows included."""
    out: list[dict[str, Any]] = []
    for panel in panels if isinstance(panels, list) else []:
        if isinstance(panel, dict):
            out.append(panel)
            out += flat_panels(panel.get("panels"))
    return out


def _name(panel: dict[str, Any]) -> str:
    ident = f"panel {panel['id']} " if "id" in panel else "panel "
    return f"{ident}{str(panel.get('title', ''))!r}"


def _pair_panels(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> tuple[
        list[tuple[dict[str, Any], dict[str, Any]]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Match by title where a title is unique on both sides (survives renumbering), then by id."""
    def unique_titles(panels: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        counts = Counter(str(p.get("title", "")) for p in panels)
        return {str(p.get("title", "")): p for p in panels if counts[str(p.get("title", ""))] == 1}

    by_title_old, by_title_new = unique_titles(old), unique_titles(new)
    pairs = [(by_title_old[t], by_title_new[t]) for t in by_title_old if t in by_title_new]
    taken_old = {id(a) for a, _ in pairs}
    taken_new = {id(b) for _, b in pairs}
    rest_old = [p for p in old if id(p) not in taken_old]
    rest_new = {p.get("id"): p for p in new if id(p) not in taken_new and "id" in p}
    for panel in rest_old:
        match = rest_new.pop(panel.get("id"), None) if "id" in panel else None
        if match is not None:
            pairs.append((panel, match))
            taken_old.add(id(panel))
            taken_new.add(id(match))
    removed = [p for p in old if id(p) not in taken_old]
    added = [p for p in new if id(p) not in taken_new]
    return pairs, removed, added


def _steps_text(panel: dict[str, Any]) -> str | None:
    steps = panel.get("fieldConfig", {}).get("defaults", {}).get("thresholds", {}).get("steps")
    if not isinstance(steps, list):
        return None
    parts = []
    for step in steps:
        if isinstance(step, dict):
            value = step.get("value")
            parts.append(f"{step.get('color')}" if value is None else f"{_short(value)} {step.get('color')}")
    return ", ".join(parts)


def _queries(panel: dict[str, Any]) -> dict[str, str]:
    out = {}
    for index, target in enumerate(panel.get("targets") or []):
        if isinstance(target, dict):
            text = target.get("expr", target.get("rawSql", target.get("query", "")))
            out[str(target.get("refId", index))] = str(text)
    return out


def _unit(panel: dict[str, Any]) -> Any:
    return panel.get("fieldConfig", {}).get("defaults", {}).get("unit")


def _place(panel: dict[str, Any]) -> str:
    grid = panel["gridPos"] if isinstance(panel.get("gridPos"), dict) else {}
    return f"x{grid.get('x')} y{grid.get('y')} {grid.get('w')}x{grid.get('h')}"


def _field_config_rest(panel: dict[str, Any]) -> Any:
    """The field config without what the summary names itself (thresholds, unit)."""
    config = panel.get("fieldConfig")
    if not isinstance(config, dict) or not isinstance(config.get("defaults"), dict):
        return config
    defaults = {k: v for k, v in config["defaults"].items() if k not in ("thresholds", "unit")}
    return {**config, "defaults": defaults}


def _differing(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """(key, old value or None, new value or None) for every key whose value differs, by key."""
    return [(key, old.get(key), new.get(key)) for key in sorted(set(old) | set(new)) if old.get(key) != new.get(key)]


def _panel_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    notes: list[str] = []
    if old.get("title") != new.get("title"):
        notes.append(f"title {_short(old.get('title'))!r} -> {_short(new.get('title'))!r}")
    if old.get("gridPos") != new.get("gridPos"):
        notes.append(f"moved {_place(old)} -> {_place(new)}")
    if _unit(old) != _unit(new):
        notes.append(f"unit {_unit(old) or 'none'} -> {_unit(new) or 'none'}")
    old_steps, new_steps = _steps_text(old), _steps_text(new)
    if old_steps != new_steps:
        notes.append(f"thresholds {old_steps or 'none'} -> {new_steps or 'none'}")
    old_q, new_q = _queries(old), _queries(new)
    for ref, before, after in _differing(old_q, new_q):
        if after is None:
            notes.append(f"query {ref} removed")
        elif before is None:
            notes.append(f"query {ref} added: {_short(after)}")
        else:
            notes.append(f"query {ref}: {_short(before, 60)} -> {_short(after, 60)}")
    handled = {"title", "panels", "gridPos"}
    if _field_config_rest(old) == _field_config_rest(new):
        handled.add("fieldConfig")
    if old_q != new_q:
        handled.add("targets")
    others = [key for key, _, _ in _differing(old, new) if key not in handled]
    if others:
        notes.append("also " + ", ".join(others))
    return notes


def _variables(dashboard: dict[str, Any]) -> dict[str, Any]:
    items = dashboard.get("templating", {}).get("list", []) if isinstance(dashboard.get("templating"), dict) else []
    return {str(v.get("name")): v for v in items if isinstance(v, dict)}


def summarize(remote: dict[str, Any], local: dict[str, Any]) -> list[str]:
    """Lines saying what changes from `remote` to `local`: dashboard fields, variables, panels."""
    old, new = canonical(remote), canonical(local)
    lines = []
    for key in sorted(set(old) | set(new)):
        if key not in _SKIP_TOP and old.get(key) != new.get(key):
            lines.append(f"  ~ {key}: {_short(old.get(key, '(none)'), 32)} -> {_short(new.get(key, '(none)'), 32)}")
    for name, before, after in _differing(_variables(old), _variables(new)):
        if after is None:
            lines.append(f"  - variable ${name}")
        elif before is None:
            lines.append(f"  + variable ${name}")
        else:
            changed = [key for key, _, _ in _differing(before, after)]
            lines.append(f"  ~ variable ${name}: {', '.join(changed)}")
    pairs, removed, added = _pair_panels(flat_panels(old.get("panels")), flat_panels(new.get("panels")))
    lines += [f"  - {_name(p)}" for p in removed]
    lines += [f"  + {_name(p)}" for p in added]
    for before, after in pairs:
        notes = _panel_changes(before, after)
        if notes:
            lines.append(f"  ~ {_name(after)}: {'; '.join(notes)}")
    return lines


def headline(remote: dict[str, Any], local: dict[str, Any]) -> str:
    pairs, removed, added = _pair_panels(flat_panels(canonical(remote).get("panels")),
                                         flat_panels(canonical(local).get("panels")))
    changed = sum(1 for a, b in pairs if a != b)
    return f"{len(added)} panels added, {len(removed)} removed, {changed} changed"


def unified(remote: dict[str, Any] | None, local: dict[str, Any], uid: str, context: int = 3) -> str:
    """Unified diff of canonical JSON, from Grafana's copy to the local file."""
    before = canonical_text(remote).splitlines(keepends=True) if remote is not None else []
    after = canonical_text(local).splitlines(keepends=True)
    return "".join(difflib.unified_diff(before, after, f"grafana/{uid}", f"local/{uid}.json", n=context))


def report(remote: dict[str, Any], local: dict[str, Any], uid: str) -> str:
    """Summary, then the unified diff; empty when the two are equal."""
    body = unified(remote, local, uid)
    if not body:
        return ""
    lines = [f"{uid}: {headline(remote, local)}", *summarize(remote, local)]
    return "\n".join(lines) + "\n" + body
