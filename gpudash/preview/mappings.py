"""A field's value mappings as Grafana applies them before the unit (pure): the first that matches wins.

Grafana's getValueMappingResult: `value` maps a value's text, `range` a number within [from, to], `special`
null / NaN / empty / true / false, `regex` a text matching a pattern.
"""

from __future__ import annotations

import math
import re
from typing import Any

from gpudash.preview.panel import as_dict, number


def _text(value: Any) -> str:
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        return str(int(value))  # JavaScript's String(1.0) is "1"
    return str(value)


def _special(match: Any, value: Any) -> bool:
    blank = value is None or value == "" or (isinstance(value, float) and math.isnan(value))
    return {"null": value is None, "nan": isinstance(value, float) and math.isnan(value),
            "null+nan": blank and value != "", "empty": value == "", "true": value is True,
            "false": value is False}.get(str(match), False)


def _matches(mapping: dict[str, Any], value: Any) -> dict[str, Any] | None:
    options, kind = as_dict(mapping.get("options")), mapping.get("type")
    if kind == "value" and value is not None:
        found = options.get(_text(value))
        return as_dict(found) if found is not None else None
    if kind == "range":
        try:
            v = float(value)
        except (TypeError, ValueError):
            return None
        low, high = number(options.get("from")), number(options.get("to"))
        if math.isnan(v) or (low is None and high is None):
            return None
        if (low is None or v >= low) and (high is None or v <= high):
            return as_dict(options.get("result"))
        return None
    if kind == "special":
        return as_dict(options.get("result")) if _special(options.get("match"), value) else None
    if kind == "regex" and value is not None:
        pattern = str(options.get("pattern") or "")
        return as_dict(options.get("result")) if pattern and re.search(pattern, _text(value)) else None
    return None


def mapped_text(mappings: Any, value: Any) -> str | None:
    """The text the first matching mapping gives `value`, or None (then the unit writes it)."""
    for mapping in mappings if isinstance(mappings, list) else []:
        result = _matches(as_dict(mapping), value)
        if result is not None:  # the first match wins, even one that only sets a colour
            return None if result.get("text") is None else str(result["text"])
    return None
