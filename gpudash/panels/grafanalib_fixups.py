"""Turn grafanalib 0.7.1's JSON into the form Grafana 13 stores itself. The one place that does it.

grafanalib writes legacy pieces: the pre-7 heatmap (cards, dataFormat, colour spectrum), gauge options
inside fieldConfig, BarGauge `fieldOptions`, threshold steps with the string "null" as base value and
graph-era keys on each step, per-target `intervalFactor`/`step`, string data sources, schemaVersion 12
and a `rows` list. Left alone, Grafana migrates them on load and every save shows up as a diff.

The target is what a Grafana 13 UI save writes (shared/reference/grafana-13-apis.md §3.3-3.4): schemaVersion
42, each panel's `pluginVersion`, no removed options (the table footer), explicit min/max where the legacy
single-stat migration would add them. Grafana 10.4-12.1 load it unchanged: their DashboardMigrator runs no step
for a schemaVersion above their own, and no panel migration step is newer than `GRAFANA_VERSION`.
"""

from __future__ import annotations

from typing import Any

# The final v1 dashboard schema (Grafana 12.2+ and 13 write it); older Grafanas read it without migrating.
SCHEMA_VERSION = 42
# The Grafana release the panels are written for, stamped as every panel's pluginVersion: a matching server
# runs no panel migration on load. tests/schema/package.json pins @grafana/schema at the same release.
GRAFANA_VERSION = "13.2.3"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}

# Dashboard-level keys Grafana no longer has, or that only its server owns.
_DROP_DASHBOARD = ("rows", "sharedCrosshair", "hideControls", "style", "gnetId", "__inputs", "id", "version")
# Panel-level keys of the graph era or grafanalib's own bookkeeping.
_DROP_PANEL = ("span", "minSpan", "height", "error", "editable", "cacheTimeout", "hideTimeOverride", "repeat",
               "repeatDirection", "maxPerRow", "timeFrom", "timeShift", "interval", "transparent")
_TARGET_KEEP = ("expr", "legendFormat", "refId", "format", "instant", "range", "interval", "hide")
_STEP_KEEP = ("color", "value")


def modernize(dashboard: dict[str, Any]) -> dict[str, Any]:
    """Return a modern copy of a grafanalib dashboard dict; stable panel ids in layout order."""
    out = {k: v for k, v in dashboard.items() if k not in _DROP_DASHBOARD}
    out["schemaVersion"] = SCHEMA_VERSION
    out["graphTooltip"] = 1  # shared crosshair: lines up GPUs across panels
    out["templating"] = {"list": [_variable(v) for v in dashboard["templating"]["list"]]}
    out["links"] = [_link(link) for link in dashboard.get("links", [])]
    out["panels"] = [_panel(p) for p in dashboard["panels"]]
    out["annotations"] = {"list": [_alerts_annotation(), *dashboard.get("annotations", {}).get("list", [])]}
    out.pop("timepicker", None)
    for index, panel in enumerate(out["panels"], start=1):
        panel["id"] = index
    return out


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def _steps(thresholds: Any) -> dict[str, Any]:
    steps = thresholds.get("steps") if isinstance(thresholds, dict) else thresholds
    clean = []
    for step in steps or []:
        item = {k: step[k] for k in _STEP_KEEP if k in step}
        if item.get("value") == "null":
            item["value"] = None  # the base step: Grafana wants JSON null, not the string "null"
        clean.append(item)
    if not clean:
        clean = [{"color": "green", "value": None}]
    return {"mode": "absolute", "steps": clean}


def _target(target: dict[str, Any]) -> dict[str, Any]:
    out = {k: target[k] for k in _TARGET_KEEP if k in target and target[k] not in (None, "")}
    if not out.get("hide"):
        out.pop("hide", None)
    out["datasource"] = dict(DATASOURCE)
    out["range"] = not out.get("instant", False)
    out["instant"] = bool(out.get("instant", False))
    out["editorMode"] = "code"
    return out


