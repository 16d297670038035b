"""The fabric's alerts: InfiniBand / RoCE ports from node_exporter's infiniband collector, each named by
`cluster`, `instance`, `device` and `port`, and each GPU's NVSwitch fabric state (docs/fabric.md).

- GPUFabricPortDown (drain): a port not active for `down_for` that was active within `down_lookback`; a planned
  port reset is shorter than `down_for`, and a port never used (the second port of a card) is never active.
- GPUFabricPortFlapping (drain): the link went down `flaps` times within `flap_window`; one reset is one.
- GPUFabricPortErrors (warning, none: a ticket): symbol or link-integrity errors counted over `error_window` at or
  above their rate an hour. The link corrects symbol errors: a rare one never pages (as NVLink replays).
- GPUFabricPortDegraded (drain): an active port under `speed_below_ratio` of the top speed it ran at within
  `speed_lookback` (a cable or transceiver that retrained at a lower width or rate).
- GPUFabricStragglerCongestion (warning, none): a GPUJobStraggler GPU whose port waits in `congestion_ratio` of its
  transmit slots: the straggler is the fabric's, not the GPU's. Names the job, the GPU and the port.
- GPUFabricState (drain): a GPU whose NVSwitch fabric is not ready (not started, in progress) or failed for
  `state_for`: restart the fabric manager, else drain.

The port series are selected by name only, whichever job scrapes them: node_exporter's names say who publishes
them (a simulated node serves them from its own endpoint). Each port alert also carries `host`, the host of the
GPU exporter target on the same node (`fabric_recordings.HOST`; node_exporter's own `instance` without the port
where no GPU exporter matches), so GPUNodeDrained, which carries the same `host`, holds them back.
"""

from __future__ import annotations

from gpudash import infiniband as ib
from gpudash.config.durations import Duration, duration_text
from gpudash.promql.fabric_recordings import GPU_CONGESTION, HOST, HOST_FROM_INSTANCE, PORT
from gpudash.rules.alert_spec import AlertContext, AlertSpec, RuleSpec, target_labels
from gpudash.rules.expressions import NL

_WHERE_PORT = ("port {{{{ $labels.device }}}}/{{{{ $labels.port }}}} on {{{{ $labels.instance }}}} "
               "({{{{ $labels.cluster }}}})")
READY = 3  # fabric_status: success; 0 is "not supported" (no NVSwitch fabric)


def _of(name: str) -> str:
    return f"max by ({PORT}) ({name})"


def _rise(name: str, window: Duration) -> str:
    """How much a counter rose over the window, per port (a counter reset is no rise)."""
    return f"{_of(name)} - {_of(f'{name} offset {window}')}"


def _on_host(c: AlertContext, ports: str) -> str:
    """`ports` (one series per port) labelled `host`: the GPU node's, else the node_exporter target's own."""
    return (f"(\n{ports}\n)\n* on (cluster, instance) group_left (host)\n{c.x.q.use(HOST)}\n"
            f"or on ({PORT})\nlabel_replace(\n(\n{ports}\n),\n{HOST_FROM_INSTANCE}\n)")


def port_down(c: AlertContext) -> str:
    f = c.t.alerts.fabric
    was_active = f"max by ({PORT}) (max_over_time({ib.STATE}[{f.down_lookback}:{f.down_for}])) >= {ib.ACTIVE}"
    return _on_host(c, f"{_of(ib.STATE)} != {ib.ACTIVE}{NL}and on ({PORT}){NL}{was_active}")


def port_flapping(c: AlertContext) -> str:
    f = c.t.alerts.fabric
    return _on_host(c, f"{_rise(ib.LINK_DOWNED, f.flap_window)} >= {f.flaps}")


def port_errors(c: AlertContext) -> str:
    f = c.t.alerts.fabric
    hours = f.error_window.seconds / 3600
    symbol = f"{_rise(ib.SYMBOL_ERRORS, f.error_window)} >= {f.symbol_errors_per_hour_warning * hours:g}"
    integrity = f"{_rise(ib.LINK_INTEGRITY_ERRORS, f.error_window)} >= {f.link_integrity_per_hour_warning * hours:g}"
    return _on_host(c, f"(\n{symbol}\n)\nor\n(\n{integrity}\n)")


def port_degraded(c: AlertContext) -> str:
    f = c.t.alerts.fabric
    top = f"max by ({PORT}) (max_over_time({ib.RATE}[{f.speed_lookback}:{duration_text(f.degraded_for.seconds)}]))"
    return _on_host(c, f"{_of(ib.RATE)}{NL}< {f.speed_below_ratio:g} * {top}{NL}"
                       f"and on ({PORT}){NL}{_of(ib.STATE)} == {ib.ACTIVE}")


