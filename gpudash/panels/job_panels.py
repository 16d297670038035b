"""Job-level pieces the fleet and job dashboards share: hours over the time range, and data links.

A job is named by the site's job label (gpudash.yaml `jobs.label`, default `hpc_job`). Everything here reads
the job-level recording rules (`cluster_job:*`, one series per job), so a 1,024-GPU job costs what a 1-GPU
job costs.
"""

from __future__ import annotations

from typing import Any

from grafanalib import core as G

from gpudash.catalog import DRIVER_VERSION_LABEL, JOB_INFO, JOB_INFO_LABELS
from gpudash.config.durations import Duration
from gpudash.panels.visualizations import PanelGrid, Query, table
from gpudash.promql.query import PromQL
from gpudash.repository import JOB_UID, NODE_UID


def field(name: str) -> str:
    """A table cell's value in a data link, percent-encoded so a job id with `&` or `/` survives the URL."""
    return f"${{__data.fields.{name}:percentencode}}"


# Labels every series of a GPU carries that say nothing about a process: left out of the per-process tables.
PROCESS_CONTEXT = ("job", "UUID", "pci_bus_id", "device", "modelName", "hostname", "Hostname", DRIVER_VERSION_LABEL)


def node_link(gpu_label: str | None = None) -> dict[str, Any]:
    """Open the node dashboard on a table row's node (and GPU, when the row names one)."""
    gpu = f"&var-gpu={field(gpu_label)}" if gpu_label else ""
    return {"title": "Open node ${__data.fields.instance}", "targetBlank": False,
            "url": f"/d/{NODE_UID}?var-cluster={field('cluster')}&var-instance={field('instance')}{gpu}"
                   "&${__url_time_range}"}


# The hidden columns of a table that links to the job dashboard: the job's lifetime within the range, epoch ms.
LIFETIME_FROM, LIFETIME_TO = "lifetime_from", "lifetime_to"
LIFETIME = "cluster_job:gpu_held:timestamp"
RUNNING = 0  # the value of LIFETIME_TO for a job that still holds GPUs at the range's end, shown as "now"


def job_link(job_label: str) -> dict[str, Any]:
    """Open the job dashboard on a table row's job over its lifetime: from the row's LIFETIME_FROM to its
    LIFETIME_TO, which reads "now" while the job still runs (`lifetime_columns`)."""
    return {"title": f"Open job ${{__data.fields.{job_label}}}", "targetBlank": False,
            "url": f"/d/{JOB_UID}?var-cluster={field('cluster')}&var-job={field(job_label)}"
                   f"&from={field(LIFETIME_FROM)}&to={field(LIFETIME_TO)}"}


def lifetime_margin_s(q: PromQL) -> float:
    """Room either side of a job's first and last evaluation: two rule intervals, at least a minute, so the job's
    first and last scraped samples (up to an interval before and after) are in view."""
    return max(60.0, 2 * q.rule_interval.seconds)


def lifetime_queries(q: PromQL, jobs: str, first_ref: str, last_ref: str) -> list[Query]:
    """The first and last rule evaluation within the range of each job `jobs` lists (the table's topk), from
    the recorded cluster_job:gpu_held:timestamp, which reads every evaluation (a job of one evaluation is seen),
    widened by `lifetime_margin_s`, in epoch ms; the last is RUNNING for a job the latest evaluation still
    recorded at the range's end (a job that ended is stale from the next evaluation on, however late the rules
    run)."""
    margin_ms = f"{lifetime_margin_s(q) * 1000:g}"
    if q.recorded:
        first, last = (q.recorded_over_time(f, LIFETIME, "$__range") for f in ("min", "max"))
    else:
        first, last = (f"{f}_over_time(({q.use(LIFETIME)})[$__range:{q.rule_interval}])" for f in ("min", "max"))
    running = q.use(LIFETIME)
    on = f"on (cluster, {q.job_label})"
    listed = f"and {on}\n{jobs}"
    return [Query(f"{first} * 1000 - {margin_ms}\n{listed}", ref=first_ref),
            Query(f"(\n  ({last} * 1000 + {margin_ms}) unless {on} {running}\n  or {on}\n  {running} * {RUNNING}\n)"
                  f"\n{listed}", ref=last_ref)]


