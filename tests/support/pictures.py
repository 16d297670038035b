"""Reading previews back: a PNG's size, and the colour a panel is drawn in at its place."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
from matplotlib.image import imread

from gpudash.preview.pixels import Box


def read_png(path: Path) -> np.ndarray:
    """(height, width, 4) uint8, as the preview drew it."""
    pixels = imread(path)
    return (pixels * 255).round().astype(np.uint8) if pixels.dtype != np.uint8 else pixels


def hex_of(pixel: np.ndarray) -> str:
    return "#" + "".join(f"{int(c):02X}" for c in pixel[:3])


def dominant_color(pixels: np.ndarray, box: Box) -> str:
    """The most common coloured (not grey) colour inside `box`: the threshold colour a value is drawn in.

    Greys are the panel, its border, the title and the anti-aliased edges between them.
    """
    area = pixels[box.y: box.y + box.h, box.x: box.x + box.w, :3].reshape(-1, 3).astype(int)
    coloured = area[(area.max(axis=1) - area.min(axis=1)) >= GREY_CHROMA]
    counts = Counter(hex_of(p) for p in coloured)
    if not counts:
        raise AssertionError(f"nothing but greys in {box}")
    return counts.most_common(1)[0][0]


GREY_CHROMA = 40
