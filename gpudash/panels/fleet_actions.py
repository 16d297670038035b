"""The fleet dashboard's first row: what needs action now (a count per action) and GPUs reporting / expected.

The counts read Prometheus' own ALERTS series: every firing alert whose `action` label asks someone to do
something (anything but `none`), whatever the alert is called, so a new alert is counted with no change here
and a new action in `xid.ACTIONS` gets its own count. Each count links to the health dashboard, whose table
lists the alerts behind it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpudash.config.durations import Duration
from gpudash.health.xid import ACTIONS
from gpudash.panels.gpu_panels import aggregate
from gpudash.panels.health_actions import ACTION_COLOURS, ACTION_TEXT, alerts
from gpudash.panels.visualizations import BLUE, GREEN, RED, PanelGrid, Query, color_steps, stat
from gpudash.promql.query import Matcher, PromQL
from gpudash.repository import HEALTH_UID

NO_ACTION = "none"
# An alert that asks for something: it has an action label (absent reads as "") and the action is not `none`.
ANY_ACTION: tuple[Matcher, ...] = (("action", "!=", ""), ("action", "!=", NO_ACTION))
# Without recording rules, the most GPUs reporting at once is counted every this long over the lookback: a
# count of every GPU at each scrape of a day would cost more than the rest of the dashboard.
UNRECORDED_STEP = "5m"
ANY_TITLE = "Needing any action"
COUNTED = "a GPU (an alert on a whole node: the node; on a whole job: the job) with several such alerts counts once"


def actions_to_take() -> list[str]:
    """The actions of `xid.ACTIONS` that ask someone to do something, costliest first."""
    return [action for action in reversed(ACTIONS) if action != NO_ACTION]


def targets_needing(q: PromQL, job_labels: Sequence[str], *matchers: Matcher) -> str:
    """How many targets have a firing alert matching `matchers`: each GPU once, and an alert that names no
    GPU once per node, or per job where it names a job (`job_labels`)."""
    target = ", ".join(("cluster", "instance", q.gpu, *job_labels))
    return f"count(group by ({target}) ({alerts(q, *matchers)}))"


def health_link() -> dict[str, Any]:
    """Open the health dashboard (its first table: the firing alerts, costliest action first) on this
    dashboard's variables and time range."""
    return {"title": "GPUs needing action: the health dashboard", "targetBlank": False,
            "url": f"/d/{HEALTH_UID}?${{__all_variables}}&${{__url_time_range}}"}


def gpus_expected(q: PromQL, lookback: Duration) -> str:
    """GPUs expected per cluster: the larger of what its nodes say they expect (gpudash_node_gpus_expected)
    and the most GPUs reporting at once within `lookback`; the latter alone where no node publishes it."""
    if q.recorded:
        seen = q.recorded_over_time("max", "cluster:gpu_count:count", lookback)
    else:
        seen = f"max_over_time(({q.use('cluster:gpu_count:count')})[{lookback}:{UNRECORDED_STEP}])"
    if not q.has("gpus_expected"):
        return seen
    published = f"sum by (cluster) (max by (cluster, instance) ({q.metric('gpus_expected')}))"
    # Per cluster the larger of the two, or the one there is: a label of its own keeps `or` from dropping the
    # seen count where the cluster publishes, and `max by (cluster)` reads each once.
    return f'max by (cluster) ({published} or label_replace({seen}, "expected_from", "seen", "", ""))'


def reporting_against_expected(layout: PanelGrid, q: PromQL, lookback: Duration) -> None:
    """GPUs reporting and GPUs expected side by side, and beside them the GPUs missing: expected less reporting,
    per cluster, never below 0 (a cluster with a GPU too many hides none missing in another)."""
    if aggregate(q, "fleet", "gpus") is None:
        return
    reporting = q.use("cluster:gpu_count:count")
    expected = gpus_expected(q, lookback)
    published = (" the GPUs its nodes expect (gpudash_node_gpus_expected: the bundled exporter's --expected-gpus, "
                 "else the NVIDIA PCI functions it finds) or" if q.has("gpus_expected") else "")
    layout.add(stat(
        "Reporting / expected",
        [Query(f"sum({reporting})", "reporting", ref="A"), Query(f"sum({expected})", "expected", ref="B")], "none",
        f"Reporting: GPUs whose exporter reports utilization now. Expected, per cluster: the larger of{published} "
        f"the most GPUs that reported at once within the last {lookback} (the recorded cluster:gpu_count:count); "
        f"a GPU silent for longer than {lookback} is no longer expected unless its exporter still runs and "
        "publishes the expectation.", color_steps((BLUE, None))), w=3, h=4)
    missing = f"sum(clamp_min(({expected}) - on (cluster) {reporting}, 0) or ({expected}))"
    layout.add(stat(
        "GPUs missing", Query(missing, "missing"), "none",
        "GPUs expected less GPUs reporting (beside: expected from the bundled exporter's count where it runs, "
        f"else from the last {lookback}), per cluster, never below 0. The table below lists the "
        "exporters and GPUs that stopped reporting; the health dashboard's GPUFellOffBus the GPUs the driver "
        "lost.", color_steps((GREEN, None), (RED, 1))), w=3, h=4)


def needs_action_row(layout: PanelGrid, q: PromQL, job_labels: Sequence[str], lookback: Duration) -> None:
    """One count per action (costliest first), the count needing any action, then reporting / expected."""
    colours, link = dict(ACTION_COLOURS), [health_link()]
    for action in actions_to_take():
        layout.add(stat(
            ACTION_TEXT.get(action, action), Query(targets_needing(q, job_labels, ("action", "=", action)), action),
            "none", f"GPUs with a firing alert whose action is `{action}` now ({COUNTED}). Click for the health "
                    "dashboard: which GPUs, which alert, since when; docs/alerts.md has each alert's runbook.",
            color_steps((GREEN, None), (colours.get(action, RED), 1)), no_value="0", links=link), w=3, h=4)
    layout.add(stat(
        ANY_TITLE, Query(targets_needing(q, job_labels, *ANY_ACTION), "any"), "none",
        f"GPUs with at least one firing alert that asks for an action: any `action` label but `none`, from any "
        f"alert, an action of a newer rule file included ({COUNTED}). Click for the health dashboard.",
        color_steps((GREEN, None), (RED, 1)), no_value="0", links=link), w=3, h=4)
    reporting_against_expected(layout, q, lookback)
