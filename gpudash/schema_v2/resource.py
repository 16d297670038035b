"""A classic dashboard as a `dashboard.grafana.app/v2` resource: `{apiVersion, kind, metadata: {name}, spec}`.

What Grafana 13 serves as `/apis/dashboard.grafana.app/v2` and what a Git Sync repository holds. The spec is
@grafana/schema 13.2's v2 `Spec`; `metadata.name` is the dashboard uid; nothing the server owns (namespace,
resourceVersion, generation, status) is written.
"""

from __future__ import annotations

from typing import Any

from gpudash.catalog import Profile
from gpudash.errors import ConfigError
from gpudash.schema_v2 import controls
from gpudash.schema_v2.elements import element_key, may_be_empty, number_panels, panel_element
from gpudash.schema_v2.layout import ROWS, SECTIONS, layout

GROUP = "dashboard.grafana.app"
VERSION = "v2"  # GA in Grafana 13, served by default (grafana-13-apis §1.1); v2beta1 is off by default
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "Dashboard"


def to_v2(v1_dashboard: dict[str, Any], *, profile: Profile | None = None, sections: str = ROWS) -> dict[str, Any]:
    """The v2 resource of a classic dashboard. Pure: the same dashboard always gives the same resource.

    `profile`: the site's metric profile; with it, panels that may have no data on the site (those reading only
    signals an exporter publishes when asked) are hidden while empty. `sections`: `rows` or `tabs` for the
    classic rows. A variable type without a v2 form raises ConfigError naming the dashboard and the variable.
    """
    uid = v1_dashboard.get("uid")
    title = str(v1_dashboard.get("title", ""))
    if not isinstance(uid, str) or not uid:
        raise ConfigError(f"dashboard {title!r}: no uid, which a v2 resource needs as its name")
    if sections not in SECTIONS:
        raise ValueError(f"sections: {sections!r}, expected one of {', '.join(SECTIONS)}")
    numbered = number_panels(list(v1_dashboard.get("panels") or []))
    elements = {element_key(pid): panel_element(pid, panel) for pid, panel in numbered if panel.get("type") != "row"}

    def empty(panel: dict[str, Any]) -> bool:
        return profile is not None and may_be_empty(panel, profile)

    spec: dict[str, Any] = {
        "title": title,
        "tags": list(v1_dashboard.get("tags") or []),
        "cursorSync": controls.CURSOR_SYNC.get(v1_dashboard.get("graphTooltip", 0), "Off"),
        "preload": bool(v1_dashboard.get("preload", False)),
        "editable": bool(v1_dashboard.get("editable", True)),
        "links": [controls.link(li) for li in v1_dashboard.get("links") or []],
        "timeSettings": controls.time_settings(v1_dashboard),
        "variables": [controls.variable(v, f"dashboard {uid}")
                      for v in (v1_dashboard.get("templating") or {}).get("list") or []],
        "annotations": [controls.annotation(a) for a in (v1_dashboard.get("annotations") or {}).get("list") or []],
        "elements": elements,
        "layout": layout(numbered, empty, sections, title),
    }
    for key in ("description", "liveNow"):
        if key in v1_dashboard:
            spec[key] = v1_dashboard[key]
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": uid}, "spec": spec}
