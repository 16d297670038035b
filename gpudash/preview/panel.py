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


_PANEL = object()


def column_setting(panel: dict[str, Any], header: list[str], key: str, fallback: Any = _PANEL) -> list[Any]:
    """Each column's `key` setting (unit, noValue, mappings): a by-name override's, else `fallback` (default:
    the panel's)."""
    found: dict[str, Any] = {}
    for override in as_dict(panel.get("fieldConfig")).get("overrides") or []:
        matcher = as_dict(as_dict(override).get("matcher"))
        if matcher.get("id") != "byName":
            continue
        for prop in as_dict(override).get("properties") or []:
            if as_dict(prop).get("id") == key:
                found[str(matcher.get("options"))] = prop.get("value")
    default = defaults(panel).get(key) if fallback is _PANEL else fallback
    return [found.get(name, default) for name in header]


def column_units(panel: dict[str, Any], header: list[str]) -> list[str | None]:
    """Each column's unit: a by-name override's, else the panel's."""
    return column_setting(panel, header, "unit")


def type_setting(panel: dict[str, Any], field_type: str, key: str) -> Any:
    """The `key` setting of fields of one type (`string`, `number`): a by-type override's, else the panel's."""
    for override in as_dict(panel.get("fieldConfig")).get("overrides") or []:
        matcher = as_dict(as_dict(override).get("matcher"))
        if matcher.get("id") == "byType" and matcher.get("options") == field_type:
            for prop in as_dict(override).get("properties") or []:
                if as_dict(prop).get("id") == key:
                    return prop.get("value")
    return defaults(panel).get(key)
