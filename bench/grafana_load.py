"""Open a Grafana dashboard against Prometheus the way Grafana does, without Grafana, and time it.

What Grafana (10-12, Prometheus data source, server-side queries) sends when a dashboard opens:

- Variables first, in order (each may use the ones before): `label_values(selector, label)` becomes
  /api/v1/label/<label>/values?match[]=<selector> over the dashboard's time range. A variable with no
  saved selection takes its first option, which is "All" when it has one; All is the variable's allValue,
  or else every value regex-escaped and joined as (v1|v2|...).
- Then every panel not inside a collapsed row. Range = the dashboard default (time.from .. now); a range
  target's step is Grafana's interval: range / max data points (the panel's maxDataPoints, else its width
  in pixels on a `SCREEN_PX` wide screen), rounded to Grafana's steps, at least the minimum interval (the
  target's or panel's `interval`, else the data source's scrape interval), start and end aligned to it.
  $__rate_interval = max(step + scrape interval, 4 x scrape interval); $__range is the range in seconds.
  Instant targets are one /api/v1/query at now.
- Annotations: each enabled Prometheus annotation is one range query over the dashboard's range, its step
  that of a panel as wide as the screen, sent with the panels.
- Concurrency: the browser keeps `CONNECTIONS` panel requests in flight; the targets of one panel go in one
  request and Grafana runs them in parallel.

Timing stops when the response body has been read; series are counted afterwards.
"""

from __future__ import annotations

import json
import re
import statistics
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from gpudash.check.queries import interpolate
from gpudash.config.durations import grafana_ms

SCREEN_PX = 1600
GRID_COLUMNS = 24
CONNECTIONS = 6
SCRAPE_S = 15

# Grafana's roundInterval (pkg/tsdb/intervalv2): (below this many ms, use this many ms).
_ROUND_MS = ((15, 10), (35, 20), (75, 50), (150, 100), (350, 200), (750, 500), (1500, 1000), (3500, 2000),
             (7500, 5000), (12500, 10000), (17500, 15000), (25000, 20000), (45000, 30000), (90000, 60000),
             (210000, 120000), (450000, 300000), (750000, 600000), (1050000, 900000), (1500000, 1200000),
             (2700000, 1800000), (5400000, 3600000), (9000000, 7200000), (16200000, 10800000),
             (32400000, 21600000), (86400000, 43200000), (604800000, 86400000))


def round_interval_ms(ms: float) -> int:
    for below, value in _ROUND_MS:
        if ms < below:
            return value
    return 604800000


def seconds(text: str) -> int:
    """'15s', '1m', '6h' -> seconds; '' -> 0."""
    if not text.strip():
        return 0
    ms = grafana_ms(text.strip(), units=("s", "m", "h", "d", "w"))
    if ms is None:
        raise ValueError(f"not a Grafana interval: {text!r}")
    return ms // 1000


