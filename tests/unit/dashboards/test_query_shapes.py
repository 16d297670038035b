"""The shape of every dashboard query, read statically: how many series can it draw, and what names a series.

Two properties no live Prometheus in a unit test can show, but the expressions themselves can:

- bounded: a job-dashboard (and fleet) query draws a number of series that does not grow with the GPUs it
  covers: each selector it reads is a per-job or per-cluster recording, or sits inside an aggregation that
  groups above the GPU (no `instance`/GPU label kept), or inside a topk/bottomk, or on the left of an `and`
  whose right side is a topk/bottomk;
- one series per GPU: a node or fleet query that draws per-GPU series first aggregates each GPU's series
  to its identity (`max by (cluster, instance, gpu)`), so a GPU whose `hpc_job`/`pod` labels change, or
  that two jobs share, stays one series.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest
from support.paths import ROOT

from gpudash.catalog import ATTRIBUTION_LABELS, PROFILES, PROMETHEUS_ALERTS
from gpudash.config.loading import load_settings
from gpudash.panels.build import build_all
from gpudash.promql.for_settings import recording_rules

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|\{[^}]*\}|\[[^\]]*\]|[A-Za-z_:][A-Za-z0-9_:]*|[()]|\S')
AGGREGATIONS = frozenset({"sum", "min", "max", "avg", "count", "quantile", "stddev", "stdvar", "count_values",
                          "group", "topk", "bottomk", "limitk"})
TOP = frozenset({"topk", "bottomk", "limitk"})
LABEL_LISTS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
KEYWORDS = LABEL_LISTS | {"and", "or", "unless", "bool", "offset", "inf", "nan"}
FILTERS = frozenset({"and", "unless"})


@dataclass(frozen=True)
class Aggregation:
    op: str
    by: tuple[str, ...] | None  # None: no `by`, everything aggregated into one series


@dataclass(frozen=True)
class Read:
    """One selector an expression reads: the aggregations around it (outermost first), and whether only
    a filter (`and`/`unless`'s right side) reads it, and whether a topk/bottomk on the right of an `and`
    limits it."""

    name: str
    around: tuple[Aggregation, ...]
    filter_only: bool
    limited_by_and: bool


def reads(expr: str) -> list[Read]:
    tokens = _TOKEN.findall(expr)
    found: list[Read] = []
    stack: list[Aggregation | None] = []  # one entry per open parenthesis
    filtered: list[bool] = [False]  # per depth: an `and`/`unless` came earlier at this depth
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        nxt = tokens[i + 1] if i + 1 < len(tokens) else ""
        if tok in LABEL_LISTS and nxt == "(":
            close = tokens.index(")", i)
            labels = tuple(t for t in tokens[i + 2:close] if t != ",")
            prev = tokens[i - 1] if i else ""
            if tok == "by" and prev in AGGREGATIONS and tokens[close + 1] == "(":
                stack.append(Aggregation(prev, labels))
                filtered.append(False)
                i = close + 2
                continue
            i = close + 1
            continue
        if tok == "(":
            prev = tokens[i - 1] if i else ""
            stack.append(Aggregation(prev, None) if prev in AGGREGATIONS else None)
            filtered.append(False)
        elif tok == ")":
            stack.pop()
            filtered.pop()
        elif tok in FILTERS:
            filtered[-1] = True
        elif re.fullmatch(r"[A-Za-z_:][A-Za-z0-9_:]*", tok) and tok not in KEYWORDS and tok not in AGGREGATIONS \
                and nxt != "(" and nxt not in ("by", "without"):
            found.append(Read(tok, tuple(a for a in stack if a is not None), any(filtered),
                              _limited_by_and(tokens, i)))
        i += 1
    return found


def _limited_by_and(tokens: list[str], start: int) -> bool:
    """Whether, at any depth around tokens[start], an `and` follows whose right side opens with a topk."""
    depth = 0
    seen_and = False
    for j in range(start + 1, len(tokens)):
        tok = tokens[j]
        if tok == "(":
            depth += 1
        elif tok == ")":
            depth -= 1
            if depth < 0:
                depth, seen_and = 0, False  # left the enclosing parenthesis: look at the next level out
        elif depth == 0 and tok == "and":
            seen_and = True
        elif depth == 0 and seen_and and tok in TOP:
            return True
    return False


def per_gpu_labels(profile_name: str) -> frozenset[str]:
    return frozenset({"instance", PROFILES[profile_name].gpu_label, "pid"})


def bounded(read: Read, profile_name: str, per_job_is_bounded: bool) -> bool:
    if read.filter_only or read.limited_by_and or read.name.startswith("cluster:"):
        return True
    if per_job_is_bounded and read.name.startswith("cluster_job:"):
        return True
    identity = per_gpu_labels(profile_name)
    return any(a.op in TOP or a.by is None or not (set(a.by) & identity) for a in read.around)


def exprs(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    return [(p["title"], t["expr"]) for p in dashboard["panels"] if p["type"] != "row" for t in p["targets"]]


@pytest.fixture(scope="module", params=sorted(PROFILES))
def built(request: pytest.FixtureRequest) -> tuple[str, dict[str, dict[str, Any]]]:
    return request.param, build_all(load_settings(ROOT / "thresholds.yaml"), ROOT / "dashboards",
                                    profile_name=request.param)


# ------------------------------------------------------------------------------------- the reader itself


def test_the_reader_tells_bounded_from_unbounded() -> None:
    assert not bounded(reads('max by (cluster, instance, gpu) (DCGM_FI_DEV_GPU_UTIL{hpc_job="1"})')[0], "dcgm", True)
    assert not bounded(reads("DCGM_FI_DEV_GPU_UTIL")[0], "dcgm", True)
    assert not bounded(reads("count by (cluster, instance) (DCGM_FI_DEV_GPU_UTIL)")[0], "dcgm", True)
    assert bounded(reads("count(count by (cluster, instance) (DCGM_FI_DEV_GPU_UTIL))")[0], "dcgm", True)
    assert bounded(reads("quantile by (cluster, hpc_job) (0.5, DCGM_FI_DEV_FB_USED)")[0], "dcgm", True)
    assert bounded(reads("topk(10, max by (cluster, instance, gpu) (DCGM_FI_DEV_GPU_TEMP))")[0], "dcgm", True)
    left, right = reads("count by (cluster, instance) (X) and on (cluster, instance) bottomk(3, Y)")
    assert left.limited_by_and and bounded(right, "dcgm", True)
    assert not reads("count by (cluster, instance) (X) and on (cluster, instance) Y")[0].limited_by_and
    assert reads("topk(3, A > 0 and on (gpu) count by (gpu, hpc_job) (B))")[1].filter_only
    assert bounded(reads("cluster_job:gpu_count:count")[0], "dcgm", True)
    assert not bounded(reads("cluster_job:gpu_count:count")[0], "dcgm", False)


# ------------------------------------------------------------------------------------- bounded


def test_every_job_dashboard_query_is_bounded_whatever_the_job_size(
        built: tuple[str, dict[str, dict[str, Any]]]) -> None:
    """A 1,024-GPU job must not draw 1,024 series in any panel."""
    profile_name, dashboards = built
    job = dashboards["gpudash-job.json"]
    checked = 0
    for title, expr in exprs(job):
        for read in reads(expr):
            checked += 1
            assert bounded(read, profile_name, per_job_is_bounded=True), f"{title}: {read.name} in {expr}"
    assert checked > 20


def test_every_fleet_query_is_bounded_whatever_the_fleet_size(built: tuple[str, dict[str, dict[str, Any]]]) -> None:
    """At fleet level a per-job recording is not bounded either: a fleet may run thousands of jobs."""
    profile_name, dashboards = built
    for title, expr in exprs(dashboards["gpudash-fleet.json"]):
        for read in reads(expr):
            assert bounded(read, profile_name, per_job_is_bounded=False), f"{title}: {read.name} in {expr}"


def test_every_fabric_query_is_bounded_whatever_the_fleet_size(built: tuple[str, dict[str, dict[str, Any]]]) -> None:
    """Thousands of ports: every per-port list is a topk; ALERTS holds only what fires."""
    profile_name, dashboards = built
    for title, expr in exprs(dashboards["gpudash-fabric.json"]):
        for read in reads(expr):
            assert read.name == PROMETHEUS_ALERTS or bounded(read, profile_name, per_job_is_bounded=False), \
                f"{title}: {read.name} in {expr}"


def top_k_arguments(expr: str) -> list[str]:
    """The argument of each topk/bottomk/limitk call in the expression, parentheses balanced."""
    out = []
    for match in re.finditer(r"\b(?:topk|bottomk|limitk)\s*\(", expr):
        depth, start = 1, match.end()
        for i in range(start, len(expr)):
            depth += {"(": 1, ")": -1}.get(expr[i], 0)
            if not depth:
                out.append(expr[start:i])
                break
    return out


def picked_once(argument: str) -> bool:
    return re.search(r"@\s*(?:end|start)\(\)", argument) is not None


def test_the_pick_reader_tells_a_pinned_top_k_from_one_per_step() -> None:
    assert top_k_arguments("topk(3, max by (a) (x)) and y") == ["3, max by (a) (x)"]
    assert not any(map(picked_once, top_k_arguments("x and on (a) topk(3, max_over_time(x[1h]))")))
    assert all(map(picked_once, top_k_arguments("x and on (a) topk(3, max_over_time(x[1h] @ end()))")))


def test_no_list_over_time_picks_its_top_k_at_every_step(built: tuple[str, dict[str, dict[str, Any]]]) -> None:
    """A topk in a range query picks its k at every step, so over 6 h it draws every series that was ever among
    the worst; a list drawn over time picks its k once (`@ end()`) and draws k series whatever the fleet size."""
    _, dashboards = built
    checked = 0
    for name, board in dashboards.items():
        for panel in board["panels"]:
            for target in panel.get("targets", []):
                if target.get("instant") and not target.get("range"):
                    continue
                for argument in top_k_arguments(target["expr"]):
                    checked += 1
                    assert picked_once(argument), f"{name}: {panel['title']}: {target['expr']}"
    assert checked


# ------------------------------------------------------------------------------------- one series per GPU


def _per_gpu_series(name: str, profile_name: str) -> bool:
    """A series with one copy per GPU and job: a profile's GPU signal (not a process's), or a per-GPU recording
    whose rule does not merge the copies itself (the recorded lists do: they are read as they are)."""
    profile = PROFILES[profile_name]
    raw = {ref.name for key, ref in profile.metrics.items() if key != "process_fb_used"}
    if name in raw:
        return True
    if not name.startswith("cluster_instance_gpu"):
        return False
    settings = load_settings(ROOT / "thresholds.yaml")
    rule = {rec.record: expr for rec, expr in recording_rules(settings, profile=profile)}[name]
    return not all(identity_kept(read, profile_name) for read in reads(rule) if read.name in raw)


def identity_kept(read: Read, profile_name: str) -> bool:
    """The innermost aggregation around a per-GPU series merges its job copies: it keeps no attribution label
    and is not a topk (which picks series, copies and all)."""
    if read.filter_only or not read.around:
        return read.filter_only
    inner = read.around[-1]
    return inner.op not in TOP and (inner.by is None or not set(inner.by) & set(ATTRIBUTION_LABELS))


@pytest.mark.parametrize("uid", ["gpudash-node", "gpudash-fleet"])
def test_node_and_fleet_draw_one_series_per_gpu_whatever_its_job_labels(
        built: tuple[str, dict[str, dict[str, Any]]], uid: str) -> None:
    profile_name, dashboards = built
    checked = 0
    for title, expr in exprs(dashboards[f"{uid}.json"]):
        for read in reads(expr):
            if _per_gpu_series(read.name, profile_name):
                checked += 1
                assert identity_kept(read, profile_name), f"{title}: {read.name} in {expr}"
    assert checked > 2


def test_the_identity_check_catches_a_raw_per_gpu_panel() -> None:
    assert not identity_kept(reads('DCGM_FI_DEV_GPU_UTIL{instance=~"$instance"}')[0], "dcgm")
    assert not identity_kept(reads("topk(10, DCGM_FI_DEV_GPU_TEMP)")[0], "dcgm")
    assert not identity_kept(reads("max by (cluster, instance, gpu, hpc_job) (DCGM_FI_DEV_GPU_TEMP)")[0], "dcgm")
    assert identity_kept(reads("topk(10, max by (cluster, instance, gpu) (DCGM_FI_DEV_GPU_TEMP))")[0], "dcgm")
