"""The GPU health alerts, rows of gpudash.rules.alert_table: each says what to do in its `action` label (none,
restart_job, reset_gpu, reboot_node, drain, rma), and takes its levels from thresholds.yaml and the XID table.

A rule whose action is reset_gpu, reboot_node, drain or rma is latched (health_expressions says how) and
names the card (UUID, host name); a restart_job rule names the job. docs/alerts.md, "What ends each alert",
says what resolves each one.

Actions and why (docs/alerts.md has a section per alert):
- GPUHighTemperature: warning none (watch the cooling), critical drain. At its max operating temperature a
  GPU is throttled below base clock and the cause is the node's cooling, which needs hands on the node.
- GPUEccUncorrectable reset_gpu (warning): a double-bit error the GPU contained (the job that hit it got XID
  94 and restarts; XID 95, uncontained, pages through GPUXidError); DCGM's next step is "drain the GPU and
  reset it", which can wait until it is idle.
- GPURowRemapPending reset_gpu (warning): the remap applies at the next reset; work continues meanwhile.
- GPURowRemapFailure rma: NVIDIA's RMA criterion for row remapping (once the field diagnostic confirms).
- GPURecoveryAction: the driver's own verdict (NVML's recovery action): 1 reset_gpu, 2 reboot_node, 3-5 drain.
- GPUNVLinkErrors (gpudash.rules.nvlink_alert): critical reset_gpu for a link recovery or a CRC storm (XID
  74's workflow); replays and CRC errors are corrected, a warning with action none only at a sustained rate.
- GPUFellOffBus reboot_node: XID 79's bucket; the driver cannot reach the GPU until the node restarts.
- GPUXidError: the XID table's action and severity for the code (gpudash/health/xid_catalog.csv).
- GPURepeatOffender rma (warning): a card that keeps needing resets goes back; a ticket, since each reset
  already paged and the RMA takes days whatever the hour.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import partial

from gpudash.health.xid import UNKNOWN_ACTION, UNKNOWN_SEVERITY, XidClass
from gpudash.rules.alert_spec import AlertContext, AlertSpec, RuleSpec, target_labels
from gpudash.rules.health_expressions import HealthExpressions
from gpudash.rules.nvlink_alert import NVLINK

_SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2}
# Actions done to the GPU or its node: their alerts hold until the remedy and name the card.
LATCHED = frozenset({"reset_gpu", "reboot_node", "drain", "rma"})
CARD = ("card",)
# A code the XID table leaves to another alert, and the field that alert reads: where a GPU does not publish
# the field (dcgm-exporter publishes it only when its counters file enables it), the code itself is acted on.
WATCHED_BY = {63: "row_remap_pending"}
# NVML's GPU recovery action values the driver sets (the catalog's `recovery_action`): value, what, action.
# Any other non-zero value is read as drain, the safe reading.
RECOVERY_ACTIONS = ((1, "a GPU reset", "reset_gpu"), (2, "a node reboot", "reboot_node"),
                    (3, "draining peer-to-peer traffic", "drain"), (4, "a drain and reset", "drain"),
                    (5, "recovering the IMEX domain", "drain"))


def carried(action: str) -> tuple[str, ...]:
    """What a rule of this action must name: the card for a remedy done to the GPU, the job for a restart."""
    return CARD if action in LATCHED else ("job",) if action == "restart_job" else ()
# sensor: its temperature signal, its max operating temperature signal, its name in the texts
_SENSORS = {"gpu": ("gpu_temp", "gpu_max_op_temp", "GPU"), "hbm": ("hbm_temp", "mem_max_op_temp", "HBM (memory)")}


def _temperature(sensor: str, severity: str) -> RuleSpec:
    """GPUHighTemperature for one sensor and severity: each GPU against its own limit where it publishes one."""
    key, limit_key, name = _SENSORS[sensor]
    warning = severity == "warning"
    action = "none" if warning else "drain"

    def margin(c: AlertContext) -> float | None:
        return float(getattr(c.t.temperature, f"{sensor}_margin")) if warning else None

    def words(c: AlertContext) -> Mapping[str, object]:
        below = margin(c)
        limit = (f"within {below:g} C of its max operating temperature" if below
                 else "at or above its max operating temperature")
        judged = (f"{limit} (above {c.level:g} C where the GPU publishes no limit)" if c.x.has(limit_key)
                  else f"above {c.level:g} C")
        return {"judged": judged}

    return RuleSpec(
        severity, action,
        lambda c: c.h.temperature(key, limit_key, None if warning else c.level,
                                  target_labels(c.settings, carried(action)))
        if c.x.has(key) else None,
        f"{name} temperature {'near' if warning else 'at'} its limit on {{where}}",
        f"The {name} temperature of {{where}} has stayed {{judged}} (median over {{k.window}}: "
        "{{{{ $value }}}} C) for {k.for_}.",
        level=f"temperature.{sensor}.{severity}", labels=(("sensor", sensor),), words=words,
        carries=carried(action))


TEMPERATURE = AlertSpec(
    "GPUHighTemperature", "temperature",
    tuple(_temperature(sensor, severity) for sensor in _SENSORS for severity in ("warning", "critical")),
    reads=("temperature.gpu", "temperature.hbm", "temperature.gpu_margin", "temperature.hbm_margin"))


def xid_groups(table: dict[int, XidClass]) -> list[tuple[str, str, list[XidClass]]]:
    """The table's codes grouped by (severity, action), most severe first: one rule per group."""
    groups: dict[tuple[str, str], list[XidClass]] = {}
    for row in table.values():
        groups.setdefault((row.severity, row.action), []).append(row)
    order = sorted(groups, key=lambda k: (_SEVERITY_ORDER[k[0]], k[1]))
    return [(severity, action, groups[(severity, action)]) for severity, action in order]


