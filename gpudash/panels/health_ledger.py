"""The per-GPU health ledger: what each GPU went through over the last `$ledger` (30 or 90 days), by UUID.

Keyed by the GPU's UUID (the profile's `uuid_label`), not by node and slot, so a GPU's history follows it
when it moves between nodes: each counter's rises are summed over every slot the UUID sat in, one point an
hour (gpudash/promql/ledger_recordings.py: a sparse recording, so a healthy GPU costs the ledger nothing),
and the row names the node it was seen on last.

The columns are a table (`ledger_columns`), each with the action its events call for; rows are ranked by a
score in which every action owns two decimal digits (100^cost x events, at most 99 per action), so a GPU
with one event that calls for a costlier action always ranks above any number of cheaper ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpudash.escape import re2_any
from gpudash.health.xid import ACTIONS, XID_TABLE, action_for
from gpudash.panels.health_actions import cost
from gpudash.panels.job_panels import node_link
from gpudash.panels.visualizations import PanelGrid, Query, table
from gpudash.promql.ledger_recordings import COUNTERS, STOPPED, record_name
from gpudash.promql.query import Matcher, PromQL, Scope
from gpudash.promql.resets import EPISODES, XID_BY_UUID

WINDOW = "$ledger"
TOP = 50
PER_ACTION = 99  # events counted per action in the score: two decimal digits
UNKNOWN_XID = 0  # not a real code: action_for() gives it the table's default for codes it does not list
COUNT_PX = 88  # a count column's least width: its number, and its header's first word or two
NARROW_PX = 64  # the GPU index and the cluster's name
LABEL_PX = 120  # a UUID or a node, cut short; the worst action's name


@dataclass(frozen=True)
class LedgerColumn:
    title: str
    expr: str  # one series per UUID: the events (or seconds) over the window
    action: str  # what these events call for: the score's weight
    unit: str = "none"


def _over(q: PromQL, key: str, extra: tuple[Matcher, ...] = ()) -> str:
    """Events of one counter (the sum of its hourly rises), or the highest of one flag, over the window: a
    sparse recording per GPU by UUID (gpudash/promql/ledger_recordings.py), so a healthy GPU costs nothing."""
    func = "sum" if key in COUNTERS else "max"  # recorded in DCGM's units
    return f"{func}_over_time({record_name(key)}{q.scope.selector(extra)}[{WINDOW}])"


def _per_uuid(q: PromQL, expr: str) -> str:
    return f"sum by ({q.profile.uuid_label}) ({expr})"


def _tagged(terms: list[str], label: str) -> str:
    """Several expressions of the same labels kept apart (by a label per term), so `or` keeps them all."""
    return "\nor\n".join(f'label_replace({t}, "{label}", "{i}", "", "")' for i, t in enumerate(terms))


def _xids(q: PromQL, codes: Matcher) -> str:
    """XID events of some codes per UUID: the bundled exporter's per-code counter where a GPU has one, else the
    events of dcgm-exporter's last-XID gauge, recorded by UUID (a sparse recording: only the events are read)."""
    parts = []
    if q.has("xid_total"):
        parts.append(_per_uuid(q, _over(q, "xid_total", (codes,))))
    if q.has("xid_last") and q.available(XID_BY_UUID):
        recorded = f"{q.recordings[XID_BY_UUID].record}{q.scope.selector((codes,))}"
        parts.append(_per_uuid(q, f"sum_over_time({recorded}[{WINDOW}])"))
    return "\nor\n".join(parts)


def xid_actions() -> dict[str, tuple[int, ...]]:
    """The XID table's codes by the action their alerts call for (GPUXidError's `action`), cheapest first: a
    column per action, so the ledger's worst action is the one the alerts ask for."""
    by_action: dict[str, list[int]] = {}
    for code in sorted(XID_TABLE):
        by_action.setdefault(action_for(code).action, []).append(code)
    return {action: tuple(by_action.get(action, ())) for action in ACTIONS
            if action in by_action or action == action_for(UNKNOWN_XID).action}


def xid_title(action: str) -> str:
    return "XIDs needing no action" if action == "none" else f"XIDs for {action}"


def resets_title(q: PromQL) -> str:
    return f"Resets in {q.thresholds.alerts.repeat_offender.window}"


