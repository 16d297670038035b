"""Dashboard annotations: firing alerts and XID events, drawn on every time series of a dashboard."""

from __future__ import annotations

from typing import Any

from grafanalib import core as G

from gpudash.panels.grafanalib_fixups import DATASOURCE
from gpudash.promql.query import ALERTS, PromQL


def prometheus_annotation(name: str, expr: str, colour: str, title: str, text: str, tags: str) -> dict[str, Any]:
    """A Prometheus annotation: a region wherever `expr` has a series, titled and tagged from its labels.

    The query goes in `target` (expr, interval, refId "Anno"), where Grafana's Prometheus data source moves a
    top-level `expr` and `step` when it loads an annotation: written that way, a load and save change nothing.
    The title, text and tag options stay at the top level, where its annotation editor keeps them."""
    return {"datasource": dict(DATASOURCE), "enable": True, "hide": False, "iconColor": colour, "name": name,
            "target": {"expr": expr, "interval": "$__interval", "refId": "Anno"},
            "titleFormat": title, "textFormat": text, "tagKeys": tags, "useValueForTime": False}


def alert_and_xid_annotations(q: PromQL, fleet: bool = False) -> G.Annotations:
    """Firing gpudash alerts of the dashboard's scope, and XID events on its GPUs (where the profile has them).
    On the `fleet`, where every GPU's gauge at every step is too dear, the XID events come from the recording
    of new codes (PromQL.xid_events `recorded_gauge`), else from dcgm-exporter's windowed count."""
    scope = q.scope.selector((("alertstate", "=", "firing"),))
    gpu = q.gpu
    found = [prometheus_annotation(
        "Firing alerts", f"{ALERTS}{scope}", "red", "{{alertname}}",
        f"{{{{severity}}}}: {{{{cluster}}}} {{{{instance}}}} GPU {{{{{gpu}}}}}", "alertname,severity,cluster")]
    xids = q.xid_events("$__interval", per_step=True, scan_gauge=not fleet, recorded_gauge=fleet)
    if xids is not None:
        found.append(prometheus_annotation(
            "XID events", xids, "orange", "XID {{xid}}", f"{{{{instance}}}} GPU {{{{{gpu}}}}}", "xid,cluster"))
    return G.Annotations(list=found)