def _xid_expr(group: list[XidClass] | None, action: str, c: AlertContext) -> str | None:
    keep = target_labels(c.settings, carried(action))
    return c.h.xid(group, list(c.t.alerts.xid.table), keep, latched=action in LATCHED)


def _xid_rule(severity: str, action: str, expr: Callable[[AlertContext], str | None],
              labels: tuple[tuple[str, str], ...] = ()) -> RuleSpec:
    if action in LATCHED:
        description = ("{where} reported XID {{{{ $labels.xid }}}}: {to_do}. It keeps firing until the GPU is "
                       "reset or its node rebooted (docs/alerts.md, XID classes, says what each code means).")
    else:
        description = ("{where} reported XID {{{{ $labels.xid }}}} within the last {k.window}: {to_do} "
                       "(docs/alerts.md, XID classes, says what each code means).")
    return RuleSpec(severity, action, expr, "XID {{{{ $labels.xid }}}} on {where}", description, for_=None,
                    carries=carried(action), labels=labels)


def _watched(group: list[XidClass], key: str, c: AlertContext) -> str | None:
    return c.h.where_published(_xid_expr(group, "none", c), key, published=True)


def _unwatched(group: list[XidClass], key: str, c: AlertContext) -> str | None:
    return c.h.where_published(_xid_expr(group, "reset_gpu", c), key, published=False)


def _xid_rules(c: AlertContext) -> Iterator[RuleSpec]:
    """One GPUXidError rule per (severity, action) group of the site's XID table, and for a code another
    alert watches (WATCHED_BY), its rule where the GPU publishes that field and a reset where it does not."""
    table = c.t.alerts.xid.table
    watched = {code: key for code, key in WATCHED_BY.items() if code in table and table[code].action == "none"}
    for severity, action, group in xid_groups(table):
        plain = [row for row in group if row.code not in watched]
        if plain:
            yield _xid_rule(severity, action, partial(_xid_expr, plain, action))
        for row in (r for r in group if r.code in watched):
            # labelled by whether the GPU publishes the field: each rule keeps an identity of its own
            key = watched[row.code]
            yield _xid_rule(severity, action, partial(_watched, [row], key), ((key, "published"),))
            yield _xid_rule("warning", "reset_gpu", partial(_unwatched, [row], key), ((key, "absent"),))


def _recovery_rules(c: AlertContext) -> Iterator[RuleSpec]:
    """GPURecoveryAction: one rule per action the driver's recovery action field names; drain also takes
    any non-zero value the table does not list."""
    for action in dict.fromkeys(a for _v, _w, a in RECOVERY_ACTIONS):
        asks = " or ".join(f"{w} ({v})" for v, w, a in RECOVERY_ACTIONS if a == action)
        if action == "drain":
            asks += ", or a value NVML added later"
        yield RuleSpec(
            "critical", action, partial(_recovery_expr, action),
            "The driver asks for {asks_short} of {where}",
            "The NVIDIA driver's recovery action for {where} is {{{{ $value }}}}: it asks for {asks}; {to_do}. "
            "The field stays set until that is done (XID 154 announced the change).",
            carries=CARD, words=partial(_recovery_words, asks, _ASKS[action]))


_ASKS = {"reset_gpu": "a reset", "reboot_node": "a reboot of the node", "drain": "a drain"}


def _recovery_words(asks: str, short: str, _c: AlertContext) -> Mapping[str, object]:
    return {"asks": asks, "asks_short": short}


def _recovery_expr(action: str, c: AlertContext) -> str | None:
    keep = target_labels(c.settings, CARD)
    if action == "drain":  # every non-zero value the other rules do not take
        return c.h.recovery_action(None, [v for v, _w, a in RECOVERY_ACTIONS if a != "drain"], keep)
    return c.h.recovery_action([v for v, _w, a in RECOVERY_ACTIONS if a == action], (), keep)


def _card(method: Callable[..., str | None], *args: object) -> Callable[[AlertContext], str | None]:
    """An expression that keeps the card's labels (latched health alerts name what to reset or replace)."""
    return lambda c: method(c.h, *args, keep=target_labels(c.settings, CARD))


