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


def column_units(panel: dict[str, Any], header: list[str]) -> list[str | None]:
    """Each column's unit: a by-name override's, else the panel's."""
    units: dict[str, str] = {}
    for override in as_dict(panel.get("fieldConfig")).get("overrides") or []:
        matcher = as_dict(as_dict(override).get("matcher"))
        if matcher.get("id") != "byName":
            continue
        for prop in as_dict(override).get("properties") or []:
            if as_dict(prop).get("id") == "unit":
                units[str(matcher.get("options"))] = str(prop.get("value"))
    default = defaults(panel).get("unit")
    return [units.get(name, default) for name in header]
