"""The GPU resets recorded by UUID: what GPURepeatOffender counts and the health ledger shows.

A GPU "needs a reset" when it reports an XID whose action in the site's XID table is reset_gpu or reboot_node
(a new code on dcgm-exporter's last-XID gauge, as the XID-event recording notes it; the bundled exporter's
per-code counter rising), or when the driver's recovery action turns to 1 (GPU reset) or 4 (drain and reset).
Two sparse recordings, keyed by the GPU's UUID so its count follows the card from node to node:

- the signals: 1 per GPU at each evaluation where any of those sources shows a new event;
- the episodes: the signals of a GPU with none in the `merge_within` before (an XID and the recovery action
  the driver sets for it, a code repeated while the GPU waits for its reset, are one episode), valued at the
  evaluation's time, so `count_over_time` counts a range's episodes and `max_over_time` finds the last.

Each source is compared with its last value within XID_SEEN_LOOKBACK, so a missed scrape or an exporter that
restarts does not make a standing code or recovery action new again; a code held for days is one event.
Neither reads a range of every GPU's dense series longer than that lookback: a 7-day count reads only the
recorded episodes. A third sparse recording gives each event of the last-XID gauge its GPU's UUID: the
health ledger counts XIDs by UUID from it where the bundled exporter's per-code counter is missing.
"""

from __future__ import annotations

from gpudash.escape import re2_any
from gpudash.promql.query import PromQL, Recording

XID_NEW = "cluster_instance_gpu_xid:gpu_xid_errors:new"
XID_BY_UUID = "cluster_instance_gpu_uuid_xid:gpu_xid_errors:new"
SIGNALS = "cluster_instance_gpu_uuid:gpu_reset_signals:new"
EPISODES = "cluster_instance_gpu_uuid:gpu_reset_episodes:new"
# The XID table's actions that mean the GPU needs a reset (a node reboot resets its GPUs too).
RESET_ACTIONS = ("reset_gpu", "reboot_node")
# The driver's recovery actions (nvmlDeviceGpuRecoveryAction_t) that ask for a reset of this GPU.
RESET_RECOVERY_ACTIONS = (1, 4)
# How far back each source's previous value is looked for (the XID-event recording's too): an exporter that
# restarts within this long does not make its GPUs' standing codes or recovery actions new events.
XID_SEEN_LOOKBACK = "15m"


def card(q: PromQL) -> str:
    """The labels a reset is recorded by: where the GPU was, its UUID and its node's host name."""
    return ", ".join(dict.fromkeys(("cluster", "instance", q.gpu, *q.profile.card_labels)))


def reset_codes(q: PromQL) -> list[int]:
    """The codes of the site's XID table (overrides applied) whose action is a reset."""
    return sorted(code for code, row in q.thresholds.alerts.xid.table.items() if row.action in RESET_ACTIONS)


def _recorded(q: PromQL, name: str) -> str:
    """Another recording's series, as recorded (a rule file's expressions are built with `recorded=False`)."""
    return f"{q.recordings[name].record}{q.scope.selector()}"


def _previous(q: PromQL, selector: str) -> str:
    return f"last_over_time({selector}[{XID_SEEN_LOOKBACK}] offset {q.rule_interval})"


def _gauge(q: PromQL, codes: str) -> str:
    """New reset-class codes of the last-XID gauge, from the XID-event recording, with the GPU's UUID."""
    # label_replace adds `reset_code` to the events of those codes only; `unless` on an empty one drops the rest
    tagged = f'label_replace({_recorded(q, XID_NEW)}, "reset_code", "$1", "xid", "({codes})")'
    events = f"{tagged} unless on (reset_code) vector(1)"
    return f"group by ({card(q)}) ({q.metric('xid_last')})\nand on (cluster, instance, {q.gpu})\n({events})"


def _counter(q: PromQL, codes: str) -> str:
    """The bundled exporter's counter of a reset-class code changed since the last scrape, or new above 0."""
    c = q.metric("xid_total", (("xid", "=~", codes),))
    by = f"max by ({card(q)}, xid)"
    now = f"{by} ({c})"
    return f"{now}\n!= ({by} ({_previous(q, c)}) or 0 * {now})"


def _recovery(q: PromQL) -> str:
    """The driver's recovery action turned to a reset (from anything else, or from no value in the lookback)."""
    by = f"max by ({card(q)})"
    now, before = f"{by} ({q.metric('recovery_action')})", f"{by} ({_previous(q, q.metric('recovery_action'))})"
    low, high = RESET_RECOVERY_ACTIONS
    mid, half = (low + high) / 2, (high - low) / 2

    def asks(x: str) -> str:  # one of the two values, reading the signal once: they alone lie `half` from `mid`
        return f"abs({x} - {mid:g}) == {half:g}"

    return f"{asks(now)}\nunless on ({card(q)})\n{asks(before)}"


def reset_signals(q: PromQL) -> str:
    codes = re2_any(str(c) for c in reset_codes(q))
    parts = []
    if q.has("xid_last") and q.available(XID_NEW):
        parts.append(_gauge(q, codes))
    if q.has("xid_total"):
        parts.append(_counter(q, codes))
    if q.has("recovery_action"):
        parts.append(_recovery(q))
    inner = "\n)\nor\n(\n".join(parts)
    return f"group by ({card(q)}) (\n(\n{inner}\n)\n)"


def xid_by_uuid(q: PromQL) -> str:
    """The XID-event recording's events with the UUID of the GPU that reported them (the slot's UUID now)."""
    where = f"cluster, instance, {q.gpu}"
    uuid = q.profile.uuid_label
    # 1 per slot and UUID, however many job labels the gauge's series carry
    slot = f"(max by ({where}, {uuid}) ({q.metric('xid_last')}) * 0 + 1)"
    return f"{_recorded(q, XID_NEW)}\n* on ({where}) group_left ({uuid})\n{slot}"


def reset_episodes(q: PromQL) -> str:
    merge = q.thresholds.alerts.repeat_offender.merge_within
    signals = _recorded(q, SIGNALS)
    uuid = q.profile.uuid_label
    return (f"(\n{signals}\nunless on ({uuid})\n"
            f"max_over_time({signals}[{merge}] offset {q.rule_interval})\n) * 0 + time()")


RESET_RECORDINGS: tuple[Recording, ...] = (
    Recording(XID_BY_UUID, ("xid_last",), xid_by_uuid,
              "Per GPU (by UUID) and XID code (xid): 1 at each new event of the last-XID gauge, as "
              "cluster_instance_gpu_xid:gpu_xid_errors:new notes it; sum_over_time counts a range's events, "
              "wherever the GPU sat.", filtered=True),
    Recording(SIGNALS, ("xid_last", "xid_total", "recovery_action"), reset_signals,
              "Per GPU (by UUID): 1 at each evaluation where it shows a new event that needs a reset: an XID whose "
              "action in the XID table is reset_gpu or reboot_node, or the recovery action turned to 1 or 4.",
              filtered=True, any_need=True),
    Recording(EPISODES, ("xid_last", "xid_total", "recovery_action"), reset_episodes,
              "Per GPU (by UUID): the evaluation's time at each reset signal with none in "
              "alerts.repeat_offender.merge_within before (one episode); count_over_time counts a range's resets.",
              filtered=True, any_need=True),
)
