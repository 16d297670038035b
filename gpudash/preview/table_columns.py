"""Where a table's columns go and what each fits, as Grafana's table lays them out (pure).

A column is as wide as its `custom.width` override; the others share what is left equally, none narrower
than its `custom.minWidth` (150 px by default), so a table of many columns runs past the panel's right edge,
where Grafana scrolls it. A header or cell text wider than its column is cut and ends in "…", as Grafana's
table cuts it. Text widths come from a `measure` function (the canvas's font metrics when drawing).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gpudash.preview.panel import as_dict, column_setting, defaults, number

DEFAULT_MIN_WIDTH = 150.0  # Grafana's table (TableNG): an auto-sized column is at least this wide
PADDING_PX = 6.0  # between a column's edge and its text, each side
ELLIPSIS = "…"

Measure = Callable[[str], float]


@dataclass(frozen=True)
class Column:
    """One column's place in pixels from the table's left edge, and its header as it fits."""

    x: float
    w: float
    header: str

    @property
    def text_w(self) -> float:
        """The width its texts may take."""
        return max(0.0, self.w - 2 * PADDING_PX)


def column_widths(panel: dict[str, Any], header: Sequence[str], available: float) -> list[float]:
    """Each column's width: its `custom.width`, else an equal share of the width the others leave, at least its
    `custom.minWidth` (Grafana's computeColWidths)."""
    custom = as_dict(defaults(panel).get("custom"))
    fixed = [number(w) or 0.0 for w in column_setting(panel, list(header), "custom.width", custom.get("width"))]
    minimum = [number(w) or DEFAULT_MIN_WIDTH
               for w in column_setting(panel, list(header), "custom.minWidth", custom.get("minWidth"))]
    auto = sum(1 for w in fixed if not w)
    share = (available - sum(fixed)) / auto if auto else 0.0
    return [w or max(low, share) for w, low in zip(fixed, minimum, strict=True)]


def fitted(text: str, width: float, measure: Measure) -> str:
    """`text` if it fits in `width`, else its longest beginning that fits with "…" after it ("" if not even
    "…" fits)."""
    if measure(text) <= width:
        return text
    low, high = 0, len(text)  # the longest prefix that fits with the ellipsis: binary search on its length
    while low < high:
        mid = (low + high + 1) // 2
        if measure(text[:mid].rstrip() + ELLIPSIS) <= width:
            low = mid
        else:
            high = mid - 1
    cut = text[:low].rstrip() + ELLIPSIS
    return cut if measure(cut) <= width else ""


def layout(panel: dict[str, Any], header: Sequence[str], available: float, measure: Measure) -> list[Column]:
    """The columns that show within `available` pixels (the last one cut at the edge), each header fitted."""
    columns: list[Column] = []
    x = 0.0
    for name, width in zip(header, column_widths(panel, header, available), strict=True):
        if x >= available:
            break
        w = min(width, available - x)
        columns.append(Column(x, w, fitted(name, w - 2 * PADDING_PX, measure)))
        x += width
    return columns
