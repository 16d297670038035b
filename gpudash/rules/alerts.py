"""The GPU alerting rules: names, severities, `for:` durations and annotations around `expressions`.

Each alert is one or more Prometheus rules of the same name (one per severity, per sensor or per source
of a signal); every one carries the labels `severity` and `action` (what to do: none, restart_job,
reset_gpu, reboot_node, drain, rma) and the annotations `summary`, `description` (with the value) and its
runbook, the alert's section of docs/alerts.md (gpudash.rules.alert_rule). Severities: `critical` pages,
`warning` and `info` arrive in the digest. The GPU health alerts are in gpudash.rules.health_alerts.
"""

from __future__ import annotations

from typing import Any

from gpudash.config.durations import Duration
from gpudash.config.loading import Settings
from gpudash.escape import go_template_text
from gpudash.promql.for_settings import promql_for
from gpudash.rules.alert_rule import AlertRule
from gpudash.rules.expressions import AlertExpressions
from gpudash.rules.health_alerts import HEALTH_ALERT_NAMES, health_rules, temperature_rules

GROUP_NAME = "gpudash-gpu-alerts"

ALERT_NAMES = (
    "GPUHighTemperature",
    "GPUThermalThrottling",
    "GPUMemoryPressure",
    "GPUMemoryLeakPredicted",
    "GPUJobStalled",
    "GPUDataLoaderBottleneck",
    "GPUExporterDown",
    "GPUJobStraggler",
    "GPUAllocatedIdle",
    *HEALTH_ALERT_NAMES,
)

_WHERE = "GPU {{ $labels.%s }} on {{ $labels.instance }} ({{ $labels.cluster }})"


