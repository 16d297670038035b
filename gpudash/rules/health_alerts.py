"""The GPU health alerts, rows of gpudash.rules.alert_table: each says what to do in its `action` label (none,
restart_job, reset_gpu, reboot_node, drain, rma), and takes its levels from thresholds.yaml and the XID table.

Actions and why (docs/alerts.md has a section per alert):
- GPUHighTemperature: warning none (watch the cooling), critical drain. At its max operating temperature a
  GPU is throttled below base clock and the cause is the node's cooling, which needs hands on the node.
- GPUEccUncorrectable reset_gpu: DCGM's next step for a volatile DBE is "drain the GPU and reset it".
- GPURowRemapPending reset_gpu (warning): the remap applies at the next reset; work continues meanwhile.
- GPURowRemapFailure rma: NVIDIA's RMA criterion for row remapping (once the field diagnostic confirms).
- GPUNVLinkErrors (gpudash.rules.nvlink_alert): critical reset_gpu for a link recovery or a CRC storm (XID
  74's workflow); replays and CRC errors are corrected, a warning with action none only at a sustained rate.
- GPUFellOffBus reboot_node: XID 79's bucket; the driver cannot reach the GPU until the node restarts.
- GPUXidError: the XID table's action and severity for the code (gpudash/health/xid_catalog.csv).
- GPURepeatOffender rma (warning): a card that keeps needing resets goes back; a ticket, since each reset
  already paged and the RMA takes days whatever the hour.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import partial

from gpudash.health.xid import UNKNOWN_ACTION, UNKNOWN_SEVERITY, XidClass
from gpudash.rules.alert_spec import AlertContext, AlertSpec, RuleSpec
from gpudash.rules.nvlink_alert import NVLINK

_SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2}
# sensor: its temperature signal, its max operating temperature signal, its name in the texts
_SENSORS = {"gpu": ("gpu_temp", "gpu_max_op_temp", "GPU"), "hbm": ("hbm_temp", "mem_max_op_temp", "HBM (memory)")}


def _temperature(sensor: str, severity: str) -> RuleSpec:
    """GPUHighTemperature for one sensor and severity: each GPU against its own limit where it publishes one."""
    key, limit_key, name = _SENSORS[sensor]
    warning = severity == "warning"

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
        severity, "none" if warning else "drain",
        lambda c: c.h.temperature(key, limit_key, c.level, margin(c)) if c.x.has(key) else None,
        f"{name} temperature {'near' if warning else 'at'} its limit on {{where}}",
        f"The {name} temperature of {{where}} has stayed {{judged}} (median over {{k.window}}: "
        "{{{{ $value }}}} C) for {k.for_}.",
        level=f"temperature.{sensor}.{severity}", labels=(("sensor", sensor),), words=words)


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


def _xid_expr(group: list[XidClass], c: AlertContext) -> str | None:
    return c.h.xid(group, list(c.t.alerts.xid.table))


def _xid_rules(c: AlertContext) -> Iterator[RuleSpec]:
    """One GPUXidError rule per (severity, action) group of the site's XID table."""
    table = c.t.alerts.xid.table
    for severity, action, group in xid_groups(table):
        yield RuleSpec(
            severity, action, partial(_xid_expr, group),
            "XID {{{{ $labels.xid }}}} on {where}",
            "{where} reported XID {{{{ $labels.xid }}}} within the last {k.window}: {to_do} (docs/alerts.md, "
            "XID classes, says what each code means).",
            for_=None)


def _card_words(c: AlertContext) -> Mapping[str, object]:
    """The card's labels in the texts: its UUID, and its node's host name where the profile has one."""
    p = c.x.q.profile
    host = f", host {{{{ $labels.{p.hostname_label} }}}}" if p.hostname_label else ""
    return {"uuid": p.uuid_label, "host": host}


HEALTH_ALERTS = (
    AlertSpec("GPUXidError", "xid", (RuleSpec(
        UNKNOWN_SEVERITY, UNKNOWN_ACTION, lambda c: c.h.xid(None, list(c.t.alerts.xid.table)),
        "XID {{{{ $labels.xid }}}} (not in the XID table) on {where}",
        "{where} reported XID {{{{ $labels.xid }}}} within the last {k.window}, a code the XID table does "
        "not list: {to_do} when it is idle, and look the code up in NVIDIA's XID catalog.",
        for_=None),), expand=_xid_rules),
    AlertSpec("GPUEccUncorrectable", "memory_errors", (RuleSpec(
        "critical", "reset_gpu", lambda c: c.h.ecc_uncorrectable(),
        "Uncorrectable memory errors on {where}",
        "{where} counted uncorrectable (double-bit) ECC errors or rows remapped for them within the last "
        "{k.window} (rise: {{{{ $value | printf \"%.0f\" }}}}): {to_do}.",
        for_=None),)),
    AlertSpec("GPURowRemapPending", "memory_errors", (RuleSpec(
        "warning", "reset_gpu", lambda c: c.h.row_remap_pending(),
        "Row remap pending on {where}: reset it when idle",
        "{where} has had a memory row remap pending for {k.pending_for}; it is applied at the next GPU reset. "
        "Running work is not affected: reset the GPU when it is idle (or in the next service window).",
        for_="pending_for"),)),
    AlertSpec("GPURowRemapFailure", "memory_errors", (RuleSpec(
        "critical", "rma", lambda c: c.h.row_remap_failure(),
        "Row remapping failed on {where}: RMA",
        "{where} reports that remapping a memory row failed: a bank ran out of spare rows, or a remapped row "
        "failed again. The GPU cannot repair its memory any more: {to_do} "
        "(NVIDIA's criterion, once its field diagnostic confirms).",
        for_=None),)),
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
        "critical", "reboot_node", lambda c: c.h.fell_off_bus(),
        "{{{{ if $labels.{gpu} }}}}{where} fell off the bus"
        "{{{{ else }}}}{{{{ $labels.instance }}}} ({{{{ $labels.cluster }}}}) is missing GPUs{{{{ end }}}}",
        "{{{{ if $labels.{gpu} }}}}The exporter on {{{{ $labels.instance }}}} reports {where} down: NVML "
        "lost it (XID 79){{{{ else }}}}{{{{ $labels.instance }}}} publishes {{{{ $value }}}} GPU(s) fewer than "
        "it expects{{{{ end }}}}, for {k.for_}: {to_do}."),
    )),
)
