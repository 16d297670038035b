"""The fleet dashboard's first row, its queries as Grafana sends them, evaluated by promtool.

The action counts read firing alerts by their `action` label, whatever the alert is called: a pending alert,
an alert whose action is `none` and an alert with no action label count nowhere; a GPU with several alerts
asking for one action counts once; an alert on a whole node counts once per node, one on a whole job once
per job. Reporting / expected: per cluster, the larger of the GPUs its nodes say they expect and the most
that reported at once within the lookback, so a GPU lost for longer than the lookback stays missing where its
exporter still publishes the expectation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from test_rules_promtool import ROOT, run, tool

from gpudash.check.queries import interpolate
from gpudash.config.loading import load_settings
from gpudash.health.xid import ACTIONS
from gpudash.panels.build import build_all


def first_row_queries(cluster: str) -> dict[str, list[str]]:
    """Each stat of the fleet's first row: its queries, with $cluster as Grafana would send it."""
    fleet = build_all(load_settings(ROOT / "thresholds.yaml"), ROOT / "dashboards")["gpudash-fleet.json"]
    rows = [i for i, p in enumerate(fleet["panels"]) if p["type"] == "row"]
    panels = fleet["panels"][1:rows[1]]
    return {(p["targets"][0]["legendFormat"] if "ALERTS{" in p["targets"][0]["expr"] else p["title"]):
            [interpolate(t["expr"], {"cluster": cluster}) for t in p["targets"]]
            for p in panels if p["type"] == "stat"}