def alert_rules(settings: Settings) -> list[AlertRule]:
    """Every alerting rule the site's metric profile can evaluate, in a stable order."""
    q = promql_for(settings)
    x = AlertExpressions(q, settings.site)
    t, a = settings.thresholds, settings.thresholds.alerts
    where = _WHERE % q.gpu
    rules: list[AlertRule] = []

    def add(alert: str, severity: str, action: str, expr: str | None, summary: str, description: str,
            for_: Duration | None = None, **labels: str) -> None:
        if expr is not None:
            rules.append(AlertRule(alert, severity, action, expr, summary, description, for_, labels))

    rules += temperature_rules(x, settings, where)

    # Throttling costs speed, not the GPU: nothing to do to the GPU itself (its cause is what to look at).
    add("GPUThermalThrottling", "warning", "none", x.throttling(),
        f"{where} is throttled by heat or the power brake",
        f"The SM clock of {where} runs at {{{{ $value }}}} MHz (median over {a.temperature.window}): more than "
        f"{t.throttle_drop_ratio:.0%} below its peak over the last {a.throttling.window} (or its max clock) "
        f"while at or above {t.temperature.gpu.warning:g} C, or with a thermal / power-brake throttle reason "
        f"set, for {a.throttling.for_}.",
        a.throttling.for_)

    for severity, level in (("warning", t.memory.warning), ("critical", t.memory.critical)):
        add("GPUMemoryPressure", severity, "none", x.memory_pressure(level),
            f"Framebuffer memory over {level:.0%} and growing on {where}",
            f"{where} has {{{{ $value | humanizePercentage }}}} of its framebuffer in use, above {level:.0%}, "
            f"and its lowest level rose across each third of the last {a.memory_pressure.growth_window}.",
            a.memory_pressure.for_)

    # a leak is the job's: restarting it (from its checkpoint) frees the memory before it runs out
    add("GPUMemoryLeakPredicted", "warning", "restart_job", x.memory_leak(),
        f"Framebuffer memory on {where} is on course for {t.memory.critical:.0%} within {a.memory_leak.horizon}",
        f"A linear fit over the last {a.memory_leak.window} projects framebuffer use of {where} to reach "
        f"{{{{ $value | humanizePercentage }}}} in {a.memory_leak.horizon} (critical level "
        f"{t.memory.critical:.0%}), and usage is still growing: a likely leak, heading for out-of-memory.",
        a.memory_leak.for_)

    s = a.job_stalled
    add("GPUJobStalled", "warning", "restart_job", x.job_stalled(),
        f"Job on {where} holds memory but does no work",
        f"{where} holds more than {s.memory_above_ratio:.0%} of its framebuffer, yet its highest utilization "
        f"over the last {s.window} is {{{{ $value }}}} % (under {s.util_below_percent:g} %): the job looks hung.",
        s.for_)

    d = a.data_loader
    add("GPUDataLoaderBottleneck", "warning", "none", x.data_loader(),
        f"{where} is starved by its input pipeline",
        f"{where} averaged {{{{ $value | printf \"%.0f\" }}}} % utilization over {d.window} (under "
        f"{d.util_below_percent:g} %) while the node's 1-minute load per CPU core stayed above "
        f"{d.cpu_load_ratio:g}: the data loader cannot keep the GPU fed.",
        d.for_)

    down, lookback = a.exporter_down.for_, a.exporter_down.lookback
    gpu = f"$labels.{q.gpu}"
    job = go_template_text(settings.site.scrape_job)
    # Nothing to do to the GPUs: the exporter (or the node) is what is down, and GPUFellOffBus says when a GPU is.
    add("GPUExporterDown", "critical", "none", x.exporter_down(),
        f"{{{{ if {gpu} }}}}{where} stopped reporting"
        f"{{{{ else }}}}GPU exporter on {{{{ $labels.instance }}}} ({{{{ $labels.cluster }}}}) is down{{{{ end }}}}",
        f"{{{{ if {gpu} }}}}{where} reported within the last {lookback} but has "
        f"published nothing (or reports itself lost) for {down} while its exporter is up: it may have fallen "
        f"off the bus.{{{{ else }}}}Prometheus has failed to scrape job {job} on "
        f"{{{{ $labels.instance }}}} for {down}: none of its GPUs is observed.{{{{ end }}}}",
        down)

    job_id = f"{{{{ $labels.{settings.site.job_label} }}}}"
    job = f"job {job_id}"
    st = a.job_straggler
    activity = ("SM activity; utilization where the GPU publishes no profiling metrics" if q.has("sm_active")
                else "utilization")
    clock = (f"its SM clock more than {st.clock_below_ratio:.0%} below the job's median clock, or "
             if q.has("sm_clock") else "")
    add("GPUJobStraggler", "warning", "none", x.job_straggler(),
        f"{where} departs from the rest of {job}",
        f"{where}, one of the GPUs of {job}, has departed from the job's median for {st.for_} while the job "
        f"(at least {st.min_gpus} GPUs, as many as {st.window} ago) is busy, its median utilization over "
        f"{st.busy_above_percent:g} %: over the last {st.window}, {clock}its activity ({activity}) more than "
        f"{st.activity_points:g} points off the job's median. Its activity is "
        f"{{{{ $value | printf \"%+.0f\" }}}} points off (positive: busier than its peers, the mark of a slow GPU "
        f"that the others wait for in collectives). The whole job runs at its pace: check its throttle reasons "
        f"(nvidia-smi -q -d PERFORMANCE), look for a foreign process on it, and compare it with the job's other "
        f"GPUs on the job dashboard.",
        st.for_)

    idle = a.allocated_idle
    add("GPUAllocatedIdle", "info", "none", x.allocated_idle(),
        f"Job {job_id} ({{{{ $labels.cluster }}}}) holds GPUs it does not use: {{{{ $value }}}} idle",
        f"Job {job_id} in cluster {{{{ $labels.cluster }}}} holds GPUs that have stayed under "
        f"{idle.util_below_percent:g} % utilization (their highest reading) for the last {idle.window}, and for "
        f"{idle.for_} more: {{{{ $value }}}} of them, GPU-hours held and not used. Ask the job's owner to release "
        f"them or fix the job; the job dashboard shows which GPUs, the fleet dashboard the largest idle holders.",
        idle.for_)
    rules += health_rules(x, settings, where)
    return rules


def alert_groups(settings: Settings) -> dict[str, Any]:
    """The alerting rule file, as a mapping ready to dump."""
    base = settings.site.runbook_base_url
    return {"groups": [{"name": GROUP_NAME, "rules": [r.as_dict(base) for r in alert_rules(settings)]}]}
