"""The health dashboard as generated: its panels, the ALERTS it reads, the ledger keyed by UUID, its links."""

from __future__ import annotations

import re
from typing import Any

import pytest
from support.paths import ROOT

from gpudash.catalog import DCGM
from gpudash.config.loading import load_settings
from gpudash.health.xid import XID_TABLE, action_for
from gpudash.panels.build import build_all
from gpudash.panels.health_ledger import ledger_columns, xid_actions, xid_title
from gpudash.promql.for_settings import promql_for
from gpudash.promql.recordings import RECORDING_BY_NAME
from gpudash.promql.scanner import metric_names, subquery_steps

NAME = "gpudash-health.json"
LEDGER = "GPU ledger by UUID over $ledger (worst 50)"
ALERT_TABLE = "Firing health alerts, costliest action first"


@pytest.fixture(scope="module")
def dcgm() -> dict[str, Any]:
    return build_all(load_settings(ROOT / "thresholds.yaml"), ROOT / "dashboards")[NAME]


@pytest.fixture(scope="module")
def smi() -> dict[str, Any]:
    return build_all(load_settings(ROOT / "thresholds.yaml"), ROOT / "dashboards", profile_name="nvidia_smi")[NAME]


def panels(dashboard: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["title"]: p for p in dashboard["panels"] if p["type"] != "row"}


def exprs(panel: dict[str, Any]) -> dict[str, str]:
    return {t["refId"]: t["expr"] for t in panel["targets"]}


def test_uid_title_variables_and_sections(dcgm: dict[str, Any]) -> None:
    assert (dcgm["uid"], dcgm["title"]) == ("gpudash-health", "GPU health")
    variables = {v["name"]: v for v in dcgm["templating"]["list"]}
    assert list(variables) == ["datasource", "cluster", "instance", "ledger"]
    assert variables["instance"]["definition"] == 'label_values(DCGM_FI_DEV_GPU_UTIL{cluster=~"$cluster"}, instance)'
    ledger = variables["ledger"]
    assert (ledger["type"], ledger["query"], ledger["current"]["value"]) == ("custom", "30d,90d", "30d")
    assert [o["value"] for o in ledger["options"]] == ["30d", "90d"]
    rows = [p["title"] for p in dcgm["panels"] if p["type"] == "row"]
    assert rows == ["GPUs needing action now", "GPU ledger by UUID", "Fleet health over time", "Temperature headroom"]
    assert all(p.get("description") for p in panels(dcgm).values())


def test_one_coloured_stat_per_action_read_from_firing_alerts(dcgm: dict[str, Any]) -> None:
    found = panels(dcgm)
    for title, action, colour in (("RMA", "rma", "dark-red"), ("Drain", "drain", "red"),
                                  ("Reboot node", "reboot_node", "orange"), ("Reset GPU", "reset_gpu", "yellow"),
                                  ("Restart job", "restart_job", "blue")):
        panel = found[title]
        assert panel["type"] == "stat"
        assert exprs(panel)["A"] == (
            'count(count by (cluster, instance, gpu) (ALERTS{cluster=~"$cluster",instance=~"$instance",'
            f'alertstate="firing",action="{action}"}}))')
        steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
        assert [(s["color"], s["value"]) for s in steps] == [("green", None), (colour, 1)]


def test_the_alert_table_sorts_by_cost_then_hides_it_and_links_to_the_gpu(dcgm: dict[str, Any]) -> None:
    table = panels(dcgm)[ALERT_TABLE]
    cost, since = exprs(table)["A"], exprs(table)["B"]
    for action, value in (("rma", 5), ("drain", 4), ("reboot_node", 3), ("reset_gpu", 2), ("restart_job", 1)):
        assert f'ALERTS{{cluster=~"$cluster",instance=~"$instance",alertstate="firing",action="{action}"}}) * 0 + ' \
               f"{value}" in cost
    assert 'action="none"' not in cost and "ALERTS_FOR_STATE" in since and since.count("* 1000") == 2
    assert "group_left (UUID)" in cost and "unless on (cluster, instance, gpu)" in cost
    kinds = [t["id"] for t in table["transformations"]]
    # The metric name dropped before the merge; sorted on the cost before the cost column is hidden.
    assert kinds == ["organize", "merge", "sortBy", "organize"]
    assert table["transformations"][2]["options"]["sort"] == [{"field": "Value #A", "desc": True}]
    assert table["transformations"][3]["options"]["excludeByName"]["Value #A"] is True
    link = table["fieldConfig"]["overrides"][0]["properties"][0]["value"][0]["url"]
    assert link == ("/d/gpudash-node?var-cluster=${__data.fields.cluster:percentencode}"
                    "&var-instance=${__data.fields.instance:percentencode}&var-gpu=${__data.fields.gpu:percentencode}"
                    "&${__url_time_range}")


