"""Panel builders on top of grafanalib, with colour steps from thresholds.yaml and a grid layout.

A builder returns None when the metric profile cannot fill the panel; `PanelGrid` skips those, so a
profile without (say) HBM temperature gets a dashboard without that panel instead of an empty one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from math import gcd
from typing import Any

from grafanalib import core as G

from gpudash.config.thresholds import Levels, Thresholds

GREEN, ORANGE, RED, BLUE = "green", "orange", "red", "blue"
DARK_GREEN = "dark-green"
# An idle GPU's colour: capacity nobody uses is what an SRE hunts, so it stands out; a busy GPU is never red.
IDLE = ORANGE
FULL_WIDTH = 24


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str = ""
    instant: bool = False
    ref: str = ""


# ------------------------------------------------------------------------------------------- colour steps


def color_steps(*pairs: tuple[str, float | None]) -> list[G.Threshold]:
    # grafanalib writes the first step's value as the string "null"; grafanalib_fixups turns it into JSON null.
    return [G.Threshold(color, index, float(value or 0.0)) for index, (color, value) in enumerate(pairs)]


def utilization_steps(t: Thresholds) -> list[G.Threshold]:
    """Low is bad: below idle = orange (capacity nobody uses), idle..saturated = green, above saturated = dark
    green (fully used, the best a GPU can do)."""
    u = t.utilization
    return color_steps((IDLE, None), (GREEN, u.idle_below_percent), (DARK_GREEN, u.saturated_above_percent))


def idle_count_steps() -> list[G.Threshold]:
    """A count of idle GPUs: green at none, the idle colour from one."""
    return color_steps((GREEN, None), (IDLE, 1))


def level_steps(levels: Levels, scale: float = 1.0) -> list[G.Threshold]:
    """Green, then orange from the warning level, red from the critical level."""
    warning, critical = round(levels.warning * scale, 6), round(levels.critical * scale, 6)
    return color_steps((GREEN, None), (ORANGE, warning), (RED, critical))


def heatmap_bands(t: Thresholds) -> int:
    """Colour bands on a 0-100 % heatmap such that the idle and saturated levels fall on band edges."""
    u = t.utilization
    step = gcd(gcd(100, int(u.idle_below_percent)), int(u.saturated_above_percent))
    if step == 0 or u.idle_below_percent != int(u.idle_below_percent):
        return 100
    return max(2, min(100 // step, 100))


# ------------------------------------------------------------------------------------------- panels


def _targets(queries: Sequence[Query], table_format: bool = False) -> list[G.Target]:
    return [
        G.Target(expr=q.expr, legendFormat=q.legend, refId=q.ref or chr(ord("A") + i), instant=q.instant,
                 format="table" if table_format else "time_series")
        for i, q in enumerate(queries)
    ]


def _dashed(refs: Sequence[str]) -> list[dict[str, Any]]:
    return [
        {"matcher": {"id": "byFrameRefID", "options": ref},
         "properties": [{"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}},
                        {"id": "custom.lineWidth", "value": 2}]}
        for ref in refs
    ]


# How a time series draws its values: a line for a level, points for codes (an XID code is a label, not a
# level to interpolate between), bars for counts per interval (one XID is one bar of 1, not a slope).
DRAW_STYLES: dict[str, dict[str, Any]] = {
    "line": {"drawStyle": "line", "showPoints": "never"},
    "points": {"drawStyle": "points", "showPoints": "always", "pointSize": 6},
    "bars": {"drawStyle": "bars", "showPoints": "never", "fillOpacity": 80},
}


def timeseries(title: str, queries: Sequence[Query], unit: str, description: str,
               steps: list[G.Threshold] | None = None, min_: float | None = None, max_: float | None = None,
               dashed_refs: Sequence[str] = (), fill: int = 0, legend: str = "right",
               draw: str = "line", decimals: int | None = None, no_value: str | None = None) -> G.TimeSeries:
    """A time series; `dashed_refs` draws those queries as dashed reference lines (limits, yesterday);
    `legend` places the legend table ("right" or "bottom"); `draw` is one of DRAW_STYLES; `decimals` 0 for
    counts (Grafana's axis otherwise ticks 0.30, 0.60, 0.90 events); `no_value` is what the panel says when
    no series answers, where that has a reason worth saying (Grafana says "No data")."""
    style = DRAW_STYLES[draw]
    defaults = {key: value for key, value in (("decimals", decimals), ("noValue", no_value)) if value is not None}
    panel = G.TimeSeries(
        title=title, description=description, targets=_targets(queries), unit=unit,
        thresholds=steps or color_steps((GREEN, None)), thresholdsStyleMode="line" if steps else "off",
        valueMin=min_, valueMax=max_, overrides=_dashed(dashed_refs), fillOpacity=style.get("fillOpacity", fill),
        legendDisplayMode="table", legendPlacement=legend, legendCalcs=["lastNotNull", "max"], lineWidth=1,
        showPoints=style["showPoints"], spanNulls=False, maxDataPoints=None, drawStyle=style["drawStyle"],
        pointSize=style.get("pointSize", 5),
        extraJson={"fieldConfig": {"defaults": defaults}} if defaults else {},
    )
    return panel


def stat(title: str, query: Query | Sequence[Query], unit: str, description: str,
         steps: list[G.Threshold] | None = None, decimals: int | None = None, graph: bool = False,
         no_value: str = "no data", links: Sequence[dict[str, Any]] = ()) -> G.Stat:
    # no_value: what an empty answer shows. "0" only where no series truly means none (a count of matches);
    # a missing exporter or recording rule must look like no data, not like a healthy zero.
    """A single number (one per query, side by side, when given several); without a sparkline it asks for the
    instant value only, which is cheaper. `links` make each number a link."""
    queries = [query] if isinstance(query, Query) else list(query)
    if not graph:
        queries = [Query(q.expr, q.legend, True, q.ref) for q in queries]
    return G.Stat(
        title=title, description=description, targets=_targets(queries), format=unit, decimals=decimals,
        thresholds=steps or color_steps((GREEN, None)), graphMode="area" if graph else "none",
        reduceCalc="lastNotNull", colorMode="value", noValue=no_value, maxDataPoints=None,
        overrides=_value_links(links),
    )


# The field the reduce transformation writes each series' value to ("Last *" for lastNotNull).
REDUCED_VALUE = "Last *"
REDUCED_NAME = "Field"
_LEGEND_LABEL = re.compile(r"\{\{\s*(\w+)\s*\}\}")


def sorted_rows(desc: bool | None, labels_as_fields: bool) -> list[dict[str, Any]]:
    """One row per series, its value reduced to the last, sorted by value (desc True: largest first; False:
    smallest first) or, with None, by its legend (GPU index order).

    Without `labels_as_fields` the `Field` column holds each series' legend, which titles the row. With it
    (for links that read a row's labels) `Field` holds only "Value": the panel titles the rows instead
    (`reduced_title`)."""
    if labels_as_fields and desc is None:
        raise ValueError("rows with their labels as fields sort by value only: their Field column is 'Value'")
    reduce = {"id": "reduce", "options": {"reducers": ["lastNotNull"], "mode": "seriesToRows",
                                          "labelsToFields": labels_as_fields, "includeTimeField": False}}
    field = REDUCED_NAME if desc is None else REDUCED_VALUE
    return [reduce, {"id": "sortBy", "options": {"fields": {}, "sort": [{"field": field, "desc": bool(desc)}]}}]


def reduced_title(legend: str) -> str:
    """A legend (`{{instance}} GPU {{gpu}}`) as the display name of a reduced row whose labels are fields."""
    return _LEGEND_LABEL.sub(lambda m: f"${{__data.fields.{m.group(1)}}}", legend)


def labels_as_text(unit: str) -> list[dict[str, Any]]:
    """Label fields written as they are: without it the panel's unit also writes a label that reads as a number
    (GPU "5" as "5 °C", pid "4140" as "4.04 GiB"), in cells and in titles built from `${__data.fields.X}`."""
    if unit in ("", "none", "string"):
        return []
    return [{"matcher": {"id": "byType", "options": "string"}, "properties": [{"id": "unit", "value": "string"}]}]


def _value_links(links: Sequence[dict[str, Any]], legend: str | None = None) -> list[dict[str, Any]]:
    # An override on every number field: grafanalib's gauge drops field-config links, an override stays. A
    # `legend` titles reduced rows whose labels are fields (without it Grafana titles them "Value <labels>").
    if not links:
        return []
    properties: list[dict[str, Any]] = [{"id": "links", "value": list(links)}]
    if legend is not None:
        properties.append({"id": "displayName", "value": reduced_title(legend)})
    return [{"matcher": {"id": "byType", "options": "number"}, "properties": properties}]


def gauge(title: str, query: Query, unit: str, description: str, steps: list[G.Threshold],
          min_: float, max_: float, links: Sequence[dict[str, Any]] = (), desc: bool | None = True) -> G.GaugePanel:
    """One gauge per series, showing the value now (an instant query), in the order of `sorted_rows`."""
    query = Query(query.expr, query.legend, True, query.ref)
    return G.GaugePanel(
        title=title, description=description, targets=_targets([query]), format=unit, min=min_, max=max_,
        thresholds=steps, thresholdMarkers=True, thresholdLabels=False, calc="lastNotNull", maxDataPoints=None,
        allValues=True, transformations=sorted_rows(desc, bool(links)),
        extraJson={"fieldConfig": {"overrides": _value_links(links, query.legend) + labels_as_text(unit)}},
    )


def bar_gauge(title: str, query: Query, unit: str, description: str, steps: list[G.Threshold],
              min_: float, max_: float, links: Sequence[dict[str, Any]] = (),
              desc: bool | None = True) -> G.BarGauge:
    """One bar per series, showing the value now (an instant query), in the order of `sorted_rows`."""
    query = Query(query.expr, query.legend, True, query.ref)
    return G.BarGauge(
        title=title, description=description, targets=_targets([query]), format=unit, min=min_, max=max_,
        thresholds=steps, displayMode="gradient", orientation="horizontal", calc="lastNotNull",
        maxDataPoints=None, allValues=True, transformations=sorted_rows(desc, bool(links)),
        extraJson={"fieldConfig": {"overrides": _value_links(links, query.legend) + labels_as_text(unit)}},
    )


# The utilization heatmap's colours, low to high, and the words its description uses for them: one table, so
# the scheme and what the panel says about it cannot drift apart.
UTILIZATION_SCHEME = ("RdYlGn", ("red", "dark green"))


def heatmap(title: str, query: Query, description: str, t: Thresholds, y_unit: str = "short",
            max_points: int = 200) -> G.Heatmap:
    """Native heatmap, one row per series; colour = utilization, banded to the thresholds' levels, 0 % drawn."""
    # Red (idle: capacity nobody uses) through yellow to dark green (busy): low is bad, a busy GPU is never
    # red; band edges fall on the idle and saturated levels.
    spec = {"unit": "percent", "scheme": UTILIZATION_SCHEME[0], "reverse": False, "min": 0, "max": 100,
            "steps": heatmap_bands(t), "y_unit": y_unit, "show_zero": True}
    return G.Heatmap(
        title=title, description=description, targets=_targets([query]), thresholds=utilization_steps(t),
        maxDataPoints=max_points, extraJson={"gpudashHeatmap": spec},
    )


def count_heatmap(title: str, query: Query, description: str, max_points: int = 200) -> G.Heatmap:
    """Native heatmap of counts (GPUs per band): colour = how many GPUs, darker = more, 0 drawn palest."""
    spec = {"unit": "none", "scheme": "Blues", "reverse": False, "steps": 64, "y_unit": "short", "show_zero": True}
    return G.Heatmap(
        title=title, description=description, targets=_targets([query]), thresholds=color_steps((BLUE, None)),
        maxDataPoints=max_points, extraJson={"gpudashHeatmap": spec},
    )


def table(title: str, queries: Sequence[Query], description: str, columns: Mapping[str, str] | None,
          unit: str = "", steps: list[G.Threshold] | None = None, links: Sequence[dict[str, Any]] = (),
          hide_columns: Sequence[str] = (), link_column: str = "instance", sort: tuple[str, bool] | None = None,
          coloured: str | None = None, rename: Mapping[str, str] | None = None, join_on: str | None = None,
          before: Sequence[dict[str, Any]] = (), overrides: Sequence[dict[str, Any]] = (),
          empty: str | None = None) -> G.Table:
    """Instant queries merged into one table (format "table": one row per series, labels as columns).

    `columns` titles each query's value column by refId ("A": "used"), or None where `rename` titles the
    columns by name; `links` go on the `link_column` cells; `sort` orders the rows by a titled column (desc
    True: largest first); `steps` colour the text of the `coloured` column (the first titled one unless
    named), and a table without steps carries none. `join_on` joins the queries' rows on that label (outer
    join) instead of merging them, for queries that carry different labels; `before` are transformations
    that run before columns are hidden and renamed (to filter or sort on a hidden value); `overrides` are
    further field overrides (a unit per column); `empty` is what the table says when no row answers, where
    that is good news (Grafana says "No data")."""
    refs = [q.ref or chr(ord("A") + i) for i, q in enumerate(queries)]
    names: dict[str, str] = {}
    if columns is not None:
        unknown = set(columns) - set(refs)
        if unknown or len(columns) != len(refs):
            raise ValueError(f"{title}: columns {sorted(columns)} must title each query {refs}")
        # One query's value column is "Value"; merged queries' are "Value #<refId>".
        names = {("Value" if len(refs) == 1 else f"Value #{ref}"): columns[ref] for ref in refs}
    names.update(rename or {})
    instant = [Query(q.expr, "", True, ref) for q, ref in zip(queries, refs, strict=True)]
    first = ({"id": "joinByField", "options": {"byField": join_on, "mode": "outer"}} if join_on else
             {"id": "merge", "options": {}})
    # Each query's rows keep their metric name, and a merge joins only rows whose every label agrees: without
    # the name dropped first, a GPU two recordings list shows as two rows.
    merged = len(queries) > 1 and not join_on
    unnamed = [{"id": "organize", "options": {"excludeByName": {"__name__": True}}}] if merged else []
    transformations: list[dict[str, Any]] = [*unnamed, first, *before]
    # A join keeps each query's time column apart, numbered from 1.
    times = [f"Time {i}" for i in range(1, len(queries) + 1)] if join_on else []
    excluded = {"Time": True, **{t: True for t in times}, **{c: True for c in hide_columns}}
    organize: dict[str, Any] = {"excludeByName": excluded}
    if names:
        organize["renameByName"] = names
    transformations.append({"id": "organize", "options": organize})
    if sort is not None:
        field_, desc = sort
        if field_ not in names.values():
            raise ValueError(f"{title}: sorted by {field_!r}, which is not one of its columns")
        transformations.append({"id": "sortBy", "options": {"fields": {}, "sort": [{"field": field_, "desc": desc}]}})
    field_overrides: list[dict[str, Any]] = []
    if links:
        field_overrides.append({"matcher": {"id": "byName", "options": link_column},
                                "properties": [{"id": "links", "value": list(links)}]})
    if steps:
        target = coloured or (columns[refs[0]] if columns else None)
        if target is not None:
            field_overrides.append({"matcher": {"id": "byName", "options": target},
                                    "properties": [{"id": "custom.cellOptions", "value": {"type": "color-text"}}]})
    field_overrides += [*labels_as_text(unit), *overrides]
    return G.Table(
        title=title, description=description, targets=_targets(instant, table_format=True), unit=unit,
        thresholds=steps or color_steps((GREEN, None)), transformations=transformations, overrides=field_overrides,
        maxDataPoints=None, extraJson={"fieldConfig": {"defaults": {"noValue": empty}}} if empty else {},
    )


def state_timeline(title: str, query: Query, description: str, steps: list[G.Threshold]) -> G.StateTimeline:
    return G.StateTimeline(
        title=title, description=description, targets=_targets([query]), thresholds=steps,
        mergeValues=True, maxDataPoints=None,
    )


# ------------------------------------------------------------------------------------------- layout


@dataclass
class PanelGrid:
    """Places panels left to right in rows of 24 grid units; a section starts a collapsible row."""

    panels: list[G.Panel] = field(default_factory=list)
    _x: int = 0
    _y: int = 0
    _row_height: int = 0

    def section(self, title: str) -> None:
        self._newline()
        self.panels.append(G.RowPanel(title=title, collapsed=False, gridPos=G.GridPos(h=1, w=FULL_WIDTH, x=0,
                                                                                        y=self._y)))
        self._y += 1

    def add(self, panel: G.Panel | None, w: int, h: int = 8) -> None:
        if panel is None:
            return
        if self._x + w > FULL_WIDTH:
            self._newline()
        panel.gridPos = G.GridPos(h=h, w=w, x=self._x, y=self._y)
        self.panels.append(panel)
        self._x += w
        self._row_height = max(self._row_height, h)

    def _newline(self) -> None:
        if self._x:
            self._y += self._row_height
        self._x = 0
        self._row_height = 0
