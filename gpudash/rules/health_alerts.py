"""The GPU health alerts: each says what to do in its `action` label (none, restart_job, reset_gpu,
reboot_node, drain, rma), and takes its levels from thresholds.yaml and the XID table.

Actions and why (docs/alerts.md has a section per alert):
- GPUHighTemperature: warning none (watch the cooling), critical drain. At its max operating temperature a
  GPU is throttled below base clock and the cause is the node's cooling, which needs hands on the node.
- GPUEccUncorrectable reset_gpu: DCGM's next step for a volatile DBE is "drain the GPU and reset it".
- GPURowRemapPending reset_gpu (warning): the remap applies at the next reset; work continues meanwhile.
- GPURowRemapFailure rma: NVIDIA's RMA criterion for row remapping (once the field diagnostic confirms).
- GPUNVLinkErrors critical drain: a replay, a recovery or a CRC storm (DCGM FAIL) may come from this GPU,
  its peer or the NVSwitch (XID 74), so the node leaves the scheduler until the link is checked;
  warning none: a CRC trickle is what DCGM calls "monitor, can still perform workload".
- GPUFellOffBus reboot_node: XID 79's bucket; the driver cannot reach the GPU until the node restarts.
- GPUXidError: the XID table's action and severity for the code (gpudash/health/xid_catalog.csv).
"""

from __future__ import annotations

from gpudash.config.durations import Duration
from gpudash.config.loading import Settings
from gpudash.health.xid import UNKNOWN_ACTION, UNKNOWN_SEVERITY, XidClass
from gpudash.rules.alert_rule import AlertRule
from gpudash.rules.expressions import AlertExpressions
from gpudash.rules.health_expressions import HealthExpressions

HEALTH_ALERT_NAMES = (
    "GPUXidError",
    "GPUEccUncorrectable",
    "GPURowRemapPending",
    "GPURowRemapFailure",
    "GPUNVLinkErrors",
    "GPUFellOffBus",
)

# What each action asks of the person the alert reaches, in a rule's description.
ACTION_TEXT = {
    "none": "nothing to do to the GPU",
    "restart_job": "restart the job (from its checkpoint); the GPU is fine",
    "reset_gpu": "drain the GPU of work, then reset it (nvidia-smi -r)",
    "reboot_node": "drain and reboot the node",
    "drain": "drain the node from the scheduler and have it checked",
    "rma": "take the GPU out of service and open an RMA",
}
_SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2}


def temperature_rules(x: AlertExpressions, settings: Settings, where: str) -> list[AlertRule]:
    """GPUHighTemperature per sensor and severity: each GPU against its own limit where it publishes one."""
    h = HealthExpressions(x)
    t, a = settings.thresholds.temperature, settings.thresholds.alerts.temperature
    rules = []
    for key, limit_key, sensor, levels, margin in (
            ("gpu_temp", "gpu_max_op_temp", "gpu", t.gpu, t.gpu_margin),
            ("hbm_temp", "mem_max_op_temp", "hbm", t.hbm, t.hbm_margin)):
        if not x.has(key):
            continue
        name = "GPU" if sensor == "gpu" else "HBM (memory)"
        own = x.has(limit_key)
        for severity, action, level, below, near in (("warning", "none", levels.warning, margin, "near"),
                                                     ("critical", "drain", levels.critical, None, "at")):
            limit = (f"within {below:g} C of its max operating temperature" if below
                     else "at or above its max operating temperature")
            judged = f"{limit} (above {level:g} C where the GPU publishes no limit)" if own else f"above {level:g} C"
            rules.append(AlertRule(
                "GPUHighTemperature", severity, action, h.temperature(key, limit_key, level, below),
                f"{name} temperature {near} its limit on {where}",
                f"The {name} temperature of {where} has stayed {judged} (median over {a.window}: "
                f"{{{{ $value }}}} C) for {a.for_}.",
                a.for_, {"sensor": sensor}))
    return rules


def xid_groups(table: dict[int, XidClass]) -> list[tuple[str, str, list[XidClass]]]:
    """The table's codes grouped by (severity, action), most severe first: one rule per group."""
    groups: dict[tuple[str, str], list[XidClass]] = {}
    for row in table.values():
        groups.setdefault((row.severity, row.action), []).append(row)
    order = sorted(groups, key=lambda k: (_SEVERITY_ORDER[k[0]], k[1]))
    return [(severity, action, groups[(severity, action)]) for severity, action in order]