def test_the_ledger_is_keyed_by_uuid_over_the_ledger_window(dcgm: dict[str, Any]) -> None:
    table = panels(dcgm)[LEDGER]
    queries = exprs(table)
    assert table["transformations"][0] == {"id": "joinByField", "options": {"byField": "UUID", "mode": "outer"}}
    rows = queries.pop("A")
    assert rows.startswith("topk(50, sum by (UUID) (")
    assert "* on (UUID) group_left (cluster, instance, gpu)" in rows
    # Seen last: where the GPU reports now, else the latest slot it stopped reporting in (a sparse recording).
    seen = 'DCGM_FI_DEV_GPU_UTIL{cluster=~"$cluster",instance=~"$instance"} * 0 + time()'
    stopped = 'cluster_instance_gpu_uuid:gpu_reporting:stopped_at{cluster=~"$cluster",instance=~"$instance"}'
    assert (f"topk by (UUID) (1, max by (UUID, cluster, instance, gpu) ({seen}) or max by (UUID, cluster, instance, "
            f"gpu) (last_over_time({stopped}[$ledger]))) > bool 0") in rows
    names = table["transformations"][3]["options"]["renameByName"]
    # The resets: GPURepeatOffender's count over its own window, from the sparse recording, whatever $ledger.
    resets = queries.pop(next(ref for ref in queries if names[f"Value #{ref}"] == "Resets in 7d"))
    assert resets == ('(sum by (UUID) (count_over_time(cluster_instance_gpu_uuid:gpu_reset_episodes:new'
                      '{cluster=~"$cluster"}[7d]))) > 0')
    for expr in queries.values():
        # Every other column: per UUID, over the window, across every node in the chosen clusters.
        assert "sum by (UUID) (" in expr and "[$ledger]" in expr and "$instance" not in expr, expr
        assert expr.endswith(" > 0")
    # The window is read from sparse recordings only: no GPU's raw counters, no subquery over weeks.
    for expr in [rows, *queries.values()]:
        assert set(metric_names(expr)) - {"DCGM_FI_DEV_GPU_UTIL"} <= set(RECORDING_BY_NAME), expr
        assert not subquery_steps(expr), expr
    assert names["Value #A"] == "worst action"
    assert {"DBE volatile", "DBE aggregate", "SBE volatile", "SBE aggregate", "Uncorrectable remapped rows",
            "Correctable remapped rows", "Remap pending", "Remap failure", "NVLink errors", "Thermal throttled",
            "Power throttled", "XIDs for reset_gpu", "XIDs for reboot_node", "XIDs for drain", "XIDs for restart_job",
            "XIDs needing no action"} <= set(names.values())


def test_xid_columns_group_the_codes_by_the_action_their_alerts_call_for(dcgm: dict[str, Any]) -> None:
    table = panels(dcgm)[LEDGER]
    names = table["transformations"][3]["options"]["renameByName"]
    by_title = {names[f"Value #{ref}"]: expr for ref, expr in exprs(table).items() if ref != "A"}
    actions = xid_actions()
    assert sorted(c for codes in actions.values() for c in codes) == sorted(XID_TABLE)
    for action, codes in actions.items():
        assert f'xid=~"{"|".join(str(c) for c in codes)}"' in by_title[xid_title(action)]
    assert 'xid!~"' in by_title[xid_title(action_for(0).action)]  # a code not in the table: the default action
    assert '"48|' in by_title["XIDs for reset_gpu"] or "|48|" in by_title["XIDs for reset_gpu"]


