"""What Grafana itself changes in a dashboard's JSON, undone the same way on both sides before comparing.

shared/reference/grafana-13-apis.md §3: a write through /apis v1 runs the schema migrations to 42, and
an unchanged save in the dashboard editor of 12.2+/13 also stamps every panel with `pluginVersion`, fills
in the panel plugins' defaults, gives stat/gauge/bargauge percent panels explicit bounds, moves the table
footer, drops every null and the timepicker keys equal to the defaults. None of that is a person's
edit, and none of it depends on which schemaVersion gpudash writes: `grafana_normalised` applies each
step where it has not been applied yet (every step is idempotent), then drops what is Grafana's
(schemaVersion, pluginVersion), so a dashboard as gpudash wrote it and as Grafana saved it compare equal.
A moved threshold, a changed query or unit stays a difference.

The plugin defaults are the ones Grafana fills in where a panel leaves them out; the reference could not
extract the full set (plugin- and version-specific), so a default missing here shows as a difference:
the safe side (a sync refuses; --force writes).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

_REDUCE = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}, "orientation": "auto"}
# plugin id -> what the editor fills in where a panel has no value (options and fieldConfig, merged under)
PLUGIN_DEFAULTS: dict[str, dict[str, Any]] = {
    "timeseries": {"options": {"legend": {"calcs": [], "displayMode": "list", "placement": "bottom",
                                          "showLegend": True},
                               "tooltip": {"mode": "single", "sort": "none"}},
                   "fieldConfig": {"defaults": {"color": {"mode": "palette-classic"}, "mappings": []}}},
    "stat": {"options": {**_REDUCE, "colorMode": "value", "graphMode": "area", "justifyMode": "auto",
                         "textMode": "auto", "wideLayout": True, "showPercentChange": False},
             "fieldConfig": {"defaults": {"mappings": []}}},
    "gauge": {"options": {**_REDUCE, "showThresholdLabels": False, "showThresholdMarkers": True,
                          "sizing": "auto", "minVizHeight": 75, "minVizWidth": 75},
              "fieldConfig": {"defaults": {"mappings": []}}},
    "bargauge": {"options": {**_REDUCE, "displayMode": "gradient", "valueMode": "color", "namePlacement": "auto",
                             "showUnfilled": True, "sizing": "auto", "minVizHeight": 16, "minVizWidth": 8,
                             "maxVizHeight": 300},
                 "fieldConfig": {"defaults": {"mappings": []}}},
    "table": {"options": {"cellHeight": "sm", "showHeader": True},
              "fieldConfig": {"defaults": {"custom": {"align": "auto", "cellOptions": {"type": "auto"},
                                                      "inspect": False}, "mappings": []}}},
    "heatmap": {"options": {"cellGap": 1, "showValue": "auto", "tooltip": {"mode": "single", "yHistogram": False}},
                "fieldConfig": {"defaults": {"custom": {"hideFrom": {"legend": False, "tooltip": False,
                                                                     "viz": False}}}}},
    "state-timeline": {"options": {"alignValue": "left", "mergeValues": True, "rowHeight": 0.9, "showValue": "auto",
                                   "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True}},
                       "fieldConfig": {"defaults": {"mappings": []}}},
}
# the single-stat migration (<8.0 step) writes these bounds where a percent panel has none
PERCENT_BOUNDS = {"percent": {"min": 0, "max": 100}, "percentunit": {"max": 1}}
SINGLE_STAT = frozenset({"stat", "gauge", "bargauge"})
DEFAULT_TIMEPICKER: dict[str, Any] = {
    "hidden": False, "refresh_intervals": ["5s", "10s", "30s", "1m", "5m", "15m", "30m", "1h", "2h", "1d"]}
GRAFANA_OWNED = ("schemaVersion",)  # top level: what Grafana rewrites on every save
PANEL_GRAFANA_OWNED = ("pluginVersion",)


def without_nulls(value: Any) -> Any:
    """A copy without the null members of any object (the editor's sortedDeepCloneWithoutNulls; arrays keep
    their nulls)."""
    if isinstance(value, dict):
        return {key: without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [without_nulls(item) for item in value]
    return value


def _filled(defaults: dict[str, Any], value: dict[str, Any]) -> dict[str, Any]:
    """`value`, changed in place: `defaults` filled in under it, key by key (a value that is not an object wins
    as it is). Walks the defaults, not the panel, so a large panel costs no more than a small one."""
    for key, default in defaults.items():
        if key not in value:
            value[key] = copy.deepcopy(default)
        elif isinstance(default, dict) and isinstance(value[key], dict):
            _filled(default, value[key])
    return value


def panels_of(panels: Any) -> Iterator[dict[str, Any]]:
    """Every panel, the panels of collapsed rows included."""
    for panel in panels if isinstance(panels, list) else []:
        if isinstance(panel, dict):
            yield panel
            yield from panels_of(panel.get("panels"))


def _dict_at(parent: dict[str, Any], key: str) -> dict[str, Any]:
    child = parent.get(key)
    if not isinstance(child, dict):
        child = {}
        parent[key] = child
    return child


def _hide_from_tooltip(panel: dict[str, Any]) -> None:
    """Schema 42: an override hiding a series from the visualisation hides it from the tooltip too."""
    overrides = panel.get("fieldConfig", {}).get("overrides") if isinstance(panel.get("fieldConfig"), dict) else None
    for override in overrides if isinstance(overrides, list) else []:
        for prop in override.get("properties", []) if isinstance(override, dict) else []:
            value = prop.get("value") if isinstance(prop, dict) else None
            if prop.get("id") == "custom.hideFrom" and isinstance(value, dict) and value.get("viz") is True:
                value["tooltip"] = True


def _table_footer(panel: dict[str, Any], field: dict[str, Any]) -> None:
    """Footer v2 (TableNG, 12.2): options.footer's reducers move into the field config."""
    options = panel.get("options")
    footer = options.get("footer") if isinstance(options, dict) else None
    if not isinstance(footer, dict) or set(footer) <= {"enablePagination"}:
        return
    assert isinstance(options, dict)
    if footer.get("show") and isinstance(footer.get("reducer"), list):
        _dict_at(_dict_at(field, "custom"), "footer")["reducers"] = list(footer["reducer"])
    if footer.get("enablePagination"):
        options["footer"] = {"enablePagination": True}
    else:
        del options["footer"]


