"""Link 3, labels: the labels the dashboards and rules select on exist on the GPU series, naming the
nearest label that does when one is missing (`gpu_id` for `gpu`, `Hostname` for `hostname`); every GPU
series carries `cluster`; the site's job label, where jobs are attributed.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from gpudash.catalog import ATTRIBUTION_LABELS, DCGM, MIG_INSTANCE_LABEL, MIG_PROFILE_LABEL
from gpudash.doctor.expect import Expectations
from gpudash.doctor.findings import Finding, Link, fail, hint, listed, ok
from gpudash.doctor.observed import PrometheusView, finite
from gpudash.escape import promql_matcher

GPU_SERIES, WITH_CLUSTER, WITH_JOB = "gpu series", "gpu series with cluster", "gpu series with job label"
CORE = ("cluster", "instance")


def label_queries(expect: Expectations) -> dict[str, str]:
    metric = expect.gpu_metric
    job_label = expect.settings.site.job_label
    return {
        GPU_SERIES: f"count({metric})",
        WITH_CLUSTER: f"count({metric}{{{promql_matcher('cluster', '!=', '')}}})",
        WITH_JOB: f"count({metric}{{{promql_matcher(job_label, '!=', '')}}})",
    }


def optional_labels(expect: Expectations) -> set[str]:
    """Labels that only attributed or partitioned GPUs carry (a job's, a pod's, a MIG instance's): their absence is
    a hint, never a failure."""
    return {expect.settings.site.job_label, *ATTRIBUTION_LABELS, MIG_INSTANCE_LABEL, MIG_PROFILE_LABEL}


def selected(expect: Expectations, name: str) -> set[str]:
    """The labels the dashboards and rules select on for one metric, less the optional ones."""
    return set(expect.selector_labels.get(name, ())) - optional_labels(expect)


def label_metrics(expect: Expectations) -> list[str]:
    """The GPU series to ask for label names: utilization, and any other selected on with labels of its own."""
    core = {*CORE, expect.profile.gpu_label}
    extra = [name for name in expect.selector_labels if selected(expect, name) - core]
    return [expect.gpu_metric, *(name for name in extra if name != expect.gpu_metric)]


def nearest(label: str, present: Sequence[str]) -> str | None:
    """The label on the series most like the missing one: same letters in another case first."""
    same = [name for name in present if name.lower() == label.lower()]
    if same:
        return same[0]
    close = difflib.get_close_matches(label, present, n=1, cutoff=0.6)
    if close:
        return close[0]
    started = [name for name in present if name.lower().startswith(label.lower())]
    return started[0] if started else None


def _count(view: PrometheusView, name: str) -> int:
    result = view.results.get(name, ())
    value = finite(result[0].get("value", [0, ""])[1]) if result else None
    return int(value) if value is not None else 0


def _relabel_fix(label: str, near: str | None) -> str:
    if label == "cluster":
        return ("give each scrape target `labels: {cluster: NAME}` (the scrape config `gpudash rules` renders "
                "does), or set global.external_labels.cluster on each cluster's Prometheus")
    if near:
        return (f"prometheus.yml, in the exporter's scrape job: metric_relabel_configs: [{{source_labels: [{near}], "
                f"target_label: {label}}}]")
    return "publish it from the exporter, or pick the metric profile that matches it (gpudash.yaml profile)"


def label_findings(view: PrometheusView, expect: Expectations) -> list[Finding]:
    if view.error:
        return []
    metric = expect.gpu_metric
    total = _count(view, GPU_SERIES)
    if not total:
        return [fail(Link.LABELS, metric, f"no {metric} series in Prometheus",
                     why="no exporter target is up, or the exporter names its metrics otherwise "
                         f"(profile {expect.profile.name!r})",
                     fix="see the targets above; `gpudash.yaml profile: nvidia_smi` for nvidia_gpu_exporter")]
    findings: list[Finding] = []
    wanted = {metric: sorted({*CORE, expect.profile.gpu_label, *selected(expect, metric)})}
    for name in label_metrics(expect)[1:]:
        wanted[name] = sorted(selected(expect, name))
    reported: set[str] = set()  # a label missing everywhere is named once, on the GPU series
    for name, labels in wanted.items():
        present = [label for label in view.labels.get(name, ()) if label != "__name__"]
        if not present:
            continue  # a metric with no series: the exporter link says which fields are missing
        for label in labels:
            if label not in present and label not in reported:
                reported.add(label)
                near = nearest(label, present)
                seen = f"; nearest: {near}" if near else f"; it has {listed(list(present), 8)}"
                findings.append(fail(Link.LABELS, name, f"label {label!r} is on no series{seen}",
                                     why=f"the dashboards and rules select on {label!r}: their panels show No data",
                                     fix=_relabel_fix(label, near)))
    with_cluster = _count(view, WITH_CLUSTER)
    if 0 < with_cluster < total:
        findings.append(fail(Link.LABELS, metric, f"{total - with_cluster} of {total} GPU series have no 'cluster'",
                             why="one scrape job or one Prometheus does not attach the cluster label",
                             fix=_relabel_fix("cluster", None)))
    if not any(f.failed for f in findings):
        findings.append(ok(Link.LABELS, metric, f"{total} GPU series carry {', '.join(wanted[metric])}"))
    findings += _identity(view.labels.get(metric, ()), expect, metric)
    findings.append(_job_label(view, expect, total))
    return findings


def _identity(present: Sequence[str], expect: Expectations, metric: str) -> list[Finding]:
    """dcgm-exporter's identity labels: not selected on by the dashboards, but what people search by."""
    if expect.profile.name != DCGM.name or not present:
        return []
    host = ("hostname" if "hostname" in present
            else "Hostname (dcgm-exporter before 3.3)" if "Hostname" in present else "")
    missing = [name for name, there in (("UUID", "UUID" in present), ("hostname", bool(host))) if not there]
    if not missing:
        return [ok(Link.LABELS, metric, f"GPU identity labels: UUID, {host}")]
    return [hint(Link.LABELS, metric, f"no {' or '.join(missing)} label on the GPU series",
                 why="dcgm-exporter publishes them; a relabelling drops them, or another exporter serves these names",
                 fix="keep UUID and hostname: a GPU is found by them when it moves or is swapped")]


def _job_label(view: PrometheusView, expect: Expectations, total: int) -> Finding:
    label = expect.settings.site.job_label
    with_job = _count(view, WITH_JOB)
    if with_job:
        return ok(Link.LABELS, label, f"job label {label!r} on {with_job} of {total} GPU series")
    return hint(Link.LABELS, label, f"no GPU series carries the job label {label!r} (jobs.label)",
                why="normal while no job runs, or where the exporter does not attribute GPUs to jobs",
                fix="to attribute: `gpudash exporter` with a Slurm job-mapping directory, or dcgm-exporter "
                    "--kubernetes; on Kubernetes set jobs.label to the pod label that names the job")
