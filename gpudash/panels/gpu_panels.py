"""GPU panels several dashboards use, built from a scoped PromQL: the stat row, the 24 h comparison row and the
MIG instances table.

Each function adds its panels to a PanelGrid and leaves out what the metric profile cannot fill.
"""

from __future__ import annotations

from grafanalib import core as G

from gpudash.catalog import DCGM, MIG_INSTANCE_LABEL, MIG_PROFILE_LABEL
from gpudash.panels.job_panels import node_link
from gpudash.panels.visualizations import (
    BLUE,
    GREEN,
    ORANGE,
    PanelGrid,
    Query,
    color_steps,
    idle_count_steps,
    level_steps,
    stat,
    table,
    timeseries,
    utilization_steps,
)
from gpudash.promql.query import PromQL, Scope


def aggregate(q: PromQL, level: str, what: str) -> str | None:
    """Whole-scope aggregates: from recording rules on the fleet dashboard, from raw series on a node (each
    GPU once, see `PromQL.per_gpu`)."""
    fleet = level == "fleet"

    def gpus(key: str) -> str:
        return q.per_gpu(q.metric(key))

    exprs: dict[str, tuple[tuple[str, ...], str]] = {
        "gpus": (("gpu_util",),
                 f"sum({q.use('cluster:gpu_count:count')})" if fleet else f"count({gpus('gpu_util')})"),
        "util": (("gpu_util",),
                 f"sum({q.use('cluster:gpu_utilization:sum')}) / sum({q.use('cluster:gpu_count:count')})"
                 if fleet else f"avg({gpus('gpu_util')})"),
        "idle": (("gpu_util",),
                 f"sum({q.use('cluster:gpu_idle:count')})" if fleet else
                 f"sum({gpus('gpu_util')} < bool {q.thresholds.utilization.idle_below_percent:g})"),
        "hottest": (("gpu_temp",),
                    f"max({q.use('cluster:gpu_temperature_celsius:max')})" if fleet else
                    f"max({gpus('gpu_temp')})"),
        "power": (("power",),
                  f"sum({q.use('cluster:gpu_power_watts:sum')})" if fleet else f"sum({gpus('power')})"),
        "memory": (("fb_used", "fb_free"),
                   f"sum({q.use('cluster:gpu_fb_used_mib:sum')}) / sum({q.use('cluster:gpu_fb_total_mib:sum')})"
                   if fleet else f"sum({gpus('fb_used')}) / sum({gpus('fb_used')} + {gpus('fb_free')})"),
        "temp_mean": (("gpu_temp", "gpu_util") if fleet else ("gpu_temp",),
                      f"sum({q.use('cluster:gpu_temperature_celsius:sum')}) / sum({q.use('cluster:gpu_count:count')})"
                      if fleet else f"avg({gpus('gpu_temp')})"),
    }
    needs, expr = exprs[what]
    return expr if q.has(*needs) else None


def stat_row(layout: PanelGrid, q: PromQL, level: str) -> None:
    t = q.thresholds
    where = "in the selected clusters" if level == "fleet" else "on the selected node"
    specs = [
        ("GPUs reporting", "gpus", "none", f"GPUs whose exporter reported utilization {where}.", None),
        ("Mean utilization", "util", "percent", f"Mean GPU utilization {where}.", utilization_steps(t)),
        ("Idle GPUs", "idle", "none",
         f"GPUs under {t.utilization.idle_below_percent:g} % utilization {where}: capacity nobody uses.",
         idle_count_steps()),
        ("Hottest GPU", "hottest", "celsius", f"Highest GPU die temperature {where}.", level_steps(t.temperature.gpu)),
        ("Memory used", "memory", "percentunit", f"Framebuffer used / (used + free) {where}.", level_steps(t.memory)),
        ("Total power", "power", "watt", f"Power drawn by all GPUs {where}.", None),
    ]
    for title, what, unit, description, steps in specs:
        expr = aggregate(q, level, what)
        if expr is not None:
            # No "0" for an empty answer: no exporter or no recording rules must look like no data.
            layout.add(stat(title, Query(expr, title), unit, description, steps, graph=what in ("util", "power")),
                       w=4, h=4)


# A difference of two percentages is in percentage points: Grafana's custom suffix unit.
POINTS = "suffix:pp"


