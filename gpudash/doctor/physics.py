"""Link 7, what the data itself shows: GPUs hot with their clocks well under their max and a throttle
reason set (throttling: the exporter is right, the GPU is slowed), and nodes whose GPU count dropped.

Throttling is a hint with its evidence; a node that lost a GPU is a failure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpudash.catalog import THERMAL_OR_BRAKE_REASONS
from gpudash.doctor.expect import Expectations
from gpudash.doctor.findings import Finding, Link, count, fail, hint, listed, ok
from gpudash.doctor.observed import PEAK_WINDOW, PrometheusView, finite
from gpudash.escape import promql_matcher, re2_any

HOT, CLOCK, MAX_CLOCK, REASONS, GPUS_NOW, GPUS_PEAK = (
    "hot gpus", "sm clock", "max sm clock", "throttle reasons", "gpus per node", "gpus per node peak")
SHOWN = 5
Key = tuple[str, str, str]  # (cluster, instance, gpu)


def physics_queries(expect: Expectations) -> dict[str, str]:
    profile, t = expect.profile, expect.settings.thresholds
    gpus = f"count by (cluster, instance) ({expect.gpu_metric})"
    queries = {
        GPUS_NOW: gpus,
        GPUS_PEAK: f"max_over_time(({gpus})[{PEAK_WINDOW}:])",
    }
    if profile.has("gpu_temp") and profile.has("sm_clock"):
        temp = profile.ref("gpu_temp")
        queries[HOT] = f"{temp.name} >= {t.temperature.gpu.warning:g}"
        queries[CLOCK] = profile.ref("sm_clock").name
    if profile.has("sm_clock_max"):
        queries[MAX_CLOCK] = profile.ref("sm_clock_max").name
    if profile.has("clock_event_active"):
        reasons = promql_matcher("clock_event", "=~", re2_any(THERMAL_OR_BRAKE_REASONS))
        queries[REASONS] = f"{profile.ref('clock_event_active').name}{{{reasons}}} == 1"
    return queries


def _by_gpu(rows: Any, gpu_label: str) -> dict[Key, list[tuple[Mapping[str, str], float]]]:
    found: dict[Key, list[tuple[Mapping[str, str], float]]] = {}
    for row in rows or ():
        labels = row.get("metric") or {}
        value = finite((row.get("value") or [0, ""])[1])
        if value is not None:
            key = (labels.get("cluster", ""), labels.get("instance", ""), labels.get(gpu_label, ""))
            found.setdefault(key, []).append((labels, value))
    return found


def physics_findings(view: PrometheusView, expect: Expectations) -> list[Finding]:
    if view.error:
        return []
    findings = _lost_gpus(view) + _throttled(view, expect)
    if not findings:
        findings.append(ok(Link.PHYSICS, "fleet", f"no GPU hot and slowed; no node lost a GPU in the last "
                                                  f"{PEAK_WINDOW}"))
    return findings


def _lost_gpus(view: PrometheusView) -> list[Finding]:
    now = {(k[0], k[1]): v[0][1] for k, v in _by_gpu(view.results.get(GPUS_NOW), "").items()}
    peak = {(k[0], k[1]): v[0][1] for k, v in _by_gpu(view.results.get(GPUS_PEAK), "").items()}
    findings = []
    for node, most in sorted(peak.items()):
        have = now.get(node, 0.0)
        if have < most:
            cluster, instance = node
            what = f"{count(int(have), 'GPU')} reporting now, {int(most)} within the last {PEAK_WINDOW}"
            if not have:  # the whole node is silent: its exporter or its scrape, not a GPU
                findings.append(fail(Link.PHYSICS, f"{instance} ({cluster})", what,
                                     why="the node or its exporter stopped reporting (the targets above say which)",
                                     fix="start the exporter on the node, or remove the node from the scrape config"))
                continue
            findings.append(fail(Link.PHYSICS, f"{instance} ({cluster})", what,
                                 why="a GPU fell off the bus (XID 79), or NVML lost it",
                                 fix="`nvidia-smi` and `dmesg | grep -i xid` on the node; drain it, reset the GPU "
                                     "or reboot"))
    return findings


def _throttled(view: PrometheusView, expect: Expectations) -> list[Finding]:
    gpu = expect.profile.gpu_label
    hot = _by_gpu(view.results.get(HOT), gpu)
    clocks = _by_gpu(view.results.get(CLOCK), gpu)
    peaks = _by_gpu(view.results.get(MAX_CLOCK), gpu)
    reasons = _by_gpu(view.results.get(REASONS), gpu)
    drop = expect.settings.thresholds.throttle_drop_ratio
    found: list[Finding] = []
    for key, rows in sorted(hot.items()):
        temp = rows[0][1]
        clock = clocks.get(key, [({}, 0.0)])[0][1]
        most = peaks.get(key, [({}, 0.0)])[0][1]
        set_reasons = sorted({labels.get("clock_event", "") for labels, _ in reasons.get(key, [])})
        slowed = most > 0 and clock < (1 - drop) * most
        if slowed and set_reasons:
            cluster, instance, number = key
            found.append(hint(Link.PHYSICS, f"GPU {number} on {instance} ({cluster})",
                              f"throttling: {temp:.0f} C, SM clock {clock:.0f} of {most:.0f} MHz, "
                              f"{listed(set_reasons)}",
                              why="the GPU slows itself to cool down: the exporter reads it right",
                              fix="airflow, fans and inlet temperature of the node; GPUThermalThrottling alerts on it"))
    if len(found) > SHOWN:
        found = [*found[:SHOWN], hint(Link.PHYSICS, "fleet", f"and {len(found) - SHOWN} more GPUs throttling")]
    return found
