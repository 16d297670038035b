"""Every GPU alert, one `AlertSpec` per alert in `ALERTS`, in the order of the rule file.

Each alert is one or more Prometheus rules of the same name (one per severity, per sensor or per source
of a signal); every one carries the labels `severity` and `action` (what to do: none, restart_job,
reset_gpu, reboot_node, drain, rma) and the annotations `summary`, `description` (with the value) and its
runbook, the alert's section of docs/alerts.md (gpudash.rules.alert_rule). Severities: `critical` pages,
`warning` and `info` arrive in the digest. The GPU health alerts are in gpudash.rules.health_alerts, the
Watchdog and GPUNodeDrained in gpudash.rules.node_state; the texts' names are gpudash.rules.alert_spec's.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpudash.rules.alert_spec import KUBERNETES_JOB_LABELS, AlertContext, AlertSpec, RuleSpec, target_labels
from gpudash.rules.fabric_alerts import FABRIC_ALERTS
from gpudash.rules.health_alerts import HEALTH_ALERTS, TEMPERATURE
from gpudash.rules.node_state import NODE_DRAINED_ALERT, WATCHDOG_ALERT


def _straggler_words(c: AlertContext) -> Mapping[str, object]:
    """Which signals the job's GPUs are compared on, as far as the profile publishes them."""
    activity = ("SM activity; utilization where the GPU publishes no profiling metrics" if c.x.has("sm_active")
                else "utilization")
    clock = (f"its SM clock more than {c.t.alerts.job_straggler.clock_below_ratio:.0%} below the job's median "
             "clock, or " if c.x.has("sm_clock") else "")
    return {"activity": activity, "clock": clock}


def _job_words(c: AlertContext) -> Mapping[str, object]:
    """`the_job`: the job on the GPU as its labels name it (with its pod on Kubernetes), or "the job on it"."""
    job, namespace, pod = target_labels(c.settings, ("job",))[:1] + KUBERNETES_JOB_LABELS
    return {"the_job": f"{{{{ with $labels.{job} }}}}job {{{{ . }}}}{{{{ else }}}}the job on it{{{{ end }}}}"
                       f"{{{{ with $labels.{pod} }}}} (pod {{{{ $labels.{namespace} }}}}/{{{{ . }}}}){{{{ end }}}}"}


def _job(c: AlertContext) -> tuple[str, ...]:
    return target_labels(c.settings, ("job",))


def _pressure(level: str) -> RuleSpec:
    # the job's memory, not on-call's: a warning to the job's owner at either level (`level` tells them apart)
    return RuleSpec(
        "warning", "none", lambda c: c.x.memory_pressure(c.level, _job(c)),
        "Framebuffer memory over {level:.0%} and growing on {where} ({the_job})",
        "{where} has {{{{ $value | humanizePercentage }}}} of its framebuffer in use, above {level:.0%}, "
        "and its lowest level rose across each third of the last {k.growth_window}: {the_job} is heading for "
        "out-of-memory.",
        level=f"memory.{level}", labels=(("audience", "job_owner"), ("level", level)), words=_job_words,
        carries=("job",))


def _hung(profiled: bool) -> RuleSpec:
    signals = ("their tensor-pipe activity under {k.tensor_below_ratio:.0%}, their DRAM activity under "
               "{k.dram_below_ratio:.0%} and their power" if profiled else "their power")
    missing = "" if profiled else (
        " These GPUs publish no tensor or DRAM activity ({tensor_metric}, {dram_metric}: profiling off or not "
        "supported), so the hang is judged on utilization and power alone.")
    return RuleSpec(
        "warning", "restart_job", lambda c: c.x.job_hung(_job(c), profiled),
        "Job {job_id} ({{{{ $labels.cluster }}}}) is hung: its GPUs spin and do no work",
        "{{{{ $value | humanizePercentage }}}} of the GPUs of {the_job} in cluster {{{{ $labels.cluster }}}} "
        "have read at least {k.util_above_percent:g} % utilization for the last {k.window} with " + signals
        + " under {k.power_below_ratio:.0%} of their power limit (or {k.power_below_watts:g} W where no limit is "
        "published): the spin of a collective (NCCL) that never completes." + missing + " Restart it from its "
        "checkpoint; the job dashboard shows its GPUs.",
        keep_firing_for="keep_firing_for", carries=("job",), words=_hung_words,
        # what the GPUs were judged on: two rules of one alert need labels of their own
        labels=(("judged_on", "tensor_dram_power" if profiled else "power"),))


def _hung_words(c: AlertContext) -> Mapping[str, object]:
    ref = c.x.q.profile.metrics
    name = {key: ref[key].name if key in ref else key for key in ("tensor_active", "dram_active")}
    return {**_job_words(c), "tensor_metric": name["tensor_active"], "dram_metric": name["dram_active"]}


