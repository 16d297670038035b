"""What Grafana itself does to a dashboard's JSON: the backend migrations to schemaVersion 42 and a UI save.

shared/reference/grafana-13-apis.md §3: a `v1` write (and a `v1` read of a dashboard stored through the
legacy /api) runs the schema migrations 40-42; a save from the dashboard editor also stamps every panel
with `pluginVersion`, fills in the panel plugins' defaults, drops nulls and default timepicker keys, and
keeps only the keys of the frontend's dashboard model. The full default set of each plugin is not known
(the reference marks it unconfirmed): the table below is the stand-in's assumption, a plausible subset.
It is deliberately not imported from gpudash.compare.normalise, which undoes the same defaults: this is the
Grafana side of the tests, and an unchanged UI save comparing equal (tests/e2e/test_sync_apis.py) is what
shows that gpudash's table covers what this Grafana fills in.
"""

from __future__ import annotations

import copy
from typing import Any

LATEST_SCHEMA = 42
DEFAULT_REFRESH_INTERVALS = ["5s", "10s", "30s", "1m", "5m", "15m", "30m", "1h", "2h", "1d"]
DEFAULT_TIMEPICKER: dict[str, Any] = {"hidden": False, "refresh_intervals": DEFAULT_REFRESH_INTERVALS}
# Keys the frontend's dashboard model holds; a UI save writes only these.
UI_MODEL_KEYS = frozenset({
    "id", "uid", "title", "description", "tags", "style", "timezone", "editable", "graphTooltip", "time",
    "timepicker", "templating", "annotations", "refresh", "schemaVersion", "version", "links", "gnetId",
    "panels", "fiscalYearStartMonth", "liveNow", "weekStart",
})
_REDUCE = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}, "orientation": "auto"}
# plugin id -> the defaults the editor fills in where a panel leaves them out (stand-in assumption)
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
SINGLE_STAT = ("stat", "gauge", "bargauge")


def _panels(panels: Any) -> list[dict[str, Any]]:
    """Every panel, the panels of collapsed rows included."""
    out: list[dict[str, Any]] = []
    for panel in panels if isinstance(panels, list) else []:
        if isinstance(panel, dict):
            out.append(panel)
            out += _panels(panel.get("panels"))
    return out


def backend_migrate(spec: dict[str, Any]) -> dict[str, Any]:
    """The v40-v42 schema migrations (v40.go, v41.go, v42.go), on a copy."""
    out = copy.deepcopy(spec)
    version = out.get("schemaVersion") if isinstance(out.get("schemaVersion"), int) else 0
    if version < 40 and not isinstance(out.get("refresh"), str):
        out["refresh"] = ""
    if version < 41 and isinstance(out.get("timepicker"), dict):
        out["timepicker"].pop("time_options", None)
    if version < 42:
        for panel in _panels(out.get("panels")):
            overrides = panel.get("fieldConfig", {}).get("overrides") if isinstance(panel.get("fieldConfig"),
                                                                                    dict) else None
            for override in overrides if isinstance(overrides, list) else []:
                for prop in override.get("properties", []) if isinstance(override, dict) else []:
                    value = prop.get("value") if isinstance(prop, dict) else None
                    if prop.get("id") == "custom.hideFrom" and isinstance(value, dict) and value.get("viz") is True:
                        value["tooltip"] = True
    if version < LATEST_SCHEMA:
        out["schemaVersion"] = LATEST_SCHEMA
    return out


def _under(defaults: Any, value: Any) -> Any:
    """`value` with `defaults` filled in where it has no key (dicts only; anything else is kept as it is)."""
    if not isinstance(defaults, dict) or not isinstance(value, dict):
        return copy.deepcopy(value)
    merged = {key: copy.deepcopy(item) for key, item in defaults.items() if key not in value}
    merged.update({key: _under(defaults.get(key), item) for key, item in value.items()})
    return merged


def _without_nulls(value: Any) -> Any:
    """sortedDeepCloneWithoutNulls: the null members of objects dropped (array items are kept, nulls too)."""
    if isinstance(value, dict):
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_without_nulls(item) for item in value]
    return value


def _panel_as_editor_saves(panel: dict[str, Any], server_version: str) -> None:
    kind = str(panel.get("type", ""))
    if kind == "row":
        return
    defaults = PLUGIN_DEFAULTS.get(kind, {})
    for key in ("options", "fieldConfig"):
        if key in defaults:
            panel[key] = _under(defaults[key], panel.get(key, {}))
    field = panel.setdefault("fieldConfig", {}).setdefault("defaults", {})
    if kind in SINGLE_STAT:  # the <8.0 single-stat migration step: explicit bounds on percent units
        if field.get("unit") == "percent":
            field.setdefault("min", 0)
            field.setdefault("max", 100)
        elif field.get("unit") == "percentunit":
            field.setdefault("max", 1)
    footer = panel.get("options", {}).get("footer") if kind == "table" else None
    if isinstance(footer, dict):  # footer v2 (TableNG, 12.2): reducers move into the field config
        if footer.get("show") and footer.get("reducer"):
            field.setdefault("custom", {}).setdefault("footer", {})["reducers"] = list(footer["reducer"])
        if footer.get("enablePagination"):
            panel["options"]["footer"] = {"enablePagination": True}
        else:
            del panel["options"]["footer"]
    panel["pluginVersion"] = server_version


def ui_save_model(stored: dict[str, Any], server_version: str) -> dict[str, Any]:
    """The JSON the dashboard editor saves for `stored` when a person changes nothing."""
    model = {key: value for key, value in backend_migrate(stored).items() if key in UI_MODEL_KEYS}
    for panel in _panels(model.get("panels")):
        _panel_as_editor_saves(panel, server_version)
    timepicker = model.get("timepicker")
    if isinstance(timepicker, dict):
        for key, value in DEFAULT_TIMEPICKER.items():
            if timepicker.get(key) == value:
                del timepicker[key]
        if not timepicker:
            del model["timepicker"]
    model["schemaVersion"] = LATEST_SCHEMA
    return dict(_without_nulls(model))


def set_threshold(dashboard: dict[str, Any], value: float) -> None:
    """A person moving the first non-base threshold step of every panel that has one."""
    for panel in _panels(dashboard.get("panels")):
        steps = panel.get("fieldConfig", {}).get("defaults", {}).get("thresholds", {}).get("steps")
        if isinstance(steps, list) and len(steps) > 1 and isinstance(steps[1], dict):
            steps[1]["value"] = value


def set_threshold_v2(spec: dict[str, Any], value: float) -> None:
    """`set_threshold` in a v2 spec: the first non-base step of every element's field config that has one."""
    for element in (spec.get("elements") or {}).values():
        viz = element.get("spec", {}).get("vizConfig", {}).get("spec", {})
        steps = viz.get("fieldConfig", {}).get("defaults", {}).get("thresholds", {}).get("steps")
        if isinstance(steps, list) and len(steps) > 1 and isinstance(steps[1], dict):
            steps[1]["value"] = value
