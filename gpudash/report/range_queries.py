"""The PromQL the weekly report asks, built from the site's settings (pure).

Each query is a range query at the report's step S; the value at each step t covers (t - S, t], so the steps of
consecutive chunks add up to the whole range with no overlap and no gap. GPU-seconds come from recorded series
first: the job recordings `cluster_job:gpu_held_seconds:interval` and `..._idle_seconds:interval` already hold
GPU-seconds per rule interval (a sum over the window is exact), and the per-cluster GPU count and activity
means hold one sample per rule interval (a sum over the window times the interval). Only the health alerts on
GPUs no job holds read raw series (the GPU signal a job labels), once per step.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpudash.catalog import JOB_INFO, PROMETHEUS_ALERTS
from gpudash.config.loading import Settings
from gpudash.promql.for_settings import promql_for
from gpudash.rules.health_alerts import health_alert_names

HELD = "cluster_job:gpu_held_seconds:interval"
IDLE = "cluster_job:gpu_idle_seconds:interval"
GPU_COUNT = "cluster:gpu_count:count"
UTILIZATION_SUM = "cluster:gpu_utilization:sum"
TENSOR = "cluster:gpu_tensor_active:avg"
SM = "cluster:gpu_sm_active:avg"
# The labels of gpudash_job_info a report shows beside a job (the team label is added when it is another).
INFO_LABELS = ("user", "account", "partition", "job_name")


@dataclass(frozen=True)
class ReportQueries:
    """The range queries of one report, for one site and step."""

    held_by_job: str  # GPU-seconds a job held in each step, by (cluster, job)
    idle_by_job: str  # of which held idle
    job_info: str  # who holds each job (its team and INFO_LABELS), by (cluster, job)
    reporting: str  # GPU-seconds of GPUs reporting, fleet-wide
    fleet_gpus: str  # the most GPUs that reported at once in the step, per cluster
    alert_unheld: str  # GPU-seconds of GPUs no job holds under a health alert with an action
    utilization: str  # GPU-seconds weighted by utilization (0-1)
    goodput: str  # GPU-seconds weighted by tensor activity, SM activity where a cluster has no tensor figure
    interruptions: str  # per GPU and health alert with an action: present at each step it fires
    job_label: str
    team_label: str
    gpu_label: str
    step_s: int
    rule_interval_s: int


def report_queries(settings: Settings, step_s: int) -> ReportQueries:
    q = promql_for(settings)
    site = settings.site
    job, team, gpu = site.job_label, site.team_label, q.gpu
    interval = site.scrape_interval.seconds
    # (t - S, t] on any Prometheus: 2.x closes range selectors on the left, so a full S would count a sample
    # exactly S old in two steps; a millisecond less keeps it in one (timestamps are whole milliseconds)
    span = f"{step_s * 1000 - 1}ms"
    window = f"[{span}]"
    keep = sorted({team, *INFO_LABELS} - {job, "cluster"})
    names = "|".join(health_alert_names())
    acting = f'{PROMETHEUS_ALERTS}{{alertstate="firing", alertname=~"{names}", action!~"none|"}}'
    gpu_key = f"cluster, instance, {gpu}"

    def per_step(series: str) -> str:
        return f"sum_over_time({series}{window})"

    def latest(series: str) -> str:  # the one recorded sample of each rule interval, wherever the group's offset
        return f"last_over_time({series}[{interval}s])"

    activity = f"({latest(TENSOR)} or on (cluster) {latest(SM)})"
    return ReportQueries(
        held_by_job=f"sum by (cluster, {job}) ({per_step(HELD)})",
        idle_by_job=f"sum by (cluster, {job}) ({per_step(IDLE)})",
        job_info=f"max by (cluster, {job}, {', '.join(keep)}) (last_over_time({JOB_INFO}{{{job}!=\"\"}}{window}))",
        reporting=f"sum ({per_step(GPU_COUNT)}) * {interval}",
        fleet_gpus=f"max_over_time({GPU_COUNT}{window})",
        alert_unheld=(f"count (max by ({gpu_key}) ({acting}) unless on ({gpu_key}) {q.in_job_raw('gpu_util')})"
                      f" * {step_s}"),
        utilization=f"sum ({per_step(UTILIZATION_SUM)}) * {interval / 100:g}",
        goodput=(f"sum (sum_over_time(({activity} * on (cluster) {latest(GPU_COUNT)})[{span}:{interval}s]))"
                 f" * {interval}"),
        interruptions=f"max by ({gpu_key}, UUID, alertname, action, xid) ({acting})",
        job_label=job,
        team_label=team,
        gpu_label=gpu,
        step_s=step_s,
        rule_interval_s=interval,
    )
