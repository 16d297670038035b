"""Panel builders on top of grafanalib, with colour steps from thresholds.yaml and a grid layout.

A builder returns None when the metric profile cannot fill the panel; `Layout` skips those, so a
profile without (say) HBM temperature gets a dashboard without that panel instead of an empty one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from math import gcd
from typing import Any

from grafanalib import core as G

from gpudash.config.thresholds import Levels, Thresholds

GREEN, YELLOW, ORANGE, RED, BLUE = "green", "yellow", "orange", "red", "blue"
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
    """Below idle = yellow (wasted GPU), idle..saturated = green, above saturated = red."""
    u = t.utilization
    return color_steps((YELLOW, None), (GREEN, u.idle_below_percent), (RED, u.saturated_above_percent))


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


def _targets(queries: Sequence[Query]) -> list[G.Target]:
    return [
        G.Target(expr=q.expr, legendFormat=q.legend, refId=q.ref or chr(ord("A") + i), instant=q.instant,
                 format="table" if q.instant and q.legend == "__table__" else "time_series")
        for i, q in enumerate(queries)
    ]


def timeseries(title: str, queries: Sequence[Query], unit: str, description: str,
               steps: list[G.Threshold] | None = None, min_: float | None = None, max_: float | None = None,
               dashed_refs: Sequence[str] = (), fill: int = 0) -> G.TimeSeries:
    """A time series; `dashed_refs` draws those queries as dashed reference lines (limits, yesterday)."""
    overrides = [
        {"matcher": {"id": "byFrameRefID", "options": ref},
         "properties": [{"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}},
                        {"id": "custom.lineWidth", "value": 2}]}
        for ref in dashed_refs
    ]
    return G.TimeSeries(
        title=title, description=description, targets=_targets(queries), unit=unit,
        thresholds=steps or color_steps((GREEN, None)), thresholdsStyleMode="line" if steps else "off",
        valueMin=min_, valueMax=max_, overrides=overrides, fillOpacity=fill, legendDisplayMode="table",
        legendPlacement="right", legendCalcs=["lastNotNull", "max"], lineWidth=1, showPoints="never",
        spanNulls=False, maxDataPoints=None,
    )


def stat(title: str, query: Query, unit: str, description: str, steps: list[G.Threshold] | None = None,
         decimals: int | None = None, graph: bool = False, no_value: str = "no data") -> G.Stat:
    """A single number; without a sparkline it asks for the instant value only, which is cheaper."""
    if not graph:
        query = Query(query.expr, query.legend, True, query.ref)
    return G.Stat(
        title=title, description=description, targets=_targets([query]), format=unit, decimals=decimals,
        thresholds=steps or color_steps((GREEN, None)), graphMode="area" if graph else "none",
        reduceCalc="lastNotNull", colorMode="value", noValue=no_value, maxDataPoints=None,
    )


def gauge(title: str, query: Query, unit: str, description: str, steps: list[G.Threshold],
          min_: float, max_: float) -> G.GaugePanel:
    """One gauge per series, showing the value now (an instant query)."""
    query = Query(query.expr, query.legend, True, query.ref)
    return G.GaugePanel(
        title=title, description=description, targets=_targets([query]), format=unit, min=min_, max=max_,
        thresholds=steps, thresholdMarkers=True, thresholdLabels=False, calc="lastNotNull", maxDataPoints=None,
    )


def bar_gauge(title: str, query: Query, unit: str, description: str, steps: list[G.Threshold],
              min_: float, max_: float) -> G.BarGauge:
    """One bar per series, showing the value now (an instant query)."""
    query = Query(query.expr, query.legend, True, query.ref)
    return G.BarGauge(
        title=title, description=description, targets=_targets([query]), format=unit, min=min_, max=max_,
        thresholds=steps, displayMode="gradient", orientation="horizontal", calc="lastNotNull",
        maxDataPoints=None,
    )


def heatmap(title: str, query: Query, description: str, t: Thresholds, y_unit: str = "short",
            max_points: int = 200) -> G.Heatmap:
    """Native heatmap, one row per series; colour = utilization, banded to the thresholds' levels."""
    # Yellow (idle) to red (saturated), in bands whose edges fall on the idle and saturated levels.
    spec = {"unit": "percent", "scheme": "YlOrRd", "reverse": False, "min": 0, "max": 100,
            "steps": heatmap_bands(t), "y_unit": y_unit}
    return G.Heatmap(
        title=title, description=description, targets=_targets([query]), thresholds=utilization_steps(t),
        maxDataPoints=max_points, extraJson={"gpudashHeatmap": spec},
    )


