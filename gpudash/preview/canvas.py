"""A figure sized in pixels: one board in pixel coordinates for frames, text, bars and arcs, and real
axes only where a panel plots over time (matplotlib, Agg: no display needed).

Axes are what make matplotlib slow (each builds its ticks), so everything that is not a plot is drawn
on the board: a dashboard of 35 panels draws in about a second instead of three.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")  # before pyplot: a preview never opens a window, with or without a display

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.patches import Polygon, Rectangle, Wedge

from gpudash.preview.colors import BACKGROUND, MUTED, TEXT
from gpudash.preview.pixels import DPI, Box

FONT = "DejaVu Sans"


def pt(px: float) -> float:
    """Font size in points for a height in pixels at the preview's dpi."""
    return px * 72 / DPI


class Canvas:
    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.figure = Figure(figsize=(width / DPI, height / DPI), dpi=DPI, facecolor=BACKGROUND)
        self.board = self.figure.add_axes((0, 0, 1, 1))
        self.board.set_axis_off()
        self.board.set_xlim(0, width)
        self.board.set_ylim(height, 0)  # y grows downwards, as in gridPos
        self.board.set_zorder(0)
        self._renderer = FigureCanvasAgg(self.figure).get_renderer()  # measures text as the picture draws it

    def axes(self, box: Box) -> Axes:
        """A plot's axes filling `box` (pixels from the top left), styled as Grafana's."""
        rect = (box.x / self.width, 1 - (box.y + box.h) / self.height, box.w / self.width, box.h / self.height)
        ax = self.figure.add_axes(rect)
        ax.set_facecolor("none")
        ax.set_zorder(1)
        ax.tick_params(colors=MUTED, labelsize=pt(11), length=0, pad=2)
        for spine in ax.spines.values():
            spine.set_visible(False)
        ax.grid(True, color="#2A2D33", linewidth=0.8)
        ax.set_axisbelow(True)
        return ax

    def text(self, x: float, y: float, text: str, size_px: float, color: str = TEXT, **kwargs: Any) -> None:
        """Text at pixel (x, y) from the top left."""
        self.board.text(x, y, text, fontsize=pt(size_px), color=color, family=FONT, clip_on=False, **kwargs)

    def text_width(self, text: str, size_px: float, bold: bool = False) -> float:
        """How many pixels `text` takes drawn at `size_px` (as `text` draws it)."""
        font = FontProperties(family=FONT, size=pt(size_px), weight="bold" if bold else "normal")
        width, _, _ = self._renderer.get_text_width_height_descent(text, font, ismath=False)
        return float(width)

    def rect(self, box: Box, color: str, **kwargs: Any) -> None:
        self.board.add_patch(Rectangle((box.x, box.y), box.w, box.h, facecolor=color, **{"linewidth": 0, **kwargs}))

    def arc(self, cx: float, cy: float, radius: float, width: float, start: float, end: float, color: str) -> None:
        """A ring segment from `start` to `end` degrees, counter-clockwise as seen (0 = right, 90 = up)."""
        # The board's y axis points down, which mirrors angles: seen angle a is -a on the board.
        self.board.add_patch(Wedge((cx, cy), radius, -end, -start, width=width, facecolor=color, linewidth=0))

    def area(self, xs: Sequence[float], ys: Sequence[float], base: float, color: str, alpha: float) -> None:
        points = [(xs[0], base), *zip(xs, ys, strict=True), (xs[-1], base)]
        self.board.add_patch(Polygon(points, closed=True, facecolor=color, alpha=alpha, linewidth=0))
        self.board.plot(xs, ys, color=color, linewidth=1)

    def pixels(self) -> np.ndarray:
        """The drawn picture as an (height, width, 4) uint8 array."""
        agg = FigureCanvasAgg(self.figure)
        agg.draw()
        return np.asarray(agg.buffer_rgba()).copy()
