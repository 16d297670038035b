"""Classic panels as schema v2 elements: a `Panel` with its `QueryGroup` (queries, transformations, query
options) and its `VizConfig` (plugin, version, options, field config).

Every element is keyed `panel-<id>`. A classic panel without an id still becomes an element: it gets the
next id after the largest one in the dashboard, in the order the panels come, so the same dashboard always
gives the same keys (Grafana's own v1 -> v2 conversion drops such panels, grafana#117084).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpudash.catalog import Profile
from gpudash.promql.recordings import signals_in

QUERY_VERSION = "v0"  # the version Grafana's own conversion gives every data query
# The query-level keys that are the panel query's own in v2, not the data source's query model.
_PANEL_QUERY_KEYS = ("refId", "hide", "datasource")
# Panel keys that become query options, under the same name.
_QUERY_OPTIONS = ("maxDataPoints", "interval", "timeFrom", "timeShift", "hideTimeOverride", "cacheTimeout",
                  "queryCachingTTL")


def element_key(panel_id: int) -> str:
    return f"panel-{panel_id}"


def number_panels(panels: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """(id, panel) for every panel, rows' own panels included, in order; a panel without an integer id, or with
    the id of a panel before it, takes the next free one."""
    flat = list(_flatten(panels))
    taken = [p["id"] for p in flat if isinstance(p.get("id"), int) and not isinstance(p["id"], bool)]
    next_id = max(taken, default=0) + 1
    seen: set[int] = set()
    numbered = []
    for panel in flat:
        pid = panel.get("id")
        if not isinstance(pid, int) or isinstance(pid, bool) or pid in seen:
            pid, next_id = next_id, next_id + 1
        seen.add(pid)
        numbered.append((pid, panel))
    return numbered


def _flatten(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        if panel.get("type") == "row":
            yield from panel.get("panels") or []


def data_query(source: dict[str, Any] | None, spec: dict[str, Any]) -> dict[str, Any]:
    """A `DataQuery` of the data source `source` (a classic `{type, uid}` reference)."""
    source = source or {}
    query: dict[str, Any] = {"kind": "DataQuery", "group": source.get("type", "prometheus"),
                             "version": QUERY_VERSION, "spec": spec}
    if source.get("uid"):
        query["datasource"] = {"name": source["uid"]}
    return query


def panel_element(panel_id: int, panel: dict[str, Any]) -> dict[str, Any]:
    """The `Panel` element of one classic panel."""
    default_source = panel.get("datasource")
    queries = []
    for target in panel.get("targets") or []:
        source = target.get("datasource") or default_source
        model = {k: v for k, v in target.items() if k not in _PANEL_QUERY_KEYS}
        queries.append({"kind": "PanelQuery", "spec": {
            "query": data_query(source, model), "refId": target.get("refId", "A"),
            "hidden": bool(target.get("hide", False))}})
    transformations = [_transformation(t) for t in panel.get("transformations") or []]
    spec: dict[str, Any] = {
        "id": panel_id,
        "title": panel.get("title", ""),
        "links": list(panel.get("links") or []),
        "data": {"kind": "QueryGroup", "spec": {
            "queries": queries, "transformations": transformations,
            "queryOptions": {k: panel[k] for k in _QUERY_OPTIONS if k in panel}}},
        "vizConfig": {"kind": "VizConfig", "group": panel.get("type", "timeseries"),
                      "version": panel.get("pluginVersion", ""),
                      "spec": {"options": dict(panel.get("options") or {}),
                               "fieldConfig": _field_config(panel.get("fieldConfig"))}},
    }
    for key in ("description", "transparent"):
        if key in panel:
            spec[key] = panel[key]
    return {"kind": "Panel", "spec": spec}


def _transformation(classic: dict[str, Any]) -> dict[str, Any]:
    spec = {k: v for k, v in classic.items() if k != "id"}
    spec.setdefault("options", {})
    return {"kind": "Transformation", "group": classic["id"], "spec": spec}


def _field_config(classic: dict[str, Any] | None) -> dict[str, Any]:
    classic = classic or {}
    return {"defaults": dict(classic.get("defaults") or {}), "overrides": list(classic.get("overrides") or [])}


def may_be_empty(panel: dict[str, Any], profile: Profile) -> bool:
    """Whether a panel reads only signals the site's exporter publishes when asked (a DCGM field outside
    dcgm-exporter's default counters, or one only gpudash's exporter has): on many deployments it has no data.

    A profile that publishes a signal under a name of its own (nvidia_smi) always has it when it has it at all:
    what it lacks, the definitions leave out.
    """
    signals = set()
    for target in panel.get("targets") or []:
        signals |= signals_in(str(target.get("expr", "")), profile)
    return bool(signals) and all(s.optional and profile.has(s.key) and profile.ref(s.key).name == s.dcgm_name
                                 for s in signals)