def promtool_case(tmp_path: Path, interval: str, inputs: list[dict[str, str]], exprs: list[dict[str, Any]]) -> None:
    spec = {"rule_files": [], "evaluation_interval": "1m",
            "tests": [{"interval": interval, "input_series": inputs, "promql_expr_test": exprs}]}
    (tmp_path / "case.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    done = run(tool("promtool"), "test", "rules", str(tmp_path / "case.yaml"))
    assert done.returncode == 0, done.stdout + done.stderr


def alert(name: str, state: str, **labels: str) -> dict[str, str]:
    text = ",".join(f'{k}="{v}"' for k, v in {"alertname": name, "alertstate": state, **labels}.items())
    return {"series": f"ALERTS{{{text}}}", "values": "1x10"}


GPU = {"cluster": "a", "instance": "n1:9400"}
ALERT_SERIES = [
    # One GPU, two alerts asking for a reset and one for a drain: one GPU to reset, one to drain.
    alert("GPUXidError", "firing", action="reset_gpu", severity="critical", xid="79", gpu="0", **GPU),
    alert("GPUEccUncorrectable", "firing", action="reset_gpu", severity="critical", gpu="0", **GPU),
    alert("GPUHighTemperature", "firing", action="drain", severity="critical", gpu="0", **GPU),
    # Another GPU with two links in error: one GPU to drain.
    alert("GPUNVLinkErrors", "firing", action="drain", severity="critical", gpu="1", link="0", **GPU),
    alert("GPUNVLinkErrors", "firing", action="drain", severity="critical", gpu="1", link="1", **GPU),
    # An alert no rule file of today has, in another cluster: counted by its action.
    alert("GPUSomethingNew", "firing", action="drain", severity="critical", cluster="b", instance="n3:9400", gpu="0"),
    # Pending is not firing; none asks for nothing; an alert without an action is not a GPU's.
    alert("GPURowRemapFailure", "pending", action="rma", severity="critical", gpu="2", **GPU),
    alert("GPUThermalThrottling", "firing", action="none", severity="warning", gpu="3", **GPU),
    alert("Watchdog", "firing", severity="none"),
    # A whole node: once.
    alert("GPUFellOffBus", "firing", action="reboot_node", severity="critical", cluster="a", instance="n2:9400"),
    # Two whole jobs, and one GPU of a third job.
    alert("GPUJobHung", "firing", action="restart_job", severity="warning", cluster="a", hpc_job="42"),
    alert("GPUJobHung", "firing", action="restart_job", severity="warning", cluster="a", hpc_job="43"),
    alert("GPUJobStalled", "firing", action="restart_job", severity="warning", hpc_job="44", gpu="4", **GPU),
    # An action a newer rule file may bring: no count of its own, but counted as needing one.
    alert("GPUCordonMe", "firing", action="cordon", severity="warning", gpu="5", **GPU),
]


@pytest.mark.parametrize(("cluster", "expected"), [
    (".*", {"rma": None, "drain": 3, "reboot_node": 1, "reset_gpu": 1, "restart_job": 3, "any": 8}),
    ("a", {"rma": None, "drain": 2, "reboot_node": 1, "reset_gpu": 1, "restart_job": 3, "any": 7}),
    ("b", {"rma": None, "drain": 1, "reboot_node": None, "reset_gpu": None, "restart_job": None, "any": 1}),
], ids=["all-clusters", "cluster-a", "cluster-b"])
def test_action_counts_count_firing_alerts_per_action_once_per_target(
        tmp_path: Path, cluster: str, expected: dict[str, int | None]) -> None:
    queries = first_row_queries(cluster)
    counts = [a for a in ACTIONS if a != "none"] + ["any"]
    assert set(expected) <= set(counts) <= set(queries)
    # An action added to the table since has no alert here: nothing to count.
    cases = [{"expr": queries[action][0], "eval_time": "5m",
              "exp_samples": [] if expected.get(action) is None else [{"labels": "{}", "value": expected[action]}]}
             for action in counts]
    promtool_case(tmp_path, "1m", ALERT_SERIES, cases)


def expected_inputs() -> list[dict[str, str]]:
    """Five clusters over 40 hours, one sample an hour."""
    def published(cluster: str, node: str, gpus: int) -> dict[str, str]:
        return {"series": f'gpudash_node_gpus_expected{{cluster="{cluster}",instance="{node}",job="gpu-exporter"}}',
                "values": f"{gpus}x40"}

    def reporting(cluster: str, values: str) -> dict[str, str]:
        return {"series": f'cluster:gpu_count:count{{cluster="{cluster}"}}', "values": values}

    return [
        # a: two nodes of 8 published; one GPU went silent at 6 h and stays missing, however long ago.
        published("a", "n1:9400", 8), published("a", "n2:9400", 8), reporting("a", "16x5 15x35"),
        # b: nothing published: 8 seen, then 6 from 6 h; after a day at 6 the two are no longer expected.
        reporting("b", "8x5 6x35"),
        # c: its exporter runs and publishes 8, but no GPU reports utilization (the driver lost them all):
        # all 8 missing, however long ago they went.
        published("c", "n5:9400", 8),
        # d: one node publishes 8, another (no bundled exporter) adds 8 more: 16 expected, none missing.
        published("d", "n6:9400", 8), reporting("d", "16x40"),
        # e: its one exporter went down at 5 h, its expectation with it: missing while within the lookback.
        {**published("e", "n7:9400", 8), "values": "8x5"}, reporting("e", "8x5"),
    ]


def test_reporting_expected_and_missing_per_cluster(tmp_path: Path) -> None:
    queries = first_row_queries(".*")
    (reporting, expected), (missing,) = queries["Reporting / expected"], queries["GPUs missing"]

    def at(hours: int, expr: str, value: int) -> dict[str, Any]:
        return {"expr": expr, "eval_time": f"{hours}h", "exp_samples": [{"labels": "{}", "value": value}]}

    promtool_case(tmp_path, "1h", expected_inputs(), [
        at(10, reporting, 15 + 6 + 16), at(10, expected, 16 + 8 + 8 + 16 + 8), at(10, missing, 1 + 2 + 8 + 0 + 8),
        # A day and more later: the GPUs of b and e silent since have left the lookback; a's and c's published
        # expectations keep theirs.
        at(40, reporting, 15 + 6 + 16), at(40, expected, 16 + 6 + 8 + 16), at(40, missing, 1 + 0 + 8 + 0),
    ])