def _panel(panel: dict[str, Any]) -> dict[str, Any]:
    out = _drop_none({k: v for k, v in panel.items() if k not in _DROP_PANEL})
    if out["type"] == "row":
        out = {k: out[k] for k in ("type", "title", "collapsed", "gridPos", "panels") if k in out}
        out["panels"] = [_panel(p) for p in out.get("panels", [])]
        return out
    out["datasource"] = dict(DATASOURCE)
    out["pluginVersion"] = GRAFANA_VERSION
    out["targets"] = [_target(t) for t in panel.get("targets", [])]
    if not out.get("links"):
        out.pop("links", None)
    if not out.get("transformations"):
        out.pop("transformations", None)
    field_config = out.setdefault("fieldConfig", {})
    defaults = field_config.setdefault("defaults", {})
    field_config.setdefault("overrides", [])
    for override in field_config["overrides"]:
        _hide_from_tooltip_too(override)
    fixer = _FIXERS.get(out["type"])
    if fixer:
        fixer(out, defaults)
    defaults["thresholds"] = _steps(defaults.get("thresholds"))
    field_config["defaults"] = _drop_none(defaults)
    return out


# Single-stat panels (stat, gauge, bar gauge) in a percent unit: the range Grafana's pre-8.0 migration step
# writes when min/max are absent, so a panel means the same on every version.
_PERCENT_RANGE = {"percent": (0, 100), "percentunit": (0, 1)}


def _percent_range(defaults: dict[str, Any]) -> None:
    bounds = _PERCENT_RANGE.get(defaults.get("unit", ""))
    if bounds:
        defaults.setdefault("min", bounds[0])
        defaults.setdefault("max", bounds[1])


def _hide_from_tooltip_too(override: dict[str, Any]) -> None:
    # Schema 42's migration: a series hidden from the plot is hidden from the tooltip too.
    for prop in override.get("properties", []):
        if prop.get("id") == "custom.hideFrom" and isinstance(prop.get("value"), dict) and prop["value"].get("viz"):
            prop["value"]["tooltip"] = True


def _reduce(calcs: Any = None, values: bool = False) -> dict[str, Any]:
    # values: one gauge per row (the panels that sort their series into rows first), not one per series
    return {"calcs": calcs or ["lastNotNull"], "fields": "", "values": values}


# Options of the gauge Grafana 12.4 redrew, at the defaults its save writes (older Grafanas ignore them).
GAUGE_12_4 = {"barShape": "flat", "barWidthFactor": 0.5, "effects": {}, "endpointMarker": "point", "segmentCount": 1,
              "segmentSpacing": 0.3, "shape": "gauge", "sparkline": True, "textMode": "auto"}
# The legend of a plugin that has one but draws none by default (bar gauge).
_NO_LEGEND = {"calcs": [], "displayMode": "list", "placement": "bottom", "showLegend": False}


def _fix_gauge(panel: dict[str, Any], defaults: dict[str, Any]) -> None:
    # grafanalib puts the gauge's display options inside fieldConfig.defaults; Grafana reads them from options.
    options: dict[str, Any] = panel["options"] if isinstance(panel.get("options"), dict) else {}
    field_config = panel["fieldConfig"]
    for key in ("showThresholdLabels", "showThresholdMarkers"):
        if key in field_config:
            defaults.setdefault(key, field_config.pop(key))
    values = bool(defaults.get("values", False))
    panel["options"] = {
        "orientation": "auto",
        "reduceOptions": _reduce(values=values),
        "showThresholdLabels": bool(defaults.pop("showThresholdLabels", options.get("showThresholdLabels", False))),
        "showThresholdMarkers": bool(defaults.pop("showThresholdMarkers", options.get("showThresholdMarkers", True))),
        "minVizHeight": 75,
        "minVizWidth": 75,
        "sizing": "auto",
        **GAUGE_12_4,
    }
    for legacy in ("calcs", "limit", "override", "values", "title", "links"):
        defaults.pop(legacy, None)
    defaults.setdefault("mappings", [])
    _percent_range(defaults)


