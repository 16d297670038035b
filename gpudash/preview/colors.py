"""Grafana's colours: named palette, threshold steps, the classic series palette (pure, tables as data)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from gpudash.preview.panel import as_dict, defaults

# Grafana's dark theme (packages/grafana-data/src/themes/palette + visualization colours).
NAMED: dict[str, str] = {
    "green": "#73BF69", "dark-green": "#37872D", "semi-dark-green": "#56A64B", "light-green": "#96D98D",
    "super-light-green": "#C8F2C2",
    "yellow": "#FADE2A", "dark-yellow": "#E0B400", "semi-dark-yellow": "#F2CC0C", "light-yellow": "#FFEE52",
    "super-light-yellow": "#FFF899",
    "red": "#F2495C", "dark-red": "#C4162A", "semi-dark-red": "#E02F44", "light-red": "#FF7383",
    "super-light-red": "#FFA6B0",
    "orange": "#FF9830", "dark-orange": "#FA6400", "semi-dark-orange": "#FF780A", "light-orange": "#FFB357",
    "super-light-orange": "#FFCB7D",
    "blue": "#5794F2", "dark-blue": "#1F60C4", "semi-dark-blue": "#3274D9", "light-blue": "#8AB8FF",
    "super-light-blue": "#C0D8FF",
    "purple": "#B877D9", "dark-purple": "#8F3BB8", "semi-dark-purple": "#A352CC", "light-purple": "#CA95E5",
    "super-light-purple": "#DEB6F2",
    "text": "#CCCCDC", "white": "#FFFFFF", "black": "#000000", "transparent": "#181B1F",
}
CLASSIC = ("#7EB26D", "#EAB839", "#6ED0E0", "#EF843C", "#E24D42", "#1F78C1", "#BA43A9", "#705DA0", "#508642",
           "#CCA300", "#447EBC", "#C15C17", "#890F02", "#0A437C", "#6D1F62", "#584477")
BACKGROUND = "#111217"
PANEL = "#181B1F"
BORDER = "#2A2D33"
TEXT = "#CCCCDC"
MUTED = "#8E8E99"
DEFAULT = NAMED["green"]  # a panel without thresholds


def hex_color(name: Any) -> str:
    """A Grafana colour (a name, `#rrggbb` or `rgb(a)(...)`) as `#RRGGBB`; unknown names are the text colour."""
    text = str(name or "").strip()
    if text.startswith("#") and len(text) in (4, 7, 9):
        return text[:7].upper() if len(text) != 4 else "#" + "".join(c * 2 for c in text[1:]).upper()
    if text.startswith("rgb"):
        parts = [p.strip() for p in text[text.find("(") + 1: text.find(")")].split(",")][:3]
        try:
            return "#" + "".join(f"{min(255, max(0, int(float(p)))):02X}" for p in parts)
        except ValueError:
            return TEXT
    return NAMED.get(text, TEXT)


def _steps(panel: dict[str, Any]) -> tuple[str, Sequence[Any]]:
    thresholds = as_dict(defaults(panel).get("thresholds"))
    steps = thresholds.get("steps")
    return str(thresholds.get("mode") or "absolute"), steps if isinstance(steps, list) else []


def threshold_color(panel: dict[str, Any], value: float | None, low: float = 0.0, high: float = 100.0) -> str:
    """The colour of `value` by the panel's threshold steps: the last step at or below it (base: -inf).

    In percentage mode a step's value is a percentage of [low, high] (the panel's min and max).
    """
    mode, steps = _steps(panel)
    if not steps:
        return DEFAULT
    color = hex_color(steps[0].get("color") if isinstance(steps[0], dict) else None)
    if value is None or math.isnan(value):
        return color
    for step in steps:
        if not isinstance(step, dict):
            continue
        at = step.get("value")
        if at is None:
            color = hex_color(step.get("color"))
            continue
        limit = low + (high - low) * float(at) / 100 if mode == "percentage" else float(at)
        if value >= limit:
            color = hex_color(step.get("color"))
    return color


def threshold_marks(panel: dict[str, Any], low: float, high: float) -> list[tuple[float, float, str]]:
    """(from, to, colour) bands of the steps within [low, high], for a gauge's outer ring."""
    mode, steps = _steps(panel)
    edges: list[tuple[float, str]] = []
    for step in steps:
        if not isinstance(step, dict):
            continue
        at = step.get("value")
        start = low if at is None else (low + (high - low) * float(at) / 100 if mode == "percentage" else float(at))
        edges.append((min(max(start, low), high), hex_color(step.get("color"))))
    if not edges:
        return [(low, high, DEFAULT)]
    return [(start, edges[i + 1][0] if i + 1 < len(edges) else high, color)
            for i, (start, color) in enumerate(edges) if (edges[i + 1][0] if i + 1 < len(edges) else high) > start]


def series_color(index: int) -> str:
    return CLASSIC[index % len(CLASSIC)]