def change_steps(rising_is_bad: bool, level: float) -> list[G.Threshold]:
    """Colour a change by its direction: orange once it moves `level` the bad way, blue the good way."""
    if rising_is_bad:
        return color_steps((BLUE, None), (GREEN, -level), (ORANGE, level))
    return color_steps((ORANGE, None), (GREEN, -level), (BLUE, level))


def comparison_row(layout: PanelGrid, q: PromQL, level: str) -> None:
    """Now against the same time yesterday: both lines overlaid, and the change as a stat beside each; two
    pairs to a row, legends below, so each plot gets most of its half of the width."""
    offset = str(q.thresholds.dashboards.comparison_offset)
    before = q.with_scope(Scope(q.scope.matchers, offset))
    t = q.thresholds
    # (title, what, unit, steps, change: unit, scale, rising is bad, the level at which a change turns orange)
    u, temp = t.utilization, t.temperature.gpu
    specs = [
        ("Utilization", "util", "percent", utilization_steps(t), POINTS, 1, False, u.idle_below_percent),
        ("Memory used", "memory", "percentunit", level_steps(t.memory), POINTS, 100, True,
         round((1 - t.memory.warning) * 100, 6)),
        ("Temperature (mean)", "temp_mean", "celsius", level_steps(temp), "celsius", 1, True,
         temp.critical - temp.warning),
        ("Power", "power", "watt", None, "watt", 1, True, None),
    ]
    for title, what, unit, steps, change_unit, scale, rising_is_bad, orange in specs:
        now, then = aggregate(q, level, what), aggregate(before, level, what)
        if now is None or then is None:
            continue
        layout.add(timeseries(
            f"{title}: now and {offset} ago", [Query(now, "now", ref="A"), Query(then, f"{offset} ago", ref="B")],
            unit, f"{title} now (solid) against the same time {offset} earlier (dashed).", steps,
            dashed_refs=("B",), legend="bottom"), w=10, h=7)
        change = f"({now}) - ({then})" if scale == 1 else f"(({now}) - ({then})) * {scale}"
        points = " in percentage points" if change_unit == POINTS else ""
        colour = (f" Orange once it moves {orange:g} the {'up' if rising_is_bad else 'down'} way." if orange
                  else "")
        layout.add(stat(f"{title}: change vs {offset} ago", Query(change, "change"), change_unit,
                        f"{title} now minus {title.lower()} {offset} ago{points}.{colour}",
                        change_steps(rising_is_bad, orange) if orange else None, graph=False), w=2, h=7)


def mig_instances(layout: PanelGrid, q: PromQL, title: str, description: str, empty: str,
                  k: int | None = None) -> None:
    """One row per MIG GPU instance (`GPU_I_ID`, `GPU_I_PROFILE`, as both exporters label them) in `q`'s scope, the
    `k` largest by memory where given: its memory used, the share of its own memory, and its SM activity where
    published (optional in dcgm-exporter's counters; GPM per instance in the bundled exporter). Only a profile
    with DCGM's names has them (nvidia_gpu_exporter has no instances)."""
    if q.profile.name != DCGM.name:
        return
    keep = ", ".join(("cluster", "instance", q.gpu, MIG_INSTANCE_LABEL, MIG_PROFILE_LABEL))
    only = ((MIG_INSTANCE_LABEL, "!=", ""),)
    used, free = q.metric("fb_used", only), q.metric("fb_free", only)
    rows = f"max by ({keep}) ({used})"
    if k is not None:
        rows = f"topk({k}, {rows})"
    columns = {"A": "memory used", "B": "used"}
    exprs = {"B": f"{used} / ({used} + {free})"}
    if q.has("sm_active"):
        columns["C"] = "SM active"
        exprs["C"] = q.metric("sm_active", only)
    queries = [Query(rows, ref="A"), *(Query(f"max by ({keep}) ({e}) and on ({keep}) {rows}", ref=ref)
                                       for ref, e in exprs.items())]
    ratio = [{"matcher": {"id": "byName", "options": columns[ref]},
              "properties": [{"id": "unit", "value": "percentunit"}]} for ref in exprs]
    layout.add(table(title, queries, description, columns, "mbytes", level_steps(q.thresholds.memory),
                     links=[node_link(q.gpu)], hide_columns=("__name__",), sort=("memory used", True),
                     coloured="used", empty=empty, overrides=ratio), w=24, h=6)