def _card_words(c: AlertContext) -> Mapping[str, object]:
    """The card's labels in the texts: its UUID, and its node's host name where the profile has one."""
    p = c.x.q.profile
    host = f", host {{{{ $labels.{p.hostname_label} }}}}" if p.hostname_label else ""
    return {"uuid": p.uuid_label, "host": host}


HEALTH_ALERTS = (
    AlertSpec("GPUXidError", "xid", (RuleSpec(
        UNKNOWN_SEVERITY, UNKNOWN_ACTION, partial(_xid_expr, None, UNKNOWN_ACTION),
        "XID {{{{ $labels.xid }}}} (not in the XID table) on {where}",
        "{where} reported XID {{{{ $labels.xid }}}}, a code the XID table does not list: {to_do} when it is "
        "idle, and look the code up in NVIDIA's XID catalog. It keeps firing until the GPU is reset or its "
        "node rebooted.",
        for_=None, carries=carried(UNKNOWN_ACTION)),), expand=_xid_rules),
    AlertSpec("GPURecoveryAction", "recovery_action", expand=_recovery_rules),
    AlertSpec("GPUEccUncorrectable", "memory_errors", (RuleSpec(
        "warning", "reset_gpu", _card(HealthExpressions.ecc_uncorrectable),
        "Uncorrectable memory errors on {where}: reset it when idle",
        "{where} counted {{{{ $value | printf \"%.0f\" }}}} uncorrectable (double-bit) ECC error(s) since its "
        "last reset (where it publishes no volatile count: a rise within the last {k.window}). The GPU "
        "contained them: the job that hit one got XID 94 and restarts (XID 95, uncontained, pages). When it is "
        "idle, {to_do}: the reset zeroes the count and applies the row remap that repairs the row.",
        for_=None, carries=CARD),)),
    AlertSpec("GPURowRemapPending", "memory_errors", (RuleSpec(
        "warning", "reset_gpu", _card(HealthExpressions.flag, "row_remap_pending"),
        "Row remap pending on {where}: reset it when idle",
        "{where} has had a memory row remap pending for {k.pending_for}; it is applied at the next GPU reset. "
        "Running work is not affected: reset the GPU when it is idle (or in the next service window).",
        for_="pending_for", carries=CARD),)),
    AlertSpec("GPURowRemapFailure", "memory_errors", (RuleSpec(
        "critical", "rma", _card(HealthExpressions.flag, "row_remap_failure"),
        "Row remapping failed on {where}: RMA",
        "{where} reports that remapping a memory row failed: a bank ran out of spare rows, or a remapped row "
        "failed again. The GPU cannot repair its memory any more: {to_do} "
        "(NVIDIA's criterion, once its field diagnostic confirms).",
        for_=None, carries=CARD),)),
    NVLINK,
    # An RMA is a ticket with days of lead time, not a page: each reset already paged on its own.
    AlertSpec("GPURepeatOffender", "repeat_offender", (RuleSpec(
        "warning", "rma", lambda c: c.h.repeat_offender(),
        "GPU {{{{ $labels.{uuid} }}}} needed {{{{ $value }}}} resets within {k.window}: RMA",
        "GPU {{{{ $labels.{uuid} }}}} (GPU {{{{ $labels.{gpu} }}}} on {{{{ $labels.instance }}}}, "
        "{{{{ $labels.cluster }}}}{host}, at its last reset) needed a reset {{{{ $value }}}} times within the "
        "last {k.window} "
        "(an XID whose action is reset_gpu or reboot_node, or the driver's recovery action 1 or 4; events "
        "within {k.merge_within} of each other count once), on whichever node it sat in: at {k.resets} the "
        "card, not the node, is the likely cause: {to_do}, naming its UUID and the XIDs of the health ledger.",
        for_=None, carries=("card",), words=_card_words),)),
    AlertSpec("GPUFellOffBus", "fell_off_bus", (RuleSpec(
        "critical", "reboot_node", _card(HealthExpressions.fell_off_bus),
        "{{{{ if $labels.{gpu} }}}}{where} fell off the bus"
        "{{{{ else }}}}{{{{ $labels.instance }}}} ({{{{ $labels.cluster }}}}) is missing GPUs{{{{ end }}}}",
        "{{{{ if $labels.{gpu} }}}}The exporter on {{{{ $labels.instance }}}} reports {where} down: NVML "
        "lost it (XID 79){{{{ else }}}}{{{{ $labels.instance }}}} publishes {{{{ $value }}}} GPU(s) fewer than "
        "it expects{{{{ end }}}}, for {k.for_}: {to_do}.", carries=CARD),
    )),
)


def health_alert_names() -> tuple[str, ...]:
    """The health alerts' names, sorted: what the report and the fleet dashboard count interruptions of."""
    return tuple(sorted({spec.name for spec in HEALTH_ALERTS}))
