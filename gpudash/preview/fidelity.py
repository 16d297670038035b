"""Which panels the preview draws only approximately, and why (pure).

The preview follows Grafana's display code for the steps and units the dashboards use, and the tests hold its
tables, gauges and bar gauges against @grafana/data (tests/e2e/test_grafana_display.py). A panel of another
kind of drawing, or one using a step or unit the preview does not follow, is drawn as near as it can, with a
note saying so in its title bar, rather than passed off as what Grafana shows.
"""

from __future__ import annotations

from typing import Any

from gpudash.preview.panel import as_dict
from gpudash.preview.units import UNITS

# Drawn by gpudash's own stand-in for Grafana's component: colours and buckets as near as it can.
STAND_INS = {"heatmap": "heatmap", "state-timeline": "state timeline", "status-history": "status history"}
# Transformations the preview applies as Grafana does (options beyond these are noted below).
FOLLOWED = {"reduce", "sortBy", "organize", "merge", "joinByField", "filterByValue"}
_NULL_TESTS = {"isNull", "isNotNull"}
_OTHER_UNITS = {"string", "dateTimeFromNow"}


def _unfollowed_step(step: dict[str, Any]) -> str | None:
    kind, options = str(step.get("id")), as_dict(step.get("options"))
    if kind not in FOLLOWED:
        return f"transformation {kind}"
    if kind == "reduce" and options.get("mode", "seriesToRows") != "seriesToRows":
        return "reduce by series"
    if kind == "filterByValue" and any(as_dict(f.get("config")).get("id") not in _NULL_TESTS
                                       for f in options.get("filters") or []):
        return "filterByValue condition"
    if kind == "joinByField" and options.get("mode", "outer") != "outer":
        return f"joinByField mode {options.get('mode')}"
    return None


def _units(panel: dict[str, Any]) -> list[str]:
    field_config = as_dict(panel.get("fieldConfig"))
    found = [as_dict(field_config.get("defaults")).get("unit")]
    for override in field_config.get("overrides") or []:
        found += [p.get("value") for p in as_dict(override).get("properties") or [] if as_dict(p).get("id") == "unit"]
    return [str(u) for u in found if u]


def _known(unit: str) -> bool:
    kind, _, custom = unit.partition(":")
    return unit in UNITS or unit in _OTHER_UNITS or bool(custom and kind in ("suffix", "prefix"))


def approximation(panel: dict[str, Any]) -> str | None:
    """Why the preview's drawing of `panel` is only near what Grafana shows, or None when it follows it."""
    kind = str(panel.get("type") or "")
    if kind in STAND_INS:
        return f"approximate: {STAND_INS[kind]} drawn by gpudash"
    reasons = [r for r in (_unfollowed_step(as_dict(s)) for s in panel.get("transformations") or []) if r]
    reasons += [f"unit {u}" for u in _units(panel) if not _known(u)]
    return f"approximate: {', '.join(reasons)} not followed" if reasons else None
