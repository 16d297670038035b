"""Dashboards in Grafana's schema v2 (13's dynamic dashboards), compared as they are stored.

A v2 spec holds its panels as `elements` (each a Panel whose `vizConfig` names the plugin, its version and
its options and field config) and places them with a `layout` (a grid, rows, tabs or an auto grid). The
canonical form undoes on each element what Grafana's editor fills in on save, the same steps as for v1
(gpudash.compare.normalise: plugin defaults, the plugin version, nulls), so the v2 that gpudash would write
and the v2 a person saved unchanged compare equal, and a moved threshold does not.

`v2_only` names what a v2 dashboard holds that the classic JSON cannot: tabs, auto grids (and their
repeats) and conditional rendering; writing v1 over it loses them (grafana#114924).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from gpudash.compare.content import hash_of_canonical, saved_copy
from gpudash.compare.normalise import normalise_panel


def _element_panel(element: dict[str, Any]) -> None:
    """Normalise a Panel element in place through the v1 panel steps (type, options, fieldConfig)."""
    spec = element.get("spec")
    viz = spec.get("vizConfig") if isinstance(spec, dict) else None
    if not isinstance(viz, dict):
        return
    inner = viz.get("spec")
    panel = {"type": str(viz.get("group", "")), **(inner if isinstance(inner, dict) else {})}
    normalise_panel(panel)
    panel.pop("type")
    viz["spec"] = panel
    viz.pop("version", None)  # the plugin's version: Grafana's, as v1's pluginVersion


def canonical_v2(spec: dict[str, Any]) -> dict[str, Any]:
    """The v2 spec as gpudash compares it (a new object; the argument is unchanged)."""
    body = saved_copy({key: value for key, value in spec.items() if key not in ("id", "uid", "version")})
    if isinstance(body.get("title"), str):
        body["title"] = body["title"].strip()
    elements = body.get("elements")
    for element in elements.values() if isinstance(elements, dict) else ():
        if isinstance(element, dict) and element.get("kind") == "Panel":
            _element_panel(element)
    return body


def canonical_v2_text(spec: dict[str, Any]) -> str:
    return json.dumps(canonical_v2(spec), sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def content_hash_v2(spec: dict[str, Any]) -> str:
    return hash_of_canonical(canonical_v2(spec))


def _spec(layout: dict[str, Any]) -> dict[str, Any]:
    spec = layout.get("spec")
    return spec if isinstance(spec, dict) else {}


def _layouts(layout: Any) -> Iterator[dict[str, Any]]:
    """The layout and every layout inside it (rows' and tabs' own layouts)."""
    if not isinstance(layout, dict):
        return
    yield layout
    spec = _spec(layout)
    for part in (spec.get("rows") or []) + (spec.get("tabs") or []):
        if isinstance(part, dict) and isinstance(part.get("spec"), dict):
            yield from _layouts(part["spec"].get("layout"))


def _parts(layout: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows, tabs and auto-grid items of one layout: what may carry conditional rendering."""
    spec = _spec(layout)
    return [p for key in ("rows", "tabs", "items") for p in spec.get(key) or [] if isinstance(p, dict)]


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def v2_only(spec: dict[str, Any]) -> list[str]:
    """What the v2 spec holds that v1 cannot, one phrase each; empty when writing v1 over it loses nothing."""
    layouts = list(_layouts(spec.get("layout")))
    tabs = [t for layout in layouts if layout.get("kind") == "TabsLayout" for t in _parts(layout)]
    grids = [layout for layout in layouts if layout.get("kind") == "AutoGridLayout"]
    repeats = [i for grid in grids for i in _parts(grid) if isinstance(i.get("spec"), dict) and i["spec"].get("repeat")]
    conditional = [p for layout in layouts for p in _parts(layout)
                   if isinstance(p.get("spec"), dict) and p["spec"].get("conditionalRendering")]
    found = []
    if tabs:
        titles = ", ".join(repr(str((t.get("spec") or {}).get("title", ""))) for t in tabs)
        found.append(f"{_plural(len(tabs), 'tab')} ({titles})")
    if grids:
        found.append(_plural(len(grids), "auto grid") + (f" ({_plural(len(repeats), 'repeat')})" if repeats else ""))
    if conditional:
        found.append(f"conditional rendering on {len(conditional)} of its rows, tabs or items")
    return found