def health_rules(x: AlertExpressions, settings: Settings, where: str) -> list[AlertRule]:
    h = HealthExpressions(x)
    a = settings.thresholds.alerts
    rules: list[AlertRule] = []

    def add(alert: str, severity: str, action: str, expr: str | None, summary: str, description: str,
            for_: Duration | None = None) -> None:
        if expr is not None:
            rules.append(AlertRule(alert, severity, action, expr, summary, description, for_))

    table = a.xid.table
    for severity, action, group in xid_groups(table):
        add("GPUXidError", severity, action, h.xid(group, list(table)),
            f"XID {{{{ $labels.xid }}}} on {where}",
            f"{where} reported XID {{{{ $labels.xid }}}} within the last {a.xid.window}: "
            f"{ACTION_TEXT[action]} (docs/alerts.md, XID classes, says what each code means).")
    add("GPUXidError", UNKNOWN_SEVERITY, UNKNOWN_ACTION, h.xid(None, list(table)),
        f"XID {{{{ $labels.xid }}}} (not in the XID table) on {where}",
        f"{where} reported XID {{{{ $labels.xid }}}} within the last {a.xid.window}, a code the XID table does "
        f"not list: {ACTION_TEXT[UNKNOWN_ACTION]} when it is idle, and look the code up in NVIDIA's XID catalog.")

    m = a.memory_errors
    add("GPUEccUncorrectable", "critical", "reset_gpu", h.ecc_uncorrectable(),
        f"Uncorrectable memory errors on {where}",
        f"{where} counted uncorrectable (double-bit) ECC errors or rows remapped for them within the last "
        f"{m.window} (rise: {{{{ $value | printf \"%.0f\" }}}}): {ACTION_TEXT['reset_gpu']}.")
    add("GPURowRemapPending", "warning", "reset_gpu", h.row_remap_pending(),
        f"Row remap pending on {where}: reset it when idle",
        f"{where} has had a memory row remap pending for {m.pending_for}; it is applied at the next GPU reset. "
        f"Running work is not affected: reset the GPU when it is idle (or in the next service window).",
        m.pending_for)
    add("GPURowRemapFailure", "critical", "rma", h.row_remap_failure(),
        f"Row remapping failed on {where}: RMA",
        f"{where} reports that remapping a memory row failed: a bank ran out of spare rows, or a remapped row "
        f"failed again. The GPU cannot repair its memory any more: {ACTION_TEXT['rma']} "
        f"(NVIDIA's criterion, once its field diagnostic confirms).")

    n = a.nvlink
    on_link = "{{ if $labels.link }} link {{ $labels.link }}{{ end }}"
    add("GPUNVLinkErrors", "critical", "drain", h.nvlink(critical=True),
        f"NVLink{on_link} errors on {where}",
        f"NVLink{on_link} of {where} replayed or recovered, or its CRC errors reached "
        f"{n.crc_per_second_critical:g}/s, within the last {n.window} (value {{{{ $value | printf \"%.0f\" }}}}: "
        f"the rise, or the rate per second): the link, its peer GPU or the NVSwitch is failing; "
        f"{ACTION_TEXT['drain']}.")
    add("GPUNVLinkErrors", "warning", "none", h.nvlink(critical=False),
        f"NVLink{on_link} CRC errors on {where}",
        f"NVLink{on_link} of {where} counted {{{{ $value | printf \"%.0f\" }}}} CRC errors within the last "
        f"{n.window}, under {n.crc_per_second_critical:g}/s: the link corrects them; watch for a rise.",
        n.for_)

    add("GPUFellOffBus", "critical", "reboot_node", h.fell_off_bus(),
        f"{{{{ if $labels.{x.q.gpu} }}}}{where} fell off the bus"
        f"{{{{ else }}}}{{{{ $labels.instance }}}} ({{{{ $labels.cluster }}}}) is missing GPUs{{{{ end }}}}",
        f"{{{{ if $labels.{x.q.gpu} }}}}The exporter on {{{{ $labels.instance }}}} reports {where} down: NVML "
        f"lost it (XID 79){{{{ else }}}}{{{{ $labels.instance }}}} publishes {{{{ $value }}}} GPU(s) fewer than "
        f"it expects{{{{ end }}}}, for {a.fell_off_bus.for_}: {ACTION_TEXT['reboot_node']}.",
        a.fell_off_bus.for_)
    return rules