def ledger_columns(q: PromQL) -> list[LedgerColumn]:
    """Every column the profile can fill, in reading order: resets, memory, XIDs, NVLink, throttling."""
    columns: list[LedgerColumn] = []
    if q.available(EPISODES):
        # GPURepeatOffender's count over its own window (not $ledger): a card one reset short of an RMA shows
        window = q.thresholds.alerts.repeat_offender.window
        columns.append(LedgerColumn(resets_title(q), _per_uuid(q, q.recorded_over_time("count", EPISODES, window)),
                                    "reset_gpu"))

    def counted(title: str, key: str, action: str) -> None:
        if q.has(key):
            columns.append(LedgerColumn(title, _per_uuid(q, _over(q, key)), action))

    def flagged(title: str, key: str, action: str) -> None:
        if q.has(key):
            columns.append(LedgerColumn(title, _per_uuid(q, _over(q, key)), action))

    # Each memory column weighs what the XID that reports the same event calls for (48 DBE, 92 SBE rate,
    # 63 row remap recorded); a pending remap wants a reset when idle, a failed one the GPU replaced.
    counted("DBE volatile", "ecc_dbe_vol", action_for(48).action)
    counted("DBE aggregate", "ecc_dbe_agg", action_for(48).action)
    counted("SBE volatile", "ecc_sbe_vol", action_for(92).action)
    counted("SBE aggregate", "ecc_sbe_agg", action_for(92).action)
    counted("Uncorrectable remapped rows", "remapped_rows_unc", action_for(63).action)
    counted("Correctable remapped rows", "remapped_rows_cor", action_for(63).action)
    flagged("Remap pending", "row_remap_pending", "reset_gpu")
    flagged("Remap failure", "row_remap_failure", "rma")
    if q.has("xid_total") or (q.has("xid_last") and q.available(XID_BY_UUID)):
        unknown = action_for(UNKNOWN_XID).action  # what a code not in the table calls for
        for action, codes in xid_actions().items():
            terms = [_xids(q, ("xid", "=~", re2_any(str(c) for c in codes)))] if codes else []
            if action == unknown:
                terms.append(_xids(q, ("xid", "!~", re2_any(str(c) for c in sorted(XID_TABLE)))))
            expr = _per_uuid(q, _tagged(terms, "xid_codes")) if len(terms) > 1 else terms[0]
            columns.append(LedgerColumn(xid_title(action), expr, action))
    nvlink = [_over(q, k) for k in ("nvlink_crc_flit", "nvlink_crc_data", "nvlink_replay",
                                                   "nvlink_recovery") if q.has(k)]
    per_link = _per_uuid(q, _over(q, "nvlink_link_errors")) if q.has("nvlink_link_errors") else ""
    if nvlink or per_link:
        # DCGM's per-GPU totals where published, else the bundled exporter's per-link counters: never both.
        summed = _per_uuid(q, _tagged(nvlink, "nvlink_error")) if nvlink else ""
        expr = f"{summed}\nor\n{per_link}" if summed and per_link else summed or per_link
        columns.append(LedgerColumn("NVLink errors", expr, action_for(74).action))
    for title, key in (("Thermal throttled", "thermal_violation"), ("Power throttled", "power_violation")):
        if q.has(key):
            # Violation counters count nanoseconds: shown as time.
            columns.append(LedgerColumn(title, f"{_per_uuid(q, _over(q, key))} / 1e9", "none", "s"))
    return columns


def score(q: PromQL, columns: list[LedgerColumn]) -> str:
    """Per UUID: sum over actions of 100^cost x min(events calling for it, 99)."""
    groups = []
    for action in ACTIONS:
        mine = [c.expr for c in columns if c.action == action]
        if mine:
            events = _per_uuid(q, _tagged(mine, "ledger_column"))
            groups.append(f"clamp_max({events}, {PER_ACTION}) * {100 ** cost(action)}")
    return _per_uuid(q, _tagged(groups, "ledger_action"))


def seen_last(q: PromQL) -> str:
    """1 per UUID, labelled with the cluster, node and slot where the GPU reported last within the window."""
    uuid = q.profile.uuid_label
    where = ", ".join(dict.fromkeys((uuid, "cluster", "instance", q.gpu)))
    # `* 0 + time()`: where it reports now is the latest; before that, the latest slot it stopped reporting in
    now = f"max by ({where}) ({q.profile.ref('gpu_util').name}{q.scope.selector()} * 0 + time())"
    before = f"max by ({where}) (last_over_time({STOPPED}{q.scope.selector()}[{WINDOW}]))"
    return f"topk by ({uuid}) (1, {now} or {before}) > bool 0"


