"""Grafana 13's two dashboard schemas and the conversion between them, as lossy as Grafana's own.

Shapes follow @grafana/schema 13.2's v2 types (`Spec`: elements, a layout of Grid | Rows | AutoGrid | Tabs,
variables, timeSettings, annotations, links; conditional rendering on rows, tabs and auto-grid items).
What the conversion loses is what shared/reference/grafana-13-apis.md and grafana#114924 / #117084 say it
loses: v1 panels without an id are dropped going to v2; tabs, auto-grid repeats and conditional rendering
are dropped going to v1 (the tabs' contents are laid out one after the other). Where the sources are silent
the choice is the stand-in's, marked "assumption" where it is made.
"""

from __future__ import annotations

import copy
from typing import Any

# assumption: the kinds of the v1 variable types; each v2 variable spec keeps the v1 fields as they are
VARIABLE_KINDS = {"query": "QueryVariable", "custom": "CustomVariable", "datasource": "DatasourceVariable",
                  "interval": "IntervalVariable", "constant": "ConstantVariable", "textbox": "TextVariable",
                  "adhoc": "AdhocVariable", "groupby": "GroupByVariable"}
VARIABLE_TYPES = {kind: name for name, kind in VARIABLE_KINDS.items()}
CURSOR_SYNC = {0: "Off", 1: "Crosshair", 2: "Tooltip"}
DEFAULT_INTERVALS = ["5s", "10s", "30s", "1m", "5m", "15m", "30m", "1h", "2h", "1d"]
AUTO_GRID_COLUMNS, AUTO_GRID_HEIGHT = 3, 8  # assumption: how an auto grid is laid out on v1's 24 columns
QUERY_OWN = ("refId", "hide", "datasource")


def is_v2(spec: dict[str, Any]) -> bool:
    """A v2 spec has elements and a layout where v1 has panels (what provisioning looks for)."""
    return isinstance(spec.get("elements"), dict) and isinstance(spec.get("layout"), dict)


# ------------------------------------------------------------------ v1 -> v2


def _query(target: dict[str, Any], panel_source: Any) -> dict[str, Any]:
    source = target.get("datasource") if isinstance(target.get("datasource"), dict) else panel_source
    source = source if isinstance(source, dict) else {}
    query: dict[str, Any] = {"kind": "DataQuery", "group": str(source.get("type", "")), "version": "v0",
                             "spec": {k: copy.deepcopy(v) for k, v in target.items() if k not in QUERY_OWN}}
    if source.get("uid"):
        query["datasource"] = {"name": str(source["uid"])}
    return {"kind": "PanelQuery", "spec": {"refId": str(target.get("refId", "A")), "hidden": bool(target.get("hide")),
                                           "query": query}}


def _element(panel: dict[str, Any]) -> dict[str, Any]:
    targets = [t for t in panel.get("targets") or [] if isinstance(t, dict)]
    transformations = [{"kind": str(t.get("id", "")), "spec": copy.deepcopy(t)}
                       for t in panel.get("transformations") or [] if isinstance(t, dict)]
    viz: dict[str, Any] = {"options": copy.deepcopy(panel.get("options") or {}),
                           "fieldConfig": copy.deepcopy(panel.get("fieldConfig") or {"defaults": {}, "overrides": []})}
    spec: dict[str, Any] = {
        "id": panel["id"], "title": str(panel.get("title", "")), "description": str(panel.get("description", "")),
        "links": copy.deepcopy(panel.get("links") or []),
        "data": {"kind": "QueryGroup", "spec": {"queries": [_query(t, panel.get("datasource")) for t in targets],
                                                "transformations": transformations, "queryOptions": {}}},
        "vizConfig": {"kind": "VizConfig", "group": str(panel.get("type", "")),
                      "version": str(panel.get("pluginVersion", "")), "spec": viz}}
    if panel.get("transparent"):
        spec["transparent"] = True
    return {"kind": "Panel", "spec": spec}


def _grid_item(panel: dict[str, Any], key: str, top: int) -> dict[str, Any]:
    pos = panel.get("gridPos") or {}
    spec: dict[str, Any] = {"x": int(pos.get("x", 0)), "y": int(pos.get("y", 0)) - top,
                            "width": int(pos.get("w", 12)), "height": int(pos.get("h", 8)),
                            "element": {"kind": "ElementReference", "name": key}}
    if panel.get("repeat"):
        spec["repeat"] = {"mode": "variable", "value": str(panel["repeat"]),
                          "direction": "v" if panel.get("repeatDirection") == "v" else "h"}
    return {"kind": "GridLayoutItem", "spec": spec}


def _grid(panels: list[dict[str, Any]], elements: dict[str, Any], top: int) -> dict[str, Any]:
    items = []
    for panel in panels:
        if not isinstance(panel.get("id"), int):
            continue  # grafana#117084: a v1 panel without an id does not survive the conversion
        key = f"panel-{panel['id']}"
        elements[key] = _element(panel)
        items.append(_grid_item(panel, key, top))
    return {"kind": "GridLayout", "spec": {"items": items}}