def lifetime_columns(rows_of: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """What a table with `lifetime_queries` adds: a filter that keeps only the rows of its value column `rows_of`
    (the lifetime queries answer for every job in the range), and overrides that hide the two columns, which
    stay in the table for the link, and show a running job's end as "now"."""
    keep: dict[str, Any] = {"id": "filterByValue", "options": {
        "filters": [{"fieldName": rows_of, "config": {"id": "isNotNull", "options": {}}}],
        "match": "all", "type": "include"}}
    hidden: dict[str, Any] = {"id": "custom.hideFrom", "value": {"legend": False, "tooltip": True, "viz": True}}
    now: dict[str, Any] = {"id": "mappings",
                           "value": [{"type": "value", "options": {str(RUNNING): {"text": "now", "index": 0}}}]}
    overrides: list[dict[str, Any]] = [
        {"matcher": {"id": "byName", "options": LIFETIME_FROM}, "properties": [hidden]},
        {"matcher": {"id": "byName", "options": LIFETIME_TO}, "properties": [hidden, now]}]
    return keep, overrides


def hours_over_range(series: str, step: Duration) -> str:
    """The integral over the dashboard's range of a per-job gauge, in hours (W -> Wh).

    A subquery samples the recorded series every `step` (the scrape interval) and adds the samples up: exact
    to one step, and a job that lived for part of the range counts only while it lived (a recorded series
    goes stale when its job ends, so no sample is taken after it).
    """
    seconds = step.seconds
    return f"sum_over_time(({series})[$__range:{step}]) * {seconds:g} / 3600"


MJ_PER_KWH = "3600000000"  # mJ in a kWh


def energy_in_range(q: PromQL, power_record: str, step: Duration) -> tuple[str, str] | None:
    """Energy drawn over the dashboard's range in kWh, and how: the rise of each GPU's energy counter
    (DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, mJ), which keeps counting through missed scrapes and rule
    evaluations; without the counter, the recorded power (`power_record`) added up every `step`."""
    if q.has("energy"):
        counter = q.profile.ref("energy").name
        return (f"sum({q.increase('energy', '$__range')}) / {MJ_PER_KWH}",
                f"the rise of each GPU's energy counter over the range ({counter}, mJ), which keeps counting "
                "through missed scrapes")
    if not q.available(power_record):
        return None
    return (f"sum({hours_over_range(q.use(power_record), step)}) / 1000",
            f"the recorded power ({power_record}) added up every {step}, exact to one sample")


def job_holders(q: PromQL, labels: tuple[str, ...] = JOB_INFO_LABELS) -> str:
    """Who holds each job, from the exporter's `gpudash_job_info`: one series per job (value 1) with `labels`.

    A job's info series on each of its nodes collapse to one; should two disagree, `topk` keeps one, so a join
    on the job never fails for a duplicate match."""
    job = q.job
    info = f"{JOB_INFO}{q.scope.selector(((q.job_label, '!=', ''),))}"
    return f"topk by ({job}) (1, group by ({job}, {', '.join(labels)}) ({info}))"


HOLDER_COLUMNS = ("user", "account")


def with_holders(q: PromQL, expr: str) -> str:
    """A per-job expression with its job's user and account added as labels where `gpudash_job_info` knows them;
    a job it does not know (dcgm-exporter publishes none) keeps its row, without them."""
    on = f"on ({q.job})"
    return (f"({expr}) * {on} group_left ({', '.join(HOLDER_COLUMNS)}) {job_holders(q, HOLDER_COLUMNS)} "
            f"or {on} ({expr})")


def gpu_hours(q: PromQL, which: str) -> str:
    """GPU-hours each job held (`which` = "held") or held idle ("idle") over the dashboard's range.

    With recording rules, the recorded GPU-seconds of every rule evaluation in the range added up: exact to
    one evaluation whatever the rules' interval, one sample per job and evaluation read. Without, the same
    count sampled every rule interval by a subquery."""
    record = f"cluster_job:gpu_{which}_seconds:interval"
    if q.recorded:
        return f"{q.recorded_over_time('sum', record, '$__range')} / 3600"
    return f"sum_over_time(({q.use(record)})[$__range:{q.rule_interval}]) / 3600"


def fleet_job_hours(layout: PanelGrid, q: PromQL, k: int) -> None:
    """GPU-hours held per job over the range, the largest holders; and the largest idle holders with what they
    held. (The largest holders' idle hours are on each job's dashboard, one click away: a column for them would
    read both sums again and draw ten more series.)"""
    label = q.job_label
    held, idle = gpu_hours(q, "held"), gpu_hours(q, "idle")
    level = q.thresholds.alerts.allocated_idle.util_below_percent
    how = ("GPU-hours: the GPU-seconds a job held at each rule evaluation (recording cluster_job:gpu_held_seconds:"
           "interval, its GPU count x the interval) added up over the time range, exact to one evaluation; idle: "
           f"its GPUs under {level:g} % utilization (cluster_job:gpu_idle_seconds:interval). A job is a value of "
           f"the `{label}` label; click one to open it. user and account: the job's gpudash_job_info (the bundled "
           "exporter's, from Slurm's prolog), empty where no exporter publishes it.")
    columns = {"A": "GPU-hours held", "B": "GPU-hours idle"}
    spans = {"Y": LIFETIME_FROM, "Z": LIFETIME_TO}
    top_held = f"topk({k}, {held})"
    keep_held, hidden = lifetime_columns("Value #A")
    layout.add(table(
        f"GPU-hours held per job (top {k})",
        [Query(with_holders(q, top_held), ref="A"), *lifetime_queries(q, top_held, *spans)],
        how + " Its idle hours: the table beside when it is among the largest idle holders, else the job's "
              "dashboard.", {"A": columns["A"], **spans}, "none", None, links=[job_link(label)],
        hide_columns=("__name__",), link_column=label, sort=(columns["A"], True), before=[keep_held],
        overrides=hidden), w=12, h=8)
    top_idle = f"topk({k}, {idle} > 0)"
    keep_idle, _ = lifetime_columns("Value #B")
    layout.add(table(
        f"Largest idle holders (top {k} GPU-hours idle)",
        [Query(with_holders(q, f"{held} and on (cluster, {label}) {top_idle}"), ref="A"),
         Query(with_holders(q, top_idle), ref="B"), *lifetime_queries(q, top_idle, *spans)],
        how, {**columns, **spans}, "none", None, links=[job_link(label)], hide_columns=("__name__",),
        link_column=label, sort=(columns["B"], True), before=[keep_idle], overrides=hidden), w=12, h=8)


UNKNOWN_HOLDER = "unknown: no gpudash_job_info for this job"


def job_holder_table(q: PromQL) -> G.Table:
    """The job's user, account, partition and name, from `gpudash_job_info`; "unknown" where no series says."""
    return table(
        "Who holds the job", [Query(job_holders(q))],
        "The job's user, account, partition and name, as the bundled exporter publishes them in gpudash_job_info "
        "(Slurm's prolog records them beside the GPU mapping). Unknown where no exporter publishes the series "
        "(dcgm-exporter does not) or the job ended before its metadata was read.",
        None, "none", None, hide_columns=("__name__", "Value"), empty=UNKNOWN_HOLDER)