def _action_mappings() -> list[dict[str, Any]]:
    """The score shown as the costliest action it holds (its highest two-digit group)."""
    # `none` from 0: seconds throttled can add up to less than one.
    return [{"type": "range", "options": {"from": 100 ** i if i else 0, "to": 100 ** (i + 1) - 1e-9,
                                          "result": {"text": action, "index": i}}}
            for i, action in enumerate(ACTIONS)]


def ledger_section(layout: PanelGrid, health: PromQL) -> None:
    """The ledger table, when the profile publishes anything it can count."""
    # The counters are read across the clusters chosen, whatever the node: a GPU's history on other nodes counts.
    q = health.with_scope(Scope(tuple(m for m in health.scope.matchers if m[0] == "cluster")))
    columns = ledger_columns(q)
    if not columns:
        return
    uuid, gpu = q.profile.uuid_label, q.gpu
    offender = q.thresholds.alerts.repeat_offender
    where = ", ".join(label for label in dict.fromkeys(("cluster", "instance", gpu)) if label != uuid)
    # seen_last ends in a comparison, which binds looser than `*`: in parentheses, or the row's value is 1
    rows = f"topk({TOP}, {score(q, columns)} > 0)\n* on ({uuid}) group_left ({where})\n({seen_last(health)})"
    queries = [Query(rows, ref="A")] + [Query(f"({c.expr}) > 0") for c in columns]
    rename = {"Value #A": "worst action", **{f"Value #{chr(ord('B') + i)}": c.title for i, c in enumerate(columns)}}
    keep = {"id": "filterByValue", "options": {"filters": [{"fieldName": "Value #A", "config": {"id": "isNotNull",
                                                                                                 "options": {}}}],
                                               "match": "all", "type": "include"}}
    sort = {"id": "sortBy", "options": {"fields": {}, "sort": [{"field": "Value #A", "desc": True}]}}
    overrides = [{"matcher": {"id": "byName", "options": "worst action"},
                  "properties": [{"id": "mappings", "value": _action_mappings()}]}]
    overrides += [{"matcher": {"id": "byName", "options": c.title}, "properties": [{"id": "unit", "value": c.unit}]}
                  for c in columns if c.unit != "none"]
    # Grafana gives an auto-sized column at least 150 px: a ledger of a dozen columns would run past the panel's
    # edge. Counts and short labels need less; a header cut short ends in "…" and the description names each.
    least = {uuid: LABEL_PX, "instance": LABEL_PX, "worst action": LABEL_PX, gpu: NARROW_PX, "cluster": NARROW_PX,
             **{c.title: COUNT_PX for c in columns}}
    overrides += [{"matcher": {"id": "byName", "options": name}, "properties": [{"id": "custom.minWidth", "value": px}]}
                  for name, px in least.items()]
    layout.add(table(
        f"GPU ledger by UUID over $ledger (worst {TOP})",
        queries,
        "What each GPU went through over the last $ledger, by UUID, so its history follows it from node to node: "
        f"the resets it needed within the last {offender.window} (GPURepeatOffender opens an RMA ticket at "
        f"{offender.resets}), ECC errors, remapped rows, a pending or failed remap, XIDs by class "
        "(gpudash/health/xid_catalog.csv), "
        "NVLink errors and time throttled by heat or power. Worst first: by the costliest action its events call "
        "for (worst action), then by how many. `instance` is the node it reported on last; click it to open "
        "that node on the GPU. Counted hour by hour: an event shows at the next hourly evaluation, up to an hour "
        "later. A failed remap is an "
        "RMA; DBEs or a pending remap want the GPU reset when idle; "
        "many XIDs of one class on one GPU that moved nodes point at the GPU, not the node. Blank = none. The "
        "bundled exporter publishes every column; dcgm-exporter publishes the ECC, NVLink, violation and "
        "pending-remap counters only when its counters CSV enables them, and has no per-link or per-code XID "
        "counters of gpudash (gpudash_*).",
        None, "none", None, links=[node_link(gpu)], join_on=uuid, rename=rename, before=[keep, sort],
        overrides=overrides), w=24, h=12)