def grafana_step(range_s: int, max_points: int, min_s: int) -> int:
    """Grafana's query interval: range / max data points, rounded to its steps, at least the minimum."""
    step_ms = range_s * 1000 / max_points
    return min_s if step_ms < min_s * 1000 else max(min_s, round_interval_ms(step_ms) // 1000)


def dashboard_range_s(dashboard: dict[str, Any]) -> int:
    match = re.fullmatch(r"now-(\d+[smhdw])", dashboard["time"]["from"])
    if not match or dashboard["time"]["to"] != "now":
        raise ValueError(f"unsupported time range {dashboard['time']}")
    return seconds(match.group(1))


# ------------------------------------------------------------------------------------------ HTTP


def post(url: str, path: str, params: dict[str, str]) -> bytes:
    data = urllib.parse.urlencode(params).encode()
    request = urllib.request.Request(f"{url}{path}", data=data, method="POST")
    with urllib.request.urlopen(request, timeout=300) as response:
        return bytes(response.read())


def series(body: bytes, what: str) -> list[dict[str, str]]:
    """The label sets of the series in a query response."""
    doc = json.loads(body)
    if doc.get("status") != "success":
        raise RuntimeError(f"{what}: {doc.get('error', doc)}")
    result = doc["data"]["result"]
    return [r["metric"] for r in result] if isinstance(result, list) else [{}]


# ------------------------------------------------------------------------------------------ variables

_LABEL_VALUES = re.compile(r"^\s*label_values\(\s*(?:(.*),\s*)?([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$")
_REGEX_SPECIAL = re.compile(r"[$^*{}\[\]'+?.()|]")


def regex_escape(value: str) -> str:
    """Grafana's prometheusSpecialRegexEscape, as it lands inside a PromQL string literal."""
    return _REGEX_SPECIAL.sub(lambda m: "\\\\" + m.group(0), value.replace("\\", "\\\\\\\\"))


@dataclass
class Variables:
    values: dict[str, str] = field(default_factory=dict)
    options: dict[str, list[str]] = field(default_factory=dict)
    seconds: float = 0.0


def resolve_variables(url: str, dashboard: dict[str, Any], now: int) -> Variables:
    """Query each variable as Grafana does on load and pick what Grafana picks with no saved selection."""
    out = Variables()
    start = now - dashboard_range_s(dashboard)
    for var in dashboard.get("templating", {}).get("list", []):
        if var.get("type") == "custom":  # a fixed list (the health ledger's window): its current value, no query
            out.values[var["name"]] = (var.get("current") or {}).get("value") or var["query"].split(",")[0]
            continue
        if var.get("type") != "query":
            continue
        query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
        match = _LABEL_VALUES.match(query)
        if not match:
            raise ValueError(f"variable {var['name']}: unsupported query {query!r}")
        selector, label = match.group(1), match.group(2)
        params = {"start": str(start), "end": str(now)}
        if selector:
            params["match[]"] = interpolate(selector, out.values)
        began = time.perf_counter()
        path = f"/api/v1/label/{label}/values?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{url}{path}", timeout=300) as response:
            body = response.read()
        out.seconds += time.perf_counter() - began
        found = sorted(json.loads(body)["data"])
        out.options[var["name"]] = found
        current = var.get("current") or {}
        if current.get("value") not in (None, "$__all", ["$__all"]):
            chosen: list[str] = current["value"] if isinstance(current["value"], list) else [current["value"]]
        elif var.get("includeAll"):
            chosen = ["$__all"]
        else:
            chosen = found[:1]
        if chosen == ["$__all"] and var.get("allValue"):
            out.values[var["name"]] = var["allValue"]
        else:
            picked = found if chosen == ["$__all"] else chosen
            escaped = [regex_escape(v) for v in picked]
            out.values[var["name"]] = escaped[0] if len(escaped) == 1 else "(" + "|".join(escaped) + ")"
    return out


# ------------------------------------------------------------------------------------------ panels


@dataclass(frozen=True)
class Request:
    expr: str
    instant: bool
    start: int
    end: int
    step: int  # seconds; 0 for an instant query

    @property
    def params(self) -> tuple[str, dict[str, str]]:
        if self.instant:
            return "/api/v1/query", {"query": self.expr, "time": str(self.end)}
        return "/api/v1/query_range", {"query": self.expr, "start": str(self.start), "end": str(self.end),
                                       "step": str(self.step)}


@dataclass(frozen=True)
class PanelLoad:
    title: str
    kind: str
    requests: tuple[Request, ...]