def _layout(panels: list[dict[str, Any]], elements: dict[str, Any]) -> dict[str, Any]:
    if not any(p.get("type") == "row" for p in panels):
        return _grid(panels, elements, 0)
    rows: list[dict[str, Any]] = []
    loose: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    members: list[dict[str, Any]] = []

    def close() -> None:
        if current is not None:
            top = int((current.get("gridPos") or {}).get("y", 0)) + 1
            inside = members + [p for p in current.get("panels") or [] if isinstance(p, dict)]
            rows.append({"kind": "RowsLayoutRow", "spec": {"title": str(current.get("title", "")),
                                                            "collapse": bool(current.get("collapsed")),
                                                            "layout": _grid(inside, elements, top)}})

    for panel in panels:
        if panel.get("type") == "row":
            close()
            current, members = panel, []
        elif current is None:
            loose.append(panel)
        else:
            members.append(panel)
    close()
    if loose:  # assumption: panels above the first row go into a row without a header
        rows.insert(0, {"kind": "RowsLayoutRow", "spec": {"title": "", "collapse": False, "hideHeader": True,
                                                          "layout": _grid(loose, elements, 0)}})
    return {"kind": "RowsLayout", "spec": {"rows": rows}}


def v1_to_v2(v1: dict[str, Any]) -> dict[str, Any]:
    """The v2 spec of a v1 dashboard (what 13's backend answers on a v2 read, and its editor saves)."""
    panels = [p for p in v1.get("panels") or [] if isinstance(p, dict)]
    elements: dict[str, Any] = {}
    layout = _layout(panels, elements)
    timepicker = v1.get("timepicker") if isinstance(v1.get("timepicker"), dict) else {}
    time = v1.get("time") if isinstance(v1.get("time"), dict) else {}
    settings: dict[str, Any] = {"timezone": str(v1.get("timezone", "browser")), "from": str(time.get("from", "now-6h")),
                                "to": str(time.get("to", "now")), "autoRefresh": str(v1.get("refresh") or ""),
                                "autoRefreshIntervals": list(timepicker.get("refresh_intervals", DEFAULT_INTERVALS)),
                                "hideTimepicker": bool(timepicker.get("hidden", False)),
                                "fiscalYearStartMonth": int(v1.get("fiscalYearStartMonth") or 0)}
    if v1.get("weekStart"):
        settings["weekStart"] = v1["weekStart"]
    variables = [{"kind": VARIABLE_KINDS.get(str(v.get("type")), "CustomVariable"),
                  "spec": {k: copy.deepcopy(x) for k, x in v.items() if k != "type"}}
                 for v in (v1.get("templating") or {}).get("list") or [] if isinstance(v, dict)]
    annotations = [{"kind": "AnnotationQuery", "spec": copy.deepcopy(a)}
                   for a in (v1.get("annotations") or {}).get("list") or [] if isinstance(a, dict)]
    spec: dict[str, Any] = {
        "title": str(v1.get("title", "")), "description": str(v1.get("description", "")),
        "tags": list(v1.get("tags") or []), "editable": bool(v1.get("editable", True)),
        "cursorSync": CURSOR_SYNC.get(int(v1.get("graphTooltip") or 0), "Off"), "liveNow": bool(v1.get("liveNow")),
        "preload": False, "links": copy.deepcopy(v1.get("links") or []), "timeSettings": settings,
        "variables": variables, "annotations": annotations, "elements": elements, "layout": layout}
    return spec


# ------------------------------------------------------------------ v2 -> v1


def _panel(element: dict[str, Any]) -> dict[str, Any]:
    spec = element.get("spec") or {}
    viz = spec.get("vizConfig") or {}
    data = (spec.get("data") or {}).get("spec") or {}
    targets, source = [], None
    for query in data.get("queries") or []:
        qspec = query.get("spec") or {}
        inner = qspec.get("query") or {}
        ds = {"type": inner.get("group", ""), "uid": (inner.get("datasource") or {}).get("name", "")}
        source = source or ds
        target = {"refId": qspec.get("refId", "A"), "datasource": ds, **copy.deepcopy(inner.get("spec") or {})}
        if qspec.get("hidden"):
            target["hide"] = True
        targets.append(target)
    panel: dict[str, Any] = {"id": spec.get("id"), "type": viz.get("group", ""), "title": spec.get("title", ""),
                             "targets": targets, **copy.deepcopy(viz.get("spec") or {})}
    if spec.get("description"):
        panel["description"] = spec["description"]
    if spec.get("links"):
        panel["links"] = copy.deepcopy(spec["links"])
    if viz.get("version"):
        panel["pluginVersion"] = viz["version"]
    if source is not None:
        panel["datasource"] = source
    transformations = [copy.deepcopy(t.get("spec") or {}) for t in data.get("transformations") or []]
    if transformations:
        panel["transformations"] = transformations
    return panel


