"""The per-GPU health ledger: what each GPU went through over the last `$ledger` (30 or 90 days), by UUID.

Keyed by the GPU's UUID (the profile's `uuid_label`), not by node and slot, so a GPU's history follows it
when it moves between nodes: each counter's increase is summed over every series the UUID had (one per
node it sat in, one per job that held it), and the row names the node it was seen on last.

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
from gpudash.promql.query import Matcher, PromQL, Scope
from gpudash.promql.resets import EPISODES, XID_BY_UUID

WINDOW = "$ledger"
TOP = 50
PER_ACTION = 99  # events counted per action in the score: two decimal digits
SUBQUERY_STEP = "1h"  # how finely "seen last on" looks for the GPU's latest node
UNKNOWN_XID = 0  # not a real code: action_for() gives it the table's default for codes it does not list


@dataclass(frozen=True)
class LedgerColumn:
    title: str
    expr: str  # one series per UUID: the events (or seconds) over the window
    action: str  # what these events call for: the score's weight
    unit: str = "none"


# Counters the bundled exporter creates at a GPU's first event (at 1, not 0): a series that began within the
# window counts from 0. DCGM's counters run for the GPU's life or since the driver loaded, so a series that
# began within the window (a GPU new to a node, an exporter just deployed) counts from its first value.
FROM_ZERO = frozenset({"xid_total"})
# Counters a GPU reset or a driver reload sets back to 0: the reset a DBE calls for must not hide the DBE.
VOLATILE = frozenset({"ecc_dbe_vol", "ecc_sbe_vol"})


def _over(q: PromQL, func: str, key: str, extra: tuple[Matcher, ...] = ()) -> str:
    """Events (`increase`) or the highest flag (`max_over_time`) of one signal over the window.

    Older samples are read at hourly points (a subquery): 4 to 9 times cheaper than every raw sample of 30 or
    90 days, and enough for a counter or a flag that only rises. The last hour is read raw, so an event of the
    last hour counts now, not at the next hourly point. A counter's events are its latest value less its value
    when the window began (or when its series began: FROM_ZERO). A counter that fell (the exporter or the
    driver restarted) counts 0 for that series: an undercount, never an invented event. A VOLATILE counter
    also counts what each fall between two hourly points took away: the errors a GPU reset cleared still
    count after it, unless the reset came within the hour they appeared."""
    ref = q.profile.ref(key)
    series = f"{ref.name}{q.scope.selector(extra)}"
    hourly = f"[{WINDOW}:{SUBQUERY_STEP}]"
    recent = f"[{SUBQUERY_STEP}]"
    if func == "increase":
        latest = f"(last_over_time({series}{recent}) or max_over_time({series}{hourly}))"
        # its value when the window began: the last sample of the hour before, so a missed scrape is no gap
        began = f"last_over_time({series}{recent} offset {WINDOW})"
        if key in FROM_ZERO:
            inner = f"(clamp_min({latest} - {began}, 0) or {latest})"
        else:
            start = f"({began} or min_over_time({series}{hourly}) or min_over_time({series}{recent}))"
            rise = f"{latest} - {start}"
            if key in VOLATILE:
                # What each fall took away, from one hourly point to the next (as cheap as the hourly reads).
                fell = f"sum_over_time((clamp_min({series} offset {SUBQUERY_STEP} - {series}, 0)){hourly})"
                rise = f"{rise} + ({fell} or {latest} * 0)"
            inner = f"clamp_min({rise}, 0)"
    else:
        inner = f"((last_over_time({series}{recent}) > 0) or max_over_time({series}{hourly}))"
    return f"({inner} {ref.convert})" if ref.convert else inner


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
        parts.append(_per_uuid(q, _over(q, "increase", "xid_total", (codes,))))
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
            columns.append(LedgerColumn(title, _per_uuid(q, _over(q, "increase", key)), action))

    def flagged(title: str, key: str, action: str) -> None:
        if q.has(key):
            columns.append(LedgerColumn(title, _per_uuid(q, _over(q, "max_over_time", key)), action))

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
    nvlink = [_over(q, "increase", k) for k in ("nvlink_crc_flit", "nvlink_crc_data", "nvlink_replay",
                                                   "nvlink_recovery") if q.has(k)]
    per_link = _per_uuid(q, _over(q, "increase", "nvlink_link_errors")) if q.has("nvlink_link_errors") else ""
    if nvlink or per_link:
        # DCGM's per-GPU totals where published, else the bundled exporter's per-link counters: never both.
        summed = _per_uuid(q, _tagged(nvlink, "nvlink_error")) if nvlink else ""
        expr = f"{summed}\nor\n{per_link}" if summed and per_link else summed or per_link
        columns.append(LedgerColumn("NVLink errors", expr, action_for(74).action))
    for title, key in (("Thermal throttled", "thermal_violation"), ("Power throttled", "power_violation")):
        if q.has(key):
            # Violation counters count nanoseconds: shown as time.
            columns.append(LedgerColumn(title, f"{_per_uuid(q, _over(q, 'increase', key))} / 1e9", "none", "s"))
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
    uuid, gpu = q.profile.uuid_label, q.gpu
    where = ", ".join(dict.fromkeys((uuid, "cluster", "instance", gpu)))
    # `* 0 + time()`: the moment of each step the GPU reported at. timestamp() inside a subquery seeks every
    # series afresh at each step: 200 times slower here (5.5 s against 0.03 s for 4 GPUs over 30 days).
    seen = f"{q.profile.ref('gpu_util').name}{q.scope.selector()} * 0 + time()"
    now = f"max by ({where}) ({seen})"  # where it reports now, exactly; before that, to the step
    before = f"max by ({where}) (max_over_time(({seen})[{WINDOW}:{SUBQUERY_STEP}]))"
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
    layout.add(table(
        f"GPU ledger by UUID over $ledger (worst {TOP})",
        queries,
        "What each GPU went through over the last $ledger, by UUID, so its history follows it from node to node: "
        f"the resets it needed within the last {offender.window} (GPURepeatOffender opens an RMA ticket at "
        f"{offender.resets}), ECC errors, remapped rows, a pending or failed remap, XIDs by class "
        "(gpudash/health/xid_catalog.csv), "
        "NVLink errors and time throttled by heat or power. Worst first: by the costliest action its events call "
        "for (worst action), then by how many. `instance` is the node it reported on last; click it to open "
        "that node on the GPU. A failed remap is an RMA; DBEs or a pending remap want the GPU reset when idle; "
        "many XIDs of one class on one GPU that moved nodes point at the GPU, not the node. Blank = none. The "
        "bundled exporter publishes every column; dcgm-exporter publishes the ECC, NVLink, violation and "
        "pending-remap counters only when its counters CSV enables them, and has no per-link or per-code XID "
        "counters of gpudash (gpudash_*).",
        None, "none", None, links=[node_link(gpu)], join_on=uuid, rename=rename, before=[keep, sort],
        overrides=overrides), w=24, h=12)