def visible_panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Panels Grafana loads on open: not rows, not inside a collapsed row."""
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            continue  # a collapsed row keeps its panels in panel["panels"]; they load when it is opened
        yield panel


def panel_loads(dashboard: dict[str, Any], values: dict[str, str], now: int, scrape_s: int = SCRAPE_S,
                screen_px: int = SCREEN_PX) -> list[PanelLoad]:
    range_s = dashboard_range_s(dashboard)
    loads = []
    for panel in visible_panels(dashboard):
        width_px = panel["gridPos"]["w"] * screen_px // GRID_COLUMNS
        max_points = panel.get("maxDataPoints") or width_px
        requests = []
        for target in panel.get("targets", []):
            if target.get("hide") or not target.get("expr"):
                continue
            min_s = seconds(target.get("interval") or panel.get("interval") or "") or scrape_s
            step = grafana_step(range_s, max_points, min_s)
            rate = max(step + scrape_s, 4 * scrape_s)
            scoped = dict(values, __rate_interval=f"{rate}s", __interval=f"{step}s", __range=f"{range_s}s",
                          __range_s=str(range_s), __range_ms=str(range_s * 1000), __interval_ms=str(step * 1000))
            expr = interpolate(target["expr"], scoped)
            # Grafana's backend: instant when asked; range when asked, or when neither is.
            instant = bool(target.get("instant"))
            if instant:
                requests.append(Request(expr, True, now, now, 0))
            if target.get("range") or not instant:
                requests.append(Request(expr, False, (now - range_s) // step * step, now // step * step, step))
        loads.append(PanelLoad(panel.get("title", ""), panel["type"], tuple(requests)))
    return loads


def annotation_loads(dashboard: dict[str, Any], values: dict[str, str], now: int, scrape_s: int = SCRAPE_S,
                     screen_px: int = SCREEN_PX) -> list[PanelLoad]:
    """The enabled Prometheus annotations: one range query each, as a screen-wide panel would send it."""
    range_s = dashboard_range_s(dashboard)
    loads = []
    for annotation in dashboard.get("annotations", {}).get("list", []):
        target = annotation.get("target") or {}
        expr = target.get("expr") or annotation.get("expr")
        if not annotation.get("enable") or annotation.get("builtIn") or not expr:
            continue
        step = grafana_step(range_s, screen_px, scrape_s)
        rate = max(step + scrape_s, 4 * scrape_s)
        scoped = dict(values, __rate_interval=f"{rate}s", __interval=f"{step}s", __range=f"{range_s}s",
                      __range_s=str(range_s), __range_ms=str(range_s * 1000), __interval_ms=str(step * 1000))
        request = Request(interpolate(expr, scoped), False, (now - range_s) // step * step, now // step * step, step)
        loads.append(PanelLoad(f"annotation: {annotation.get('name', '')}", "annotation", (request,)))
    return loads


@dataclass(frozen=True)
class PanelResult:
    title: str
    seconds: float
    series: int
    labels: frozenset[str] = frozenset()  # every label name on the series returned
    widest: int = 0  # the most series one of its queries returned (a table's queries each give one per row)


@dataclass(frozen=True)
class OpenResult:
    seconds: float  # variables, then every panel and annotation with CONNECTIONS in flight
    variables_s: float
    panels: tuple[PanelResult, ...]
    annotations: tuple[PanelResult, ...] = ()


def _run_panel(url: str, load: PanelLoad) -> tuple[float, list[bytes], str]:
    """Seconds until every request of the panel is answered, the bodies, and the first error ('' if none):
    a query Prometheus gives up on (its 2-minute timeout answers 503) is a result, not the end of the run."""
    began = time.perf_counter()

    def one(request: Request) -> bytes | str:
        try:
            return post(url, *request.params)
        except OSError as exc:  # urllib's HTTPError and URLError are OSErrors
            return f"{type(exc).__name__}: {getattr(exc, 'code', '') or exc}"

    if len(load.requests) == 1:
        answers = [one(load.requests[0])]
    else:
        with ThreadPoolExecutor(len(load.requests)) as pool:
            answers = list(pool.map(one, load.requests))
    took = time.perf_counter() - began
    errors = [a for a in answers if isinstance(a, str)]
    return took, [a for a in answers if isinstance(a, bytes)], errors[0] if errors else ""


def open_dashboard(url: str, dashboard: dict[str, Any], now: int, connections: int = CONNECTIONS) -> OpenResult:
    began = time.perf_counter()
    variables = resolve_variables(url, dashboard, now)
    loads = panel_loads(dashboard, variables.values, now) + annotation_loads(dashboard, variables.values, now)
    with ThreadPoolExecutor(connections) as pool:
        timed = list(pool.map(lambda load: _run_panel(url, load), loads))
    total = time.perf_counter() - began
    panels: list[PanelResult] = []
    annotations: list[PanelResult] = []
    for load, (took, bodies, error) in zip(loads, timed, strict=True):
        answered = [series(body, load.title) for body in bodies]
        found = [labels for one in answered for labels in one]
        title = f"{load.title} (failed: {error})" if error else load.title
        result = PanelResult(title, took, len(found), frozenset(k for m in found for k in m),
                             max(map(len, answered), default=0))
        (annotations if load.kind == "annotation" else panels).append(result)
    return OpenResult(total, variables.seconds, tuple(panels), tuple(annotations))


def median_open(url: str, dashboard: dict[str, Any], now: int, repeat: int = 3,
                warmup: int = 1) -> OpenResult:
    """Open `warmup` times unmeasured, then `repeat` times; per-panel and total medians."""
    for _ in range(warmup):
        open_dashboard(url, dashboard, now)
    runs = [open_dashboard(url, dashboard, now) for _ in range(repeat)]
    panels = tuple(PanelResult(p.title, statistics.median(r.panels[i].seconds for r in runs), p.series, p.labels,
                               p.widest)
                   for i, p in enumerate(runs[0].panels))
    annotations = tuple(PanelResult(a.title, statistics.median(r.annotations[i].seconds for r in runs), a.series)
                        for i, a in enumerate(runs[0].annotations))
    return OpenResult(statistics.median(r.seconds for r in runs), statistics.median(r.variables_s for r in runs),
                      panels, annotations)