def straggler_congestion(c: AlertContext) -> str | None:
    straggler = c.x.job_straggler()
    if straggler is None:
        return None
    q, f = c.x.q, c.t.alerts.fabric
    return (f"max by ({q.job_gpu}, device, port) (\n  (\n{straggler}\n  ) * 0\n"
            f"  + on (cluster, instance, {q.gpu}) group_left (device, port)\n"
            f"  ({q.use(GPU_CONGESTION)} >= {f.congestion_ratio:g})\n)")


def fabric_state(c: AlertContext) -> str | None:
    q = c.x.q
    if not q.has("fabric_status"):
        return None
    by = ", ".join(("cluster", "instance", q.gpu, *target_labels(c.settings, ("card",))))
    return f"max by ({by}) ({q.metric('fabric_status')}) > 0 != {READY}"


FABRIC_ALERTS: tuple[AlertSpec, ...] = (
    AlertSpec("GPUFabricPortDown", "fabric", (RuleSpec(
        "critical", "drain", port_down,
        "InfiniBand " + _WHERE_PORT + " is down",
        "InfiniBand " + _WHERE_PORT + " has not been active for {k.down_for} (its state reads "
        "{{{{ $value }}}}; 4 is active) after being active within the last {k.down_lookback}: the GPUs it serves "
        "(gpudash_gpu_nic_info) cannot reach the fabric, and a multi-node job on them hangs or fails: {to_do} "
        "(the port's cable, transceiver and switch port: ibstat, the switch's port log).",
        for_="down_for"),)),
    AlertSpec("GPUFabricPortFlapping", "fabric", (RuleSpec(
        "critical", "drain", port_flapping,
        "InfiniBand " + _WHERE_PORT + " is flapping",
        "InfiniBand " + _WHERE_PORT + " went down {{{{ $value }}}} times within the last {k.flap_window} (at "
        "least {k.flaps}): every drop stalls the collectives of the jobs on its GPUs: {to_do} (reseat or "
        "replace the cable or transceiver).",
        for_=None),)),
    AlertSpec("GPUFabricPortErrors", "fabric", (RuleSpec(
        "warning", "none", port_errors,
        "InfiniBand " + _WHERE_PORT + " counts link errors",
        "InfiniBand " + _WHERE_PORT + " counted {{{{ $value }}}} symbol or link-integrity errors within the "
        "last {k.error_window}, at or above {k.symbol_errors_per_hour_warning:g} symbol errors or "
        "{k.link_integrity_per_hour_warning:g} link-integrity errors an hour, for {k.errors_for}: the link "
        "still carries the work ({to_do} now); check its cable and transceiver in the next service window.",
        for_="errors_for"),)),
    AlertSpec("GPUFabricPortDegraded", "fabric", (RuleSpec(
        "critical", "drain", port_degraded,
        "InfiniBand " + _WHERE_PORT + " runs below its speed",
        "InfiniBand " + _WHERE_PORT + " runs at {{{{ $value | humanize }}}}B/s, under {k.speed_below_ratio:.0%} "
        "of the top speed it ran at within the last {k.speed_lookback}, for {k.degraded_for}: it retrained at a "
        "lower width or rate, and every job on its GPUs runs at its pace: {to_do} (its cable or transceiver).",
        for_="degraded_for"),)),
    AlertSpec("GPUFabricStragglerCongestion", "fabric", (RuleSpec(
        "warning", "none", straggler_congestion,
        "Straggler GPU {{{{ $labels.{gpu} }}}} of job {job_id} waits on congested port "
        "{{{{ $labels.device }}}}/{{{{ $labels.port }}}} on {{{{ $labels.instance }}}}",
        "GPU {{{{ $labels.{gpu} }}}} on {{{{ $labels.instance }}}} ({{{{ $labels.cluster }}}}), the straggler of "
        "job {job_id} (GPUJobStraggler), is served by InfiniBand port {{{{ $labels.device }}}}/"
        "{{{{ $labels.port }}}}, which waited in {{{{ $value | humanizePercentage }}}} of its transmit slots "
        "over 5m (at or above {k.congestion_ratio:.0%}) for {k.congestion_for}: the job is slowed by the "
        "fabric, not the GPU ({to_do}). Look at the fabric dashboard's worst ports and the job's placement "
        "across leaf switches.",
        for_="congestion_for"),), reads=("alerts.job_straggler",)),
    AlertSpec("GPUFabricState", "fabric", (RuleSpec(
        "critical", "drain", fabric_state,
        "NVSwitch fabric of {where} is not ready",
        "The NVSwitch fabric state of {where} has read {{{{ $value }}}} for {k.state_for} (1 not started, "
        "2 in progress, 4 failure, 5 unrecognized; 3 is success): the GPU cannot reach its peers over NVLink, "
        "and the first all-reduce of a job on it fails. Restart the fabric manager (systemctl restart "
        "nvidia-fabricmanager); if the state stays, {to_do}.",
        for_="state_for", carries=("card",)),)),
)
