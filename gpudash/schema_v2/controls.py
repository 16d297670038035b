"""The dashboard's controls in schema v2: variables, annotations, links and time settings.

Classic JSON writes hide, refresh and sort as numbers; v2 names them. The tables below are Grafana's own
mapping (its v1 -> v2 conversion), kept as data.
"""

from __future__ import annotations

from typing import Any

from gpudash.errors import ConfigError
from gpudash.schema_v2.elements import data_query

HIDE = {0: "dontHide", 1: "hideLabel", 2: "hideVariable"}
REFRESH = {0: "never", 1: "onDashboardLoad", 2: "onTimeRangeChanged"}
SORT = {0: "disabled", 1: "alphabeticalAsc", 2: "alphabeticalDesc", 3: "numericalAsc", 4: "numericalDesc",
        5: "alphabeticalCaseInsensitiveAsc", 6: "alphabeticalCaseInsensitiveDesc", 7: "naturalAsc",
        8: "naturalDesc"}
CURSOR_SYNC = {0: "Off", 1: "Crosshair", 2: "Tooltip"}
# Grafana's time picker's refresh choices when a dashboard names none of its own.
AUTO_REFRESH_INTERVALS = ("5s", "10s", "30s", "1m", "5m", "15m", "30m", "1h", "2h", "1d")
# Annotation keys that are the annotation's own in v2; the rest of a classic annotation is the data source's.
_ANNOTATION_KEYS = ("datasource", "enable", "hide", "iconColor", "name", "builtIn", "target", "filter")


def _common(var: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {"name": var["name"], "hide": HIDE.get(var.get("hide", 0), "dontHide"),
                            "skipUrlSync": bool(var.get("skipUrlSync", False))}
    for key in ("label", "description"):
        if var.get(key):
            spec[key] = var[key]
    return spec


def _current(var: dict[str, Any]) -> dict[str, Any]:
    current = var.get("current") or {}
    option = {"text": current.get("text", ""), "value": current.get("value", "")}
    if "selected" in current:
        option["selected"] = current["selected"]
    return option


def _choices(var: dict[str, Any]) -> dict[str, Any]:
    spec = {"multi": bool(var.get("multi", False)), "includeAll": bool(var.get("includeAll", False)),
            "allowCustomValue": bool(var.get("allowCustomValue", True)),
            "options": list(var.get("options") or []), "current": _current(var)}
    if var.get("allValue"):
        spec["allValue"] = var["allValue"]
    return spec


def variable(var: dict[str, Any], where: str) -> dict[str, Any]:
    """One classic template variable as a v2 variable; `where` names it in an error."""
    kind = var.get("type")
    if kind == "query":
        query = var.get("query")
        spec = {**_common(var), **_choices(var), "refresh": REFRESH.get(var.get("refresh", 1), "onDashboardLoad"),
                "regex": var.get("regex", ""), "sort": SORT.get(var.get("sort", 0), "disabled"),
                "query": data_query(var.get("datasource"), query if isinstance(query, dict) else {"query": query})}
        if var.get("definition"):
            spec["definition"] = var["definition"]
        return {"kind": "QueryVariable", "spec": spec}
    if kind == "datasource":
        return {"kind": "DatasourceVariable", "spec": {
            **_common(var), **_choices(var), "pluginId": var.get("query", "prometheus"),
            "refresh": REFRESH.get(var.get("refresh", 1), "onDashboardLoad"), "regex": var.get("regex", "")}}
    if kind == "custom":
        return {"kind": "CustomVariable", "spec": {**_common(var), **_choices(var), "query": var.get("query", "")}}
    if kind == "constant":
        return {"kind": "ConstantVariable", "spec": {**_common(var), "query": var.get("query", ""),
                                                     "current": _current(var)}}
    if kind == "textbox":
        return {"kind": "TextVariable", "spec": {**_common(var), "query": var.get("query", ""),
                                                 "current": _current(var)}}
    raise ConfigError(f"{where}: variable {var.get('name')!r} of type {kind!r} has no schema v2 form in gpudash "
                      "(query, datasource, custom, constant, textbox)")


def annotation(classic: dict[str, Any]) -> dict[str, Any]:
    """A classic annotation as an `AnnotationQuery`: its target is the query, the data source's own keys (title
    and text formats, tag keys) stay as legacy options, as Grafana's conversion keeps them."""
    spec: dict[str, Any] = {
        "query": data_query(classic.get("datasource"), dict(classic.get("target") or {})),
        "enable": bool(classic.get("enable", True)), "hide": bool(classic.get("hide", False)),
        "iconColor": classic.get("iconColor", ""), "name": classic.get("name", ""),
    }
    if classic.get("builtIn"):
        spec["builtIn"] = True
    if classic.get("filter"):
        spec["filter"] = classic["filter"]
    legacy = {k: v for k, v in classic.items() if k not in _ANNOTATION_KEYS}
    if legacy:
        spec["legacyOptions"] = legacy
    return {"kind": "AnnotationQuery", "spec": spec}


def link(classic: dict[str, Any]) -> dict[str, Any]:
    found = {"title": classic.get("title", ""), "type": classic.get("type", "link"),
             "icon": classic.get("icon", "external link"), "tooltip": classic.get("tooltip", ""),
             "tags": list(classic.get("tags") or []), "asDropdown": bool(classic.get("asDropdown", False)),
             "targetBlank": bool(classic.get("targetBlank", False)),
             "includeVars": bool(classic.get("includeVars", False)), "keepTime": bool(classic.get("keepTime", False))}
    if classic.get("url"):
        found["url"] = classic["url"]
    return found


def time_settings(dashboard: dict[str, Any]) -> dict[str, Any]:
    time = dashboard.get("time") or {}
    picker = dashboard.get("timepicker") or {}
    settings: dict[str, Any] = {
        "from": time.get("from", "now-6h"), "to": time.get("to", "now"),
        "autoRefresh": dashboard.get("refresh") or "",
        "autoRefreshIntervals": list(picker.get("refresh_intervals") or AUTO_REFRESH_INTERVALS),
        "hideTimepicker": bool(picker.get("hidden", False)),
        "fiscalYearStartMonth": int(dashboard.get("fiscalYearStartMonth", 0)),
    }
    if dashboard.get("timezone"):
        settings["timezone"] = dashboard["timezone"]
    if dashboard.get("weekStart"):
        settings["weekStart"] = dashboard["weekStart"]
    if picker.get("nowDelay"):
        settings["nowDelay"] = picker["nowDelay"]
    return settings
