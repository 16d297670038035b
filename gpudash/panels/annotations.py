"""Dashboard annotations: firing alerts and XID events, drawn on every time series of a dashboard."""

from __future__ import annotations

from typing import Any

from grafanalib import core as G

from gpudash.escape import re2_any
from gpudash.panels.grafanalib_fixups import DATASOURCE
from gpudash.promql.query import ALERTS, PromQL
from gpudash.rules.alert_table import alert_names


def prometheus_annotation(name: str, expr: str, colour: str, title: str, text: str, tags: str) -> dict[str, Any]:
    """A Prometheus annotation: a region wherever `expr` has a series, titled and tagged from its labels.

    The query goes in `target` (expr, interval, refId "Anno"), where Grafana's Prometheus data source moves a
    top-level `expr` and `step` when it loads an annotation: written that way, a load and save change nothing.
    The title, text and tag options stay at the top level, where its annotation editor keeps them."""
    return {"datasource": dict(DATASOURCE), "enable": True, "hide": False, "iconColor": colour, "name": name,
            "target": {"expr": expr, "interval": "$__interval", "refId": "Anno"},
            "titleFormat": title, "textFormat": text, "tagKeys": tags, "useValueForTime": False}


def alert_and_xid_annotations(q: PromQL, fleet: bool = False) -> G.Annotations:
    """Firing gpudash alerts (warning and critical) of the dashboard's scope, one per alert and cluster on the
    `fleet`, and XID events on its GPUs (where the profile has them).
    On the `fleet`, where every GPU's gauge at every step is too dear, the XID events come from the recording
    of new codes (PromQL.xid_events `recorded_gauge`), else from dcgm-exporter's windowed count."""
    # gpudash's own alerts only (not every exporter's), and none of the digest's info alerts.
    mine = (("alertstate", "=", "firing"), ("alertname", "=~", re2_any(alert_names())), ("severity", "!=", "info"))
    firing = f"{ALERTS}{q.scope.selector(mine)}"
    gpu = q.gpu
    text = f"{{{{severity}}}}: {{{{cluster}}}} {{{{instance}}}} GPU {{{{{gpu}}}}}"
    if fleet:
        # One marker per alert and cluster: an alert firing on a hundred GPUs is one event on a fleet's graphs.
        firing, text = f"count by (alertname, severity, cluster) ({firing})", "{{severity}}: {{cluster}}"
    found = [prometheus_annotation("Firing alerts", firing, "red", "{{alertname}}", text, "alertname,severity,cluster")]
    xids = q.xid_events("$__interval", per_step=True, scan_gauge=not fleet, recorded_gauge=fleet)
    if xids is not None:
        found.append(prometheus_annotation(
            "XID events", xids, "orange", "XID {{xid}}", f"{{{{instance}}}} GPU {{{{{gpu}}}}}", "xid,cluster"))
    return G.Annotations(list=found)
