"""The health dashboard's "act now" pieces: Prometheus' own ALERTS series, read by the `action` label.

Every health alert carries an `action` (gpudash/health/xid.py ACTIONS, in increasing cost). Prometheus
writes each active alert as `ALERTS{alertstate="pending"|"firing", ...}` with the alert's labels, and the
moment it became active as `ALERTS_FOR_STATE` (Unix seconds); the dashboard reads nothing else to say which
GPUs need what now.
"""

from __future__ import annotations

from typing import Any

from gpudash.catalog import PROMETHEUS_ALERTS, PROMETHEUS_ALERTS_FOR_STATE
from gpudash.escape import re2_any
from gpudash.health.xid import ACTIONS
from gpudash.panels.job_panels import node_link
from gpudash.panels.visualizations import GREEN, PanelGrid, Query, color_steps, stat, table, timeseries
from gpudash.promql.query import Matcher, PromQL

# Worst first: the order of the stat row, and each action's colour once a GPU needs it.
ACTION_COLOURS: tuple[tuple[str, str], ...] = (
    ("rma", "dark-red"), ("drain", "red"), ("reboot_node", "orange"), ("reset_gpu", "yellow"),
    ("restart_job", "blue"),
)
ACTION_TEXT = {"rma": "RMA", "drain": "Drain", "reboot_node": "Reboot node", "reset_gpu": "Reset GPU",
               "restart_job": "Restart job"}
# The actions someone must take (everything but `none`), as an =~ matcher.
TAKEN = ("action", "=~", re2_any(a for a in ACTIONS if a != "none"))


def cost(action: str) -> int:
    """An action's place in the ladder: 0 for none ... 5 for rma."""
    return ACTIONS.index(action)


def alerts(q: PromQL, *extra: Matcher) -> str:
    """The firing health alerts in the dashboard's scope."""
    return f"{PROMETHEUS_ALERTS}{q.scope.selector((('alertstate', '=', 'firing'), *extra))}"


def firing_since(q: PromQL, *extra: Matcher) -> str:
    """When each firing health alert became active (Unix seconds), with the alert's own labels."""
    since = f"{PROMETHEUS_ALERTS_FOR_STATE}{q.scope.selector(extra)}"
    return f"{since} and ignoring (alertstate) {alerts(q, *extra)}"


def gpus_needing(q: PromQL, action: str) -> str:
    """How many GPUs have a firing alert asking for `action` (a GPU with two such alerts counts once)."""
    return f"count(count by (cluster, instance, {q.gpu}) ({alerts(q, ('action', '=', action))}))"


def with_uuid(q: PromQL, expr: str) -> str:
    """`expr` per GPU alert with the GPU's UUID label added from its utilization series; an alert on a GPU that
    no longer reports (fell off the bus) or on a whole node keeps its own labels."""
    gpu, uuid = q.gpu, q.profile.uuid_label
    if uuid == gpu:
        return expr
    on = f"on (cluster, instance, {gpu})"
    # topk: one UUID per GPU slot even in the minutes after a GPU was swapped in the same slot.
    slot = f"cluster, instance, {gpu}"
    uuids = f"topk by ({slot}) (1, group by ({slot}, {uuid}) ({q.metric('gpu_util')}))"
    return f"({expr}) * {on} group_left ({uuid}) {uuids}\nor\n({expr}) unless {on} {uuids}"


def action_cost(q: PromQL) -> str:
    """Each firing alert that asks for an action, valued by the action's cost: the table's sort key."""
    parts = [f"({firing_since(q, ('action', '=', a))}) * 0 + {cost(a)}" for a, _ in ACTION_COLOURS]
    return "\nor\n".join(parts)


def action_now_section(layout: PanelGrid, q: PromQL) -> None:
    """One stat per action (GPUs needing it now), and the firing health alerts, costliest first."""
    for action, colour in ACTION_COLOURS:
        layout.add(stat(
            f"{ACTION_TEXT[action]}", Query(gpus_needing(q, action), action), "none",
            f"GPUs with a firing health alert whose action is `{action}` now. docs/alerts.md has each alert's "
            "runbook; the table below says which GPUs and since when.",
            color_steps((GREEN, None), (colour, 1)), no_value="0"), w=4, h=4)
    anyone = f"count(count by (cluster, instance, {q.gpu}) ({alerts(q, TAKEN)}))"
    layout.add(stat(
        "GPUs needing any action", Query(anyone, "any"), "none",
        "GPUs with at least one firing health alert that asks for an action (anything but `none`).",
        color_steps((GREEN, None), ("red", 1)), no_value="0"), w=4, h=4)
    since = f"({firing_since(q, TAKEN)}) * 1000"
    columns = {"A": "cost", "B": "since"}  # the cost orders the rows and is hidden
    sort: dict[str, Any] = {"id": "sortBy", "options": {"fields": {}, "sort": [{"field": "Value #A", "desc": True}]}}
    layout.add(table(
        "Firing health alerts, costliest action first",
        [Query(with_uuid(q, action_cost(q)), ref="A"), Query(with_uuid(q, since), ref="B")],
        "Every firing health alert that asks for an action, the costliest action first (rma, drain, reboot_node, "
        "reset_gpu, restart_job), with the GPU's UUID and when the alert became active. Do what the action says "
        "(docs/alerts.md, the alert's runbook); click a row to open the node dashboard on that GPU.",
        columns, "dateTimeFromNow", None, links=[node_link(q.gpu)], hide_columns=("__name__", "Value #A", "job"),
        before=[sort]), w=24, h=9)


def action_over_time_section(layout: PanelGrid, q: PromQL) -> None:
    """Firing health alerts per action over time, and GPUs down against the GPUs expected."""
    layout.add(timeseries(
        "Firing health alerts per action",
        [Query(f"count by (action) ({alerts(q, ('action', '!=', ''))})", "{{action}}")],
        "none", "How many health alerts fired at each moment, per action. A step up in `drain` or `rma` is "
                "hardware to take out of service; a wide `restart_job` band is usually one job's bad code.",
        None, 0, decimals=0), w=12, h=8)
    gpus = [Query(f"sum({q.use('cluster_instance:gpu_count:count')})", "reporting", ref="A")]
    if q.has("gpus_expected"):
        gpus.append(Query(f"sum(max by (cluster, instance) ({q.metric('gpus_expected')}))", "expected", ref="E"))
    if q.has("gpu_up"):
        gpus.append(Query(f"count({q.gpu_once('gpu_up')} == 0)", "down", ref="D"))
    layout.add(timeseries(
        "GPUs down / expected", gpus, "none",
        "GPUs reporting utilization, GPUs the nodes expect (dashed; the bundled exporter: --expected-gpus, else the "
        "NVIDIA PCI functions) and GPUs published as down (gpudash_gpu_up 0: fell off the bus or lost by NVML). "
        "Reporting under expected is a GPU gone missing: `nvidia-smi` and `dmesg | grep -i xid` on the node.",
        None, 0, dashed_refs=("E",), decimals=0), w=12, h=8)