def _panel(panel: dict[str, Any]) -> None:
    for key in PANEL_GRAFANA_OWNED:
        panel.pop(key, None)
    _hide_from_tooltip(panel)
    kind = str(panel.get("type", ""))
    if kind == "row":
        return
    defaults = PLUGIN_DEFAULTS.get(kind, {})
    for key in ("options", "fieldConfig"):
        if key in defaults:
            _filled(defaults[key], _dict_at(panel, key))
    field = _dict_at(_dict_at(panel, "fieldConfig"), "defaults")
    if kind in SINGLE_STAT:
        for key, bound in PERCENT_BOUNDS.get(str(field.get("unit", "")), {}).items():
            field.setdefault(key, bound)
    if kind == "table":
        _table_footer(panel, field)


def normalise_panel(panel: dict[str, Any]) -> None:
    """One panel as `grafana_normalised` leaves it, in place (a v2 element's panel goes through here too)."""
    _panel(panel)


def grafana_normalised(dashboard: dict[str, Any]) -> dict[str, Any]:
    """A new dashboard, as Grafana would store it after migrating and saving it unchanged, less what Grafana
    owns (schemaVersion, each panel's pluginVersion). The argument is not changed."""
    return normalise_owned_copy(without_nulls(dashboard))


def normalise_owned_copy(body: dict[str, Any]) -> dict[str, Any]:
    """`grafana_normalised` in place, for a copy the caller owns whose objects have no null members."""
    for key in GRAFANA_OWNED:
        body.pop(key, None)
    if not isinstance(body.get("refresh"), str):  # schema 40
        body["refresh"] = ""
    timepicker = body.get("timepicker")
    if isinstance(timepicker, dict):  # schema 41, and the editor's default keys
        timepicker.pop("time_options", None)
        for key, value in DEFAULT_TIMEPICKER.items():
            if timepicker.get(key) == value:
                del timepicker[key]
        if not timepicker:
            del body["timepicker"]
    for panel in panels_of(body.get("panels")):
        _panel(panel)
    return body