def _fix_bargauge(panel: dict[str, Any], defaults: dict[str, Any]) -> None:
    options = panel.get("options", {})
    legacy = options.pop("fieldOptions", {}) or {}
    legacy_defaults = legacy.get("defaults", {})
    for key in ("min", "max", "unit", "decimals"):
        if key not in defaults and legacy_defaults.get(key) is not None:
            defaults[key] = legacy_defaults[key]
    if "thresholds" not in defaults and legacy.get("thresholds"):
        defaults["thresholds"] = legacy["thresholds"]
    defaults.setdefault("mappings", [])
    _percent_range(defaults)
    panel["options"] = {
        "displayMode": options.get("displayMode", "gradient"),
        "orientation": options.get("orientation", "horizontal"),
        "reduceOptions": _reduce(values=bool(legacy.get("values", False))),
        "showUnfilled": True,
        "valueMode": "color",
        "namePlacement": "auto",
        "sizing": "auto",
        "minVizHeight": 16,
        "minVizWidth": 8,
        "maxVizHeight": 300,
        "legend": {**_NO_LEGEND, "calcs": []},  # a list of its own, not one shared by every bar gauge
    }


def _fix_stat(panel: dict[str, Any], defaults: dict[str, Any]) -> None:
    options = panel.get("options", {})
    options["reduceOptions"] = _reduce()
    options.setdefault("colorMode", "value")
    options.setdefault("graphMode", "area")
    options.setdefault("justifyMode", "auto")
    options.setdefault("textMode", "auto")
    options["wideLayout"] = True
    options["showPercentChange"] = False
    options.setdefault("percentChangeColorMode", "standard")
    panel["options"] = options
    if defaults.get("noValue") == "none":
        defaults.pop("noValue")
    defaults.pop("custom", None)
    defaults["color"] = {"mode": "thresholds"}
    defaults.setdefault("mappings", [])
    _percent_range(defaults)


def _fix_heatmap(panel: dict[str, Any], defaults: dict[str, Any]) -> None:
    # The pre-7 heatmap (cards/dataFormat/colour spectrum) becomes the native one: rows come straight
    # from the series (calculate off), so one row per GPU (or per utilization band) over time.
    spec = panel.pop("gpudashHeatmap", {})
    for legacy in ("cards", "color", "dataFormat", "heatmap", "hideZeroBuckets", "highlightCards", "legend",
                   "reverseYBuckets", "tooltip", "xAxis", "xBucketNumber", "xBucketSize", "yAxis",
                   "yBucketBound", "yBucketNumber", "yBucketSize"):
        panel.pop(legacy, None)
    panel["options"] = {
        "calculate": False,
        "cellGap": 1,
        "cellValues": {"unit": spec.get("unit", "percent")},
        "color": {
            "mode": "scheme",
            "scheme": spec.get("scheme", "RdYlGn"),
            "reverse": bool(spec.get("reverse", False)),
            "fill": "dark-orange",
            "scale": "linear",
            "exponent": 0.5,
            "steps": int(spec.get("steps", 10)),
            "min": spec.get("min"),
            "max": spec.get("max"),
        },
        "exemplars": {"color": "rgba(255,0,255,0.7)"},
        # Grafana hides cells <= 1e-9 by default; a heatmap whose 0 means something (an idle GPU, an empty
        # band) asks to draw them.
        "filterValues": {"le": -1e-9} if spec.get("show_zero") else {"le": 1e-9},
        "legend": {"show": True, "placement": "bottom"},
        "rowsFrame": {"layout": "auto", "value": spec.get("value_name", "Value")},
        "selectionMode": "x",
        "showValue": "never",
        "tooltip": {"mode": "single", "showColorScale": True, "yHistogram": False},
        "yAxis": {"axisPlacement": "left", "reverse": False, "unit": spec.get("y_unit", "short")},
    }
    panel["options"]["color"] = _drop_none(panel["options"]["color"])
    defaults["custom"] = {"hideFrom": {"legend": False, "tooltip": False, "viz": False},
                          "scaleDistribution": {"type": "linear"}}


def _fix_timeseries(panel: dict[str, Any], defaults: dict[str, Any]) -> None:
    custom = defaults.get("custom", {})
    custom.pop("axisSoftMax", None)
    custom.pop("axisSoftMin", None)
    if custom.get("stacking") == {}:
        custom["stacking"] = {"group": "A", "mode": "none"}
    custom.setdefault("insertNulls", False)
    custom.setdefault("axisBorderShow", False)
    custom.setdefault("axisCenteredZero", False)
    custom.setdefault("axisColorMode", "text")
    defaults["custom"] = custom
    if defaults.get("unit") == "":
        defaults.pop("unit")
    options = panel.get("options", {})
    options.setdefault("legend", {})["showLegend"] = True
    options["tooltip"] = {"mode": "multi", "sort": "desc"}
    panel["options"] = options