class _Flattener:
    """Lays a v2 layout out on v1's grid from the top down; what v1 cannot hold is left behind."""

    def __init__(self, elements: dict[str, Any]) -> None:
        self.elements = elements
        self.panels: list[dict[str, Any]] = []
        self.bottom = 0

    def _place(self, name: str, x: int, y: int, w: int, h: int, into: list[dict[str, Any]]) -> None:
        element = self.elements.get(name)
        if not isinstance(element, dict) or element.get("kind") != "Panel":
            return
        panel = _panel(element)
        panel["gridPos"] = {"h": h, "w": w, "x": x, "y": y}
        into.append(panel)
        self.bottom = max(self.bottom, y + h)

    def layout(self, layout: dict[str, Any], into: list[dict[str, Any]]) -> None:
        kind, spec = layout.get("kind"), layout.get("spec") or {}
        top = self.bottom
        if kind == "GridLayout":
            for item in spec.get("items") or []:
                s = item.get("spec") or {}
                self._place((s.get("element") or {}).get("name", ""), int(s.get("x", 0)), top + int(s.get("y", 0)),
                            int(s.get("width", 12)), int(s.get("height", 8)), into)
                if s.get("repeat") and into:
                    into[-1]["repeat"] = s["repeat"].get("value")
        elif kind == "AutoGridLayout":  # grafana#114924: the auto grid's repeats are lost
            columns = int(spec.get("maxColumnCount") or AUTO_GRID_COLUMNS)
            width = 24 // max(1, columns)
            for n, item in enumerate(spec.get("items") or []):
                name = ((item.get("spec") or {}).get("element") or {}).get("name", "")
                self._place(name, (n % columns) * width, top + (n // columns) * AUTO_GRID_HEIGHT, width,
                            AUTO_GRID_HEIGHT, into)
        elif kind == "RowsLayout":
            for row in spec.get("rows") or []:
                self.row(row.get("spec") or {})
        elif kind == "TabsLayout":  # grafana#114924: the tabs are lost, their contents kept one after the other
            for tab in spec.get("tabs") or []:
                self.layout((tab.get("spec") or {}).get("layout") or {}, into)

    def row(self, spec: dict[str, Any]) -> None:
        if spec.get("hideHeader"):
            self.layout(spec.get("layout") or {}, self.panels)
            return
        row: dict[str, Any] = {"type": "row", "title": spec.get("title", ""), "collapsed": bool(spec.get("collapse")),
                               "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.bottom}, "panels": []}
        row["id"] = 1 + max([p.get("id") or 0 for p in self.panels] + [0])  # assumption: rows numbered after panels
        self.panels.append(row)
        self.bottom += 1
        if row["collapsed"]:
            self.layout(spec.get("layout") or {}, row["panels"])
        else:
            self.layout(spec.get("layout") or {}, self.panels)


def v2_to_v1(v2: dict[str, Any]) -> dict[str, Any]:
    """The v1 JSON of a v2 spec (what 13 answers on a v1 read of a dashboard stored as v2), schemaVersion 42."""
    flat = _Flattener(v2.get("elements") or {})
    flat.layout(v2.get("layout") or {}, flat.panels)
    settings = v2.get("timeSettings") or {}
    timepicker: dict[str, Any] = {}
    if settings.get("hideTimepicker"):
        timepicker["hidden"] = True
    if settings.get("autoRefreshIntervals", DEFAULT_INTERVALS) != DEFAULT_INTERVALS:
        timepicker["refresh_intervals"] = list(settings["autoRefreshIntervals"])
    v1: dict[str, Any] = {
        "title": v2.get("title", ""), "tags": list(v2.get("tags") or []), "editable": bool(v2.get("editable", True)),
        "graphTooltip": {name: n for n, name in CURSOR_SYNC.items()}.get(v2.get("cursorSync", "Off"), 0),
        "time": {"from": settings.get("from", "now-6h"), "to": settings.get("to", "now")},
        "timezone": settings.get("timezone", "browser"), "refresh": settings.get("autoRefresh", ""),
        "fiscalYearStartMonth": int(settings.get("fiscalYearStartMonth") or 0), "liveNow": bool(v2.get("liveNow")),
        "links": copy.deepcopy(v2.get("links") or []), "panels": flat.panels, "schemaVersion": 42,
        "templating": {"list": [{"type": VARIABLE_TYPES.get(str(v.get("kind")), "custom"),
                                 **copy.deepcopy(v.get("spec") or {})} for v in v2.get("variables") or []]},
        "annotations": {"list": [copy.deepcopy(a.get("spec") or {}) for a in v2.get("annotations") or []]}}
    if v2.get("description"):
        v1["description"] = v2["description"]
    if timepicker:
        v1["timepicker"] = timepicker
    if settings.get("weekStart"):
        v1["weekStart"] = settings["weekStart"]
    return v1


def family(version: str) -> str:
    """"v2" for the v2 group versions, "v1" for the classic ones (v0alpha1, v1beta1, v1)."""
    return "v2" if version.startswith("v2") else "v1"


def convert(spec: dict[str, Any], stored: str, wanted: str) -> dict[str, Any]:
    """`spec`, stored at version `stored`, as version `wanted` serves it."""
    if family(stored) == family(wanted):
        return spec
    return v1_to_v2(spec) if family(wanted) == "v2" else v2_to_v1(spec)