def test_each_xid_weighs_in_the_worst_action_as_its_alert_asks() -> None:
    """XID 43 (no action) must not rank a GPU as restart_job, nor 62 (reset_gpu) as drain, as a column per
    XID class did (43 with 13, 62 with 54)."""
    weighed = {}
    for column in ledger_columns(promql_for(load_settings(ROOT / "thresholds.yaml"), recorded=True, profile=DCGM)):
        for code in XID_TABLE:
            if re.search(rf'xid=~"(?:[^"]*\|)?{code}(?:\|[^"]*)?"', column.expr):
                weighed.setdefault(code, set()).add(column.action)
    assert weighed == {code: {action_for(code).action} for code in XID_TABLE}


def test_the_worst_action_column_reads_the_score_as_an_action(dcgm: dict[str, Any]) -> None:
    table = panels(dcgm)[LEDGER]
    override = next(o for o in table["fieldConfig"]["overrides"] if o["matcher"]["options"] == "worst action")
    ranges = [(m["options"]["from"], m["options"]["result"]["text"]) for m in override["properties"][0]["value"]]
    assert ranges == [(0, "none"), (100, "restart_job"), (10 ** 4, "reset_gpu"), (10 ** 6, "reboot_node"),
                      (10 ** 8, "drain"), (10 ** 10, "rma")]
    rows = exprs(table)["A"]
    assert "clamp_max(" in rows and "* 10000000000" in rows  # a remap failure (rma) outweighs 99 of anything else


def test_headroom_reads_each_gpus_own_limits(dcgm: dict[str, Any]) -> None:
    found = panels(dcgm)
    core = exprs(found["GPU core headroom: the 10 closest to their limit"])["A"]
    assert core.startswith("bottomk(10, (max by (cluster, instance, gpu) (DCGM_FI_DEV_GPU_MAX_OP_TEMP{")
    assert "DCGM_FI_DEV_GPU_TEMP_LIMIT" in core
    hbm = exprs(found["HBM headroom: the 10 closest to their limit"])["A"]
    assert "DCGM_FI_DEV_MEM_MAX_OP_TEMP" in hbm and "DCGM_FI_DEV_MEMORY_TEMP" in hbm


def test_nvidia_smi_leaves_out_what_it_cannot_fill(smi: dict[str, Any]) -> None:
    found = panels(smi)
    assert not any("headroom" in title for title in found)
    table = found[LEDGER]
    names = set(table["transformations"][3]["options"]["renameByName"].values())
    # nvidia_gpu_exporter publishes remapped rows and the remap failure flag; no ECC, XIDs or NVLink counters.
    assert names == {"worst action", "Uncorrectable remapped rows", "Correctable remapped rows", "Remap failure"}
    assert table["transformations"][0]["options"]["byField"] == "uuid"
    ledger_exprs = exprs(table).values()
    assert all("DCGM_" not in e and "gpudash_" not in e for e in ledger_exprs)
    assert all("sum by (uuid)" in e for e in ledger_exprs)
    down = exprs(found["GPUs down / expected"])
    # GPUs reporting, from the per-node count the recording rules keep (built from the profile's utilization)
    reporting = 'sum(cluster_instance:gpu_count:count{cluster=~"$cluster",instance=~"$instance"})'
    assert list(down) == ["A"] and down["A"] == reporting
    for panel in found.values():
        for expr in exprs(panel).values():
            assert not any(name.startswith("DCGM_") for name in metric_names(expr)), expr


def test_a_ledger_of_a_dozen_columns_fits_its_panel_as_grafana_lays_it_out(dcgm: dict[str, Any]) -> None:
    # What the demo's ledger shows (a GPU with ECC and remap events, one with heat): five label columns and seven
    # counts. At Grafana's 150 px least width per column they run past a full-width panel; the ledger's own
    # least widths keep them inside, every one still wider than its number.
    from gpudash.preview.pixels import box_of
    from gpudash.preview.table_columns import DEFAULT_MIN_WIDTH, column_widths

    ledger = panels(dcgm)[LEDGER]
    counts = ledger_columns(promql_for(load_settings(ROOT / "thresholds.yaml"), profile=DCGM))[:7]
    header = ["UUID", "cluster", "gpu", "instance", "worst action", *(c.title for c in counts)]
    available = box_of(ledger).w
    widths = column_widths(ledger, header, available)
    assert len(header) * DEFAULT_MIN_WIDTH > available
    assert sum(widths) <= available
    assert min(widths) >= 60
