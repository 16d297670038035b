"""The classic dashboard's rows and grid positions as a schema v2 layout.

Each classic row becomes a section (a `RowsLayoutRow`, or a `TabsLayoutTab` when the dashboard asks for tabs)
holding a `GridLayout` with the panels' positions, y counted from the top of the section. Panels before the
first row make a section of their own, without a header. A dashboard without rows is one `GridLayout`.

Conditional rendering: v2 allows it on rows, tabs and auto-grid items, not on grid items. A section whose panels
may all be empty on the site (`elements.may_be_empty`) is hidden while none of them has data; a section where only
some may be empty becomes an `AutoGridLayout`, whose items can each be hidden while they have no data.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpudash.schema_v2.elements import element_key

ROWS, TABS = "rows", "tabs"
SECTIONS = (ROWS, TABS)
# Grafana's grid: a unit of panel height is 30 px, with 8 px between units.
_CELL_PX, _GAP_PX = 30, 8


@dataclass
class Section:
    title: str | None  # None: the panels before the first row
    collapsed: bool = False
    panels: list[tuple[int, dict[str, Any]]] = field(default_factory=list)


def sections(numbered: list[tuple[int, dict[str, Any]]]) -> list[Section]:
    """The classic panels grouped by row: an expanded row holds the panels after it, a collapsed one its own."""
    found: list[Section] = []
    inside_collapsed: set[int] = set()
    for pid, panel in numbered:
        if id(panel) in inside_collapsed:
            found[-1].panels.append((pid, panel))
        elif panel.get("type") == "row":
            found.append(Section(str(panel.get("title", "")), bool(panel.get("collapsed", False))))
            if panel.get("collapsed"):
                inside_collapsed |= {id(p) for p in panel.get("panels") or []}
        else:
            if not found or found[-1].collapsed:
                found.append(Section(None))
            found[-1].panels.append((pid, panel))
    return found


def _grid(panels: list[tuple[int, dict[str, Any]]], in_section: bool = True) -> dict[str, Any]:
    """The panels at their classic positions; in a section, y counts from the section's first line."""
    top = min((p.get("gridPos", {}).get("y", 0) for _, p in panels), default=0) if in_section else 0
    items = []
    for pid, panel in panels:
        pos = panel.get("gridPos") or {}
        items.append({"kind": "GridLayoutItem", "spec": {
            "x": pos.get("x", 0), "y": pos.get("y", 0) - top, "width": pos.get("w", 12), "height": pos.get("h", 8),
            "element": {"kind": "ElementReference", "name": element_key(pid)}}})
    return {"kind": "GridLayout", "spec": {"items": items}}


def _when_data() -> dict[str, Any]:
    """Shown only while it has data."""
    return {"kind": "ConditionalRenderingGroup", "spec": {
        "visibility": "show", "condition": "and",
        "items": [{"kind": "ConditionalRenderingData", "spec": {"value": True}}]}}


def _auto_grid(panels: list[tuple[int, dict[str, Any]]], empty: set[int]) -> dict[str, Any]:
    """The panels in reading order, as many a line as the widest line of the classic grid, as tall as its
    tallest panel; those that may be empty hidden while they have no data."""
    per_line: dict[int, int] = {}
    for _, panel in panels:
        y = panel.get("gridPos", {}).get("y", 0)
        per_line[y] = per_line.get(y, 0) + 1
    tallest = max(panel.get("gridPos", {}).get("h", 8) for _, panel in panels)
    items = []
    for pid, _ in sorted(panels, key=lambda p: (p[1].get("gridPos", {}).get("y", 0),
                                                p[1].get("gridPos", {}).get("x", 0))):
        spec: dict[str, Any] = {"element": {"kind": "ElementReference", "name": element_key(pid)}}
        if pid in empty:
            spec["conditionalRendering"] = _when_data()
        items.append({"kind": "AutoGridLayoutItem", "spec": spec})
    return {"kind": "AutoGridLayout", "spec": {
        "maxColumnCount": max(per_line.values()), "columnWidthMode": "standard", "rowHeightMode": "custom",
        "rowHeight": tallest * _CELL_PX + (tallest - 1) * _GAP_PX, "items": items}}


def layout(numbered: list[tuple[int, dict[str, Any]]], may_be_empty: Callable[[dict[str, Any]], bool],
           mode: str, untitled: str) -> dict[str, Any]:
    """The v2 layout of the numbered classic panels; `untitled` titles a tab of the panels before any row."""
    found = sections(numbered)
    if not any(s.title is not None for s in found):
        return _grid([p for s in found for p in s.panels], in_section=False)
    parts = []
    for section in found:
        empty = {pid for pid, panel in section.panels if may_be_empty(panel)}
        every = bool(section.panels) and len(empty) == len(section.panels)
        inner = _auto_grid(section.panels, empty) if empty and not every else _grid(section.panels)
        spec: dict[str, Any] = {"title": section.title if section.title is not None else untitled, "layout": inner}
        if every:
            spec["conditionalRendering"] = _when_data()
        if mode == ROWS:
            if section.title is None:
                spec["hideHeader"] = True
            if section.collapsed:
                spec["collapse"] = True
            parts.append({"kind": "RowsLayoutRow", "spec": spec})
        else:
            parts.append({"kind": "TabsLayoutTab", "spec": spec})
    if mode == ROWS:
        return {"kind": "RowsLayout", "spec": {"rows": parts}}
    return {"kind": "TabsLayout", "spec": {"tabs": parts}}
