"""The weekly report's two headline figures over the fleet dashboard's range: goodput and interruptions.

Both read as `gpudash report` does (gpudash/report/range_queries.py): goodput from the recorded fleet activity,
interruptions from Prometheus' ALERTS of the health alerts with an action. Bounded at any fleet size: one
recorded series per cluster, and ALERTS, which holds only what fires.
"""

from __future__ import annotations

from gpudash.catalog import PROMETHEUS_ALERTS
from gpudash.escape import re2_any
from gpudash.health.published_rates import LLAMA3_GPU_DAYS, LLAMA3_INTERRUPTIONS, LLAMA3_RATE
from gpudash.panels.visualizations import PanelGrid, Query, stat
from gpudash.promql.query import PromQL
from gpudash.rules.health_alerts import health_alert_names

SECONDS_A_DAY = 86400
# The recordings `gpudash report` reads for goodput and the GPU-days it divides by.
GPU_COUNT, TENSOR, SM = "cluster:gpu_count:count", "cluster:gpu_tensor_active:avg", "cluster:gpu_sm_active:avg"


def goodput_hours(q: PromQL) -> str | None:
    """GPU-hours weighted by tensor-core activity, SM activity where a cluster publishes no tensor figure."""
    activity = [q.use(name) for name in (TENSOR, SM) if q.available(name)]
    if not activity or not q.available(GPU_COUNT):
        return None
    weighted = f"({' or on (cluster) '.join(activity)}) * on (cluster) {q.use(GPU_COUNT)}"
    step = q.rule_interval
    return f"sum(sum_over_time(({weighted})[$__range:{step}])) * {step.seconds:g} / 3600"


def interruption_rate(q: PromQL) -> str | None:
    """Firing episodes of the health alerts with an action over the range, per 1,000 GPU-days reporting."""
    if not q.available(GPU_COUNT):
        return None
    step = q.rule_interval
    keys = f"cluster, instance, {q.gpu}, UUID, alertname, action, xid"
    acting = (("alertstate", "=", "firing"), ("alertname", "=~", re2_any(health_alert_names())),
              ("action", "!~", "none|"))
    firing = f"max by ({keys}) ({PROMETHEUS_ALERTS}{q.scope.selector(acting)})"
    before = f"max by ({keys}) ({PROMETHEUS_ALERTS}{q.scope.selector(acting)} offset {step})"
    # An episode is counted at the first evaluation it fires in: firing now, not one evaluation before.
    onsets = f"sum(count_over_time(({firing} unless on ({keys}) {before})[$__range:{step}]))"
    # Sampled every rule interval by a subquery, so a Prometheus evaluating more often counts no more days.
    gpu_days = f"sum(sum_over_time({q.use(GPU_COUNT)}[$__range:{step}])) * {step.seconds:g} / {SECONDS_A_DAY}"
    return f"({onsets} or vector(0)) / ({gpu_days}) * 1000"


def goodput_and_interruptions(layout: PanelGrid, q: PromQL) -> None:
    goodput = goodput_hours(q)
    if goodput is not None:
        layout.add(stat(
            "Goodput (proxy) in range", Query(goodput, "goodput"), "none",
            "A proxy for useful work, in GPU-hours: every GPU-hour over the time range weighted by its cluster's "
            "mean tensor-core activity (cluster:gpu_tensor_active:avg), SM activity where a cluster publishes no "
            "tensor figure (cluster:gpu_sm_active:avg; DCGM_FI_PROF_PIPE_TENSOR_ACTIVE and DCGM_FI_PROF_SM_ACTIVE, "
            "which dcgm-exporter publishes only where its counters CSV enables them, the bundled exporter always), "
            "as `gpudash report` counts it. Not a count of useful work: "
            "a GPU spinning in a collective reads 100 % utilization but little tensor activity.", None,
            decimals=1), w=12, h=4)
    rate = interruption_rate(q)
    if rate is not None:
        layout.add(stat(
            "Interruptions per 1,000 GPU-days in range", Query(rate, "interruptions"), "none",
            "Firing episodes of the health alerts whose action is not none (each counted once per GPU, at the "
            "evaluation it began in), per 1,000 GPU-days the selected clusters reported over the time range: "
            "`gpudash report`'s interruption rate. For reference, Meta's Llama 3 pre-training saw about "
            f"{LLAMA3_RATE:.2f} unexpected interruptions per 1,000 GPU-days ({LLAMA3_INTERRUPTIONS} in "
            f"{LLAMA3_GPU_DAYS:,} GPU-days on H100s).",
            None, decimals=2), w=12, h=4)
