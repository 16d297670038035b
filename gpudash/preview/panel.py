"""Reading a panel's JSON without tripping on missing or mistyped parts (pure)."""

from __future__ import annotations

from typing import Any


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def defaults(panel: dict[str, Any]) -> dict[str, Any]:
    """fieldConfig.defaults: unit, min, max, thresholds, mappings, noValue, custom."""
    return as_dict(as_dict(panel.get("fieldConfig")).get("defaults"))


def options(panel: dict[str, Any]) -> dict[str, Any]:
    return as_dict(panel.get("options"))


def number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
