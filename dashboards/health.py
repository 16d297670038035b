"""GPU health: which GPUs need what now, each GPU's history by UUID, and how far each runs from its limits.

Reads the health alerts through Prometheus' own ALERTS series (every health alert carries an `action`:
none, restart_job, reset_gpu, reboot_node, drain, rma), the ECC, row-remap, XID, NVLink and violation
counters over 30 or 90 days (`$ledger`), keyed by UUID so a GPU's history follows it between nodes, and
each GPU's own maximum operating temperatures. Panels on signals the metric profile lacks are left out.
"""

from __future__ import annotations

from grafanalib import core as G

from gpudash.config.durations import parse_duration
from gpudash.panels.build import BuildContext
from gpudash.panels.health_actions import action_now_section, action_over_time_section
from gpudash.panels.health_ledger import ledger_section
from gpudash.panels.visualizations import GREEN, ORANGE, RED, PanelGrid, Query, bar_gauge, color_steps
from gpudash.promql.query import PromQL
from gpudash.repository import FLEET_UID, HEALTH_UID, NODE_UID

UID = HEALTH_UID
TITLE = "GPU health"
LEDGER_WINDOWS = ("30d", "90d")
LEDGER_REFRESH = parse_duration("5m")
COOLEST = 10


def build(ctx: BuildContext) -> G.Dashboard:
    q = ctx.promql("health")
    layout = PanelGrid()
    layout.section("GPUs needing action now")
    action_now_section(layout, q)
    layout.section("GPU ledger by UUID")
    ledger_section(layout, q)
    layout.section("Fleet health over time")
    action_over_time_section(layout, q)
    layout.section("Temperature headroom")
    _headroom(layout, q)

    links = [G.DashboardLink(title="GPU fleet", uri=f"/d/{FLEET_UID}", keepTime=True, includeVars=True),
             G.DashboardLink(title="GPU node", uri=f"/d/{NODE_UID}", keepTime=True, includeVars=True)]
    dashboard = ctx.dashboard(UID, TITLE, "GPUs needing action now, each GPU's health ledger by UUID, health "
                                          "alerts over time, temperature headroom.", "health", layout.panels, links)
    # The ledger reads 30 or 90 days and its counts move by the hour: refreshing it every 30 s re-reads weeks
    # twice a minute for nothing. The site's refresh still wins where it is slower.
    site_refresh = ctx.settings.thresholds.dashboards.refresh
    dashboard.refresh = str(max(site_refresh, LEDGER_REFRESH, key=lambda d: d.seconds))
    dashboard.templating.list.append(G.Template(
        name="ledger", label="Ledger", query=",".join(LEDGER_WINDOWS), type="custom", default=LEDGER_WINDOWS[0]))
    return dashboard


def _headroom(layout: PanelGrid, q: PromQL) -> None:
    """Max operating temperature minus temperature now, per GPU, the coolest headroom first."""
    core = ""
    if q.has("gpu_max_op_temp", "gpu_temp"):
        core = f"{q.gpu_once('gpu_max_op_temp')} - {q.gpu_once('gpu_temp')}"
    if q.has("temp_margin"):
        # T.Limit is the same headroom as the driver computes it: where the limit itself is not published.
        core = f"({core}) or {q.gpu_once('temp_margin')}" if core else q.gpu_once("temp_margin")
    hbm = f"{q.gpu_once('mem_max_op_temp')} - {q.gpu_once('hbm_temp')}" if q.has("mem_max_op_temp", "hbm_temp") else ""
    legend = f"{{{{instance}}}} GPU {{{{{q.gpu}}}}}"
    temp = q.thresholds.temperature
    for what, expr, margin in (("GPU core", core, temp.gpu_margin), ("HBM", hbm, temp.hbm_margin)):
        if not expr:
            continue
        steps = color_steps((RED, None), (ORANGE, 0), (GREEN, margin))
        layout.add(bar_gauge(
            f"{what} headroom: the {COOLEST} closest to their limit",
            Query(f"bottomk({COOLEST}, {expr})", legend), "celsius",
            f"Degrees left before each GPU's own maximum operating {what} temperature (its max operating "
            "temperature minus its temperature now; T.Limit where the driver publishes only that), the "
            f"{COOLEST} GPUs with the least first. Orange: within the {margin:g} °C warning margin; red: above "
            "the limit, the GPU slows itself down. One GPU "
            "low while its neighbours are not: its fan, heatsink or airflow; a whole node low: inlet "
            "temperature or cooling. Drain it if it stays red under load. The bundled exporter publishes the "
            "limits; dcgm-exporter only when its counters CSV enables DCGM_FI_DEV_GPU_MAX_OP_TEMP, "
            "DCGM_FI_DEV_MEM_MAX_OP_TEMP or DCGM_FI_DEV_GPU_TEMP_LIMIT.", steps, 0, 40, desc=False), w=12, h=9)