def _fix_table(panel: dict[str, Any], defaults: dict[str, Any]) -> None:
    for legacy in ("columns", "fontSize", "mappings", "color"):
        panel.pop(legacy, None)
    options = panel.get("options", {})
    options["cellHeight"] = "sm"
    options.setdefault("frameIndex", 0)
    options.setdefault("showTypeIcons", False)
    # Grafana 12.2 moved the footer into the field config (TableNG) and drops `options.footer` on load;
    # gpudash shows none, and older Grafanas read a missing footer as hidden.
    options.pop("footer", None)
    panel["options"] = options
    custom = defaults.get("custom", {})
    custom.pop("displayMode", None)
    custom["cellOptions"] = {"type": "auto"}
    custom.setdefault("inspect", False)
    defaults["custom"] = custom
    if defaults.get("unit") == "":
        defaults.pop("unit")


def _fix_state_timeline(panel: dict[str, Any], defaults: dict[str, Any]) -> None:
    options = panel.get("options", {})
    options.setdefault("legend", {})["showLegend"] = True
    options["legend"].setdefault("calcs", [])
    options.setdefault("perPage", 20)
    options["tooltip"] = {"mode": "single", "sort": "none"}
    panel["options"] = options


_FIXERS = {
    "gauge": _fix_gauge,
    "bargauge": _fix_bargauge,
    "stat": _fix_stat,
    "heatmap": _fix_heatmap,
    "timeseries": _fix_timeseries,
    "table": _fix_table,
    "state-timeline": _fix_state_timeline,
}


def _variable(var: dict[str, Any]) -> dict[str, Any]:
    base = {
        "name": var["name"],
        "label": var.get("label") or var["name"],
        "type": var["type"],
        "hide": var.get("hide", 0),
        "skipUrlSync": False,
        "options": [],
    }
    if var["type"] == "datasource":
        base.update({"query": "prometheus", "refresh": 1, "regex": "", "multi": False, "includeAll": False})
        return base
    if var["type"] == "custom":
        # A fixed list of values (the health ledger's window), opened on its default.
        values = [v.strip() for v in var["query"].split(",")]
        chosen = (var.get("current") or {}).get("value") or values[0]
        base.update({"query": var["query"], "multi": False, "includeAll": False,
                     "current": {"selected": True, "text": chosen, "value": chosen},
                     "options": [{"selected": v == chosen, "text": v, "value": v} for v in values]})
        return base
    query = var["query"]
    base.update({
        "datasource": dict(DATASOURCE),
        "definition": query,
        # Grafana 10+ keeps a Prometheus variable's query as an object of the variable query editor.
        "query": {"qryType": 1, "query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
        "refresh": 2,  # on time range change: new GPUs and nodes appear without a reload
        "regex": "",
        "sort": var.get("sort", 1),
        "multi": bool(var.get("multi")),
        "includeAll": bool(var.get("includeAll")),
    })
    if var.get("includeAll"):
        base["allValue"] = var.get("allValue") or ".*"
        # Opens on All, as Grafana writes a multi-value selection (a data source has no site-free default).
        all_ = ["All"], ["$__all"]
        base["current"] = {"text": all_[0], "value": all_[1]} if base["multi"] else {"text": "All", "value": "$__all"}
    return base


def _link(link: dict[str, Any]) -> dict[str, Any]:
    return {
        "title": link["title"],
        "type": "link",
        "url": link.get("url") or link.get("uri"),
        "icon": "dashboard",
        "tooltip": link.get("tooltip", ""),
        "asDropdown": False,
        "includeVars": bool(link.get("includeVars")),
        "keepTime": bool(link.get("keepTime")),
        "targetBlank": False,
        "tags": [],
    }


def _alerts_annotation() -> dict[str, Any]:
    return {
        "builtIn": 1,
        "datasource": {"type": "grafana", "uid": "-- Grafana --"},
        "enable": True,
        "hide": True,
        "iconColor": "rgba(0, 211, 255, 1)",
        "name": "Annotations & Alerts",
        "type": "dashboard",
    }