ALERTS: tuple[AlertSpec, ...] = (
    TEMPERATURE,
    # Throttling costs speed, not the GPU: nothing to do to the GPU itself (its cause is what to look at).
    AlertSpec("GPUThermalThrottling", "throttling", (RuleSpec(
        "warning", "none", lambda c: c.x.throttling(),
        "{where} is throttled by heat or the power brake",
        "The SM clock of {where} runs at {{{{ $value }}}} MHz (median over {t.alerts.temperature.window}): "
        "more than {t.throttle_drop_ratio:.0%} below its peak over the last {k.window} (or its max clock) "
        "while at or above {t.temperature.gpu.warning:g} C, or with a thermal / power-brake throttle reason "
        "set, for {k.for_}."),),
        reads=("alerts.temperature.window", "throttle_drop_ratio", "temperature.gpu.warning")),
    AlertSpec("GPUMemoryPressure", "memory_pressure", (_pressure("warning"), _pressure("critical")),
              reads=("memory.warning", "memory.critical")),
    # a leak is the job's: restarting it (from its checkpoint) frees the memory before it runs out
    AlertSpec("GPUMemoryLeakPredicted", "memory_leak", (RuleSpec(
        "warning", "restart_job", lambda c: c.x.memory_leak(_job(c)),
        "Framebuffer memory of {the_job} on {where} is on course for {t.memory.critical:.0%} within {k.horizon}",
        "A linear fit over the last {k.window} projects framebuffer use of {where} to reach "
        "{{{{ $value | humanizePercentage }}}} in {k.horizon} (critical level {t.memory.critical:.0%}), and "
        "usage is still growing: a likely leak of {the_job}, heading for out-of-memory.",
        carries=("job",), words=_job_words),),
        reads=("memory.critical", "alerts.memory_pressure.growth_window")),
    AlertSpec("GPUJobStalled", "job_stalled", (RuleSpec(
        "warning", "restart_job", lambda c: c.x.job_stalled(_job(c)),
        "{where} holds memory for {the_job} but does no work",
        "{where} holds more than {k.memory_above_ratio:.0%} of its framebuffer, yet over the last {k.window} "
        "it did no work: its highest utilization is {{{{ $value }}}} % (under {k.util_below_percent:g} %: idle), "
        "or (on a GPU no job label names) its utilization stayed at or above "
        "{t.alerts.job_hung.util_above_percent:g} % while its work (tensor and DRAM activity where published, "
        "power) stayed idle: a spin that never ends. "
        "The job looks hung: restart {the_job} from its checkpoint.",
        carries=("job",), words=_job_words),
    ), reads=("alerts.job_hung",)),
    # a hung collective: the job's GPUs spin at ~100 % utilization doing nothing; one page per job
    AlertSpec("GPUJobHung", "job_hung", (_hung(True), _hung(False))),
    AlertSpec("GPUDataLoaderBottleneck", "data_loader", (RuleSpec(
        "warning", "none", lambda c: c.x.data_loader(),
        "{where} is starved by its input pipeline",
        "{where} averaged {{{{ $value | printf \"%.0f\" }}}} % utilization over {k.window} (under "
        "{k.util_below_percent:g} %) while the node's 1-minute load per CPU core stayed above "
        "{k.cpu_load_ratio:g}: the data loader cannot keep the GPU fed."),
    )),
    # Nothing to do to the GPUs: the exporter (or the node) is what is down, and GPUFellOffBus says when a GPU is.
    AlertSpec("GPUExporterDown", "exporter_down", (RuleSpec(
        "critical", "none", lambda c: c.x.exporter_down(),
        "{{{{ if $labels.{gpu} }}}}{where} stopped reporting"
        "{{{{ else }}}}GPU exporter on {{{{ $labels.instance }}}} ({{{{ $labels.cluster }}}}) is down{{{{ end }}}}",
        "{{{{ if $labels.{gpu} }}}}{where} reported within the last {k.lookback} but has "
        "published nothing (or reports itself lost) for {k.for_} while its exporter is up: it may have fallen "
        "off the bus.{{{{ else }}}}Prometheus has failed to scrape job {scrape_job} on "
        "{{{{ $labels.instance }}}} for {k.for_}: none of its GPUs is observed.{{{{ end }}}}"),
    )),
    AlertSpec("GPUJobStraggler", "job_straggler", (RuleSpec(
        "warning", "none", lambda c: c.x.job_straggler(),
        "{where} departs from the rest of job {job_id}",
        "{where}, one of the GPUs of job {job_id}, has departed from the job's median for {k.for_} while the "
        "job (at least {k.min_gpus} GPUs, as many as {k.window} ago) is busy, its median utilization over "
        "{k.busy_above_percent:g} %: over the last {k.window}, {clock}its activity ({activity}) more than "
        "{k.activity_points:g} points off the job's median. Its activity is "
        "{{{{ $value | printf \"%+.0f\" }}}} points off (positive: busier than its peers, the mark of a slow GPU "
        "that the others wait for in collectives). The whole job runs at its pace: check its throttle reasons "
        "(nvidia-smi -q -d PERFORMANCE), look for a foreign process on it, and compare it with the job's other "
        "GPUs on the job dashboard.",
        words=_straggler_words),
    )),
    AlertSpec("GPUAllocatedIdle", "allocated_idle", (RuleSpec(
        "info", "none", lambda c: c.x.allocated_idle(),
        "Job {job_id} ({{{{ $labels.cluster }}}}) holds GPUs it does not use: {{{{ $value }}}} idle",
        "Job {job_id} in cluster {{{{ $labels.cluster }}}} holds GPUs that have stayed under "
        "{k.util_below_percent:g} % utilization (their highest reading), or spun (busy by utilization, their "
        "work idle: a hung job, GPUJobHung) for the last {k.window}, and for {k.for_} more: {{{{ $value }}}} of "
        "them, GPU-hours held and not used. Ask the job's owner to release "
        "them or fix the job; the job dashboard shows which GPUs, the fleet dashboard the largest idle holders."),
    ), reads=("alerts.job_hung",)),
    *HEALTH_ALERTS,
    *FABRIC_ALERTS,
)

# About the alerting itself, not a GPU: the heartbeat, and nodes out of service (gpudash.rules.node_state). In
# a rule file of their own, so that a query of every firing GPU alert (a test, a bench, a panel) never meets them.
ALERTING_ALERTS: tuple[AlertSpec, ...] = (WATCHDOG_ALERT, NODE_DRAINED_ALERT)


def alert_names() -> tuple[str, ...]:
    """Every GPU alert's name, in the rule file's order."""
    return tuple(spec.name for spec in ALERTS)