def count_heatmap(title: str, query: Query, description: str, max_points: int = 200) -> G.Heatmap:
    """Native heatmap of counts (GPUs per band): colour = how many GPUs, darker = more."""
    spec = {"unit": "none", "scheme": "Blues", "reverse": False, "steps": 64, "y_unit": "percent"}
    return G.Heatmap(
        title=title, description=description, targets=_targets([query]), thresholds=color_steps((BLUE, None)),
        maxDataPoints=max_points, extraJson={"gpudashHeatmap": spec},
    )


def table(title: str, queries: Sequence[Query], description: str, unit: str = "",
          steps: list[G.Threshold] | None = None, links: Sequence[dict[str, Any]] = (),
          hide_columns: Sequence[str] = (), link_column: str = "instance",
          rename: Mapping[str, str] | None = None, join_on: str | None = None,
          before: Sequence[dict[str, Any]] = (), overrides: Sequence[dict[str, Any]] = ()) -> G.Table:
    """Instant queries merged into one table; `links` go on the `link_column` cells; `rename` titles columns
    (a merged query's values are "Value #<refId>").

    `join_on` joins the queries' rows on that label instead (outer join), for queries that carry different
    labels; `before` are transformations that run before columns are hidden and renamed (to filter or sort
    on a hidden value); `overrides` are further field overrides (a unit per column)."""
    instant = [Query(q.expr, "__table__", True, q.ref) for q in queries]
    first = ({"id": "joinByField", "options": {"byField": join_on, "mode": "outer"}} if join_on else
             {"id": "merge", "options": {}})
    transformations: list[dict[str, Any]] = [first, *before]
    # A join keeps each query's time column apart, numbered from 1.
    times = [f"Time {i}" for i in range(1, len(queries) + 1)] if join_on else []
    excluded = {"Time": True, **{t: True for t in times}, **{c: True for c in hide_columns}}
    organize: dict[str, Any] = {"excludeByName": excluded}
    if rename:
        organize["renameByName"] = dict(rename)
    transformations.append({"id": "organize", "options": organize})
    field_overrides = []
    if links:
        field_overrides.append({"matcher": {"id": "byName", "options": link_column},
                                "properties": [{"id": "links", "value": list(links)}]})
    field_overrides += overrides
    return G.Table(
        title=title, description=description, targets=_targets(instant), unit=unit,
        thresholds=steps or color_steps((GREEN, None)), transformations=transformations, overrides=field_overrides,
        maxDataPoints=None,
    )


def state_timeline(title: str, query: Query, description: str, steps: list[G.Threshold]) -> G.StateTimeline:
    return G.StateTimeline(
        title=title, description=description, targets=_targets([query]), thresholds=steps,
        mergeValues=True, maxDataPoints=None,
    )


# ------------------------------------------------------------------------------------------- layout


@dataclass
class Layout:
    """Places panels left to right in rows of 24 grid units; a section starts a collapsible row."""

    panels: list[Any] = field(default_factory=list)
    _x: int = 0
    _y: int = 0
    _row_height: int = 0

    def section(self, title: str) -> None:
        self._newline()
        self.panels.append(G.RowPanel(title=title, collapsed=False, gridPos=G.GridPos(h=1, w=FULL_WIDTH, x=0,
                                                                                        y=self._y)))
        self._y += 1

    def add(self, panel: Any | None, w: int, h: int = 8) -> None:
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
