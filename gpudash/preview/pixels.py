"""Where each panel goes in the picture: Grafana's 24-column grid turned into pixels (pure).

Sizes are multiples of 32 px and the figure is drawn at 64 dpi, so inches are exact binary fractions and
the PNG has exactly the size computed here (tests compare the two).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

COLUMNS = 24
COLUMN_PX = 64
ROW_PX = 32
HEADER_PX = 64  # the dashboard's title and time range above the grid
GAP_PX = 4  # between neighbouring panels, each side
DPI = 64


@dataclass(frozen=True)
class Box:
    """A panel's rectangle in pixels, from the top left of the picture."""

    x: int
    y: int
    w: int
    h: int


@dataclass(frozen=True)
class Placed:
    panel: dict[str, Any]
    box: Box


def _grid(panel: dict[str, Any]) -> tuple[int, int, int, int]:
    grid = panel.get("gridPos") if isinstance(panel.get("gridPos"), dict) else {}
    assert isinstance(grid, dict)

    def number(key: str, default: int) -> int:
        value = grid.get(key, default)
        return int(value) if isinstance(value, (int, float)) else default

    x = min(max(number("x", 0), 0), COLUMNS - 1)
    w = min(max(number("w", 12), 1), COLUMNS - x)
    return x, max(number("y", 0), 0), w, max(number("h", 8), 1)


def box_of(panel: dict[str, Any]) -> Box:
    """The panel's pixels, inset by the gap so neighbours do not touch."""
    x, y, w, h = _grid(panel)
    return Box(x * COLUMN_PX + GAP_PX, HEADER_PX + y * ROW_PX + GAP_PX, w * COLUMN_PX - 2 * GAP_PX,
               h * ROW_PX - 2 * GAP_PX)


def visible_panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Top-level panels as Grafana shows them on load: a collapsed row keeps its panels inside, hidden."""
    for panel in dashboard.get("panels") or []:
        if isinstance(panel, dict):
            yield panel


def place(dashboard: dict[str, Any]) -> list[Placed]:
    return [Placed(panel, box_of(panel)) for panel in visible_panels(dashboard)]


def grid_rows(dashboard: dict[str, Any]) -> int:
    """Grid units from the top to the bottom edge of the lowest panel (at least one)."""
    bottoms = [y + h for (_, y, _, h) in (_grid(p) for p in visible_panels(dashboard))]
    return max([1, *bottoms])


def canvas_size(dashboard: dict[str, Any]) -> tuple[int, int]:
    """(width, height) of the dashboard's picture in pixels."""
    return COLUMNS * COLUMN_PX, HEADER_PX + grid_rows(dashboard) * ROW_PX
