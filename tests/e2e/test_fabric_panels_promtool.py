"""The node and job dashboards' fabric panels, evaluated by promtool on node_exporter's port counters and the
bundled exporter's GPU <-> port map, with the committed recording rules: each port lands on the GPUs it
serves under the GPU exporter's instance, a port two GPUs share counts once for their node, and a straggler
table's GPU without a port keeps its row (the port query has no answer for it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from support.rounded import rounded
from test_rules_promtool import ROOT, run, tool

from gpudash.check.queries import interpolate, load_dashboards
from gpudash.infiniband import NIC_INFO, TRANSMIT_WAIT, TRANSMITTED_BYTES
from gpudash.promql.fabric_recordings import GPU_CONGESTION, GPU_TX
from gpudash.repository import JOB_UID, NODE_UID, RECORDING_FILE

JOB = "7"
GPU_NODE, PORT_NODE = "n1:9400", "n1:9100"  # the GPU exporter's and node_exporter's instance of one host
# GPUs 0 and 1 share mlx5_0 (100 B/s out, waiting in half its slots), GPU 2 has mlx5_1 (50 B/s), GPU 3 none.
PORT_OF = {"0": "mlx5_0", "1": "mlx5_0", "2": "mlx5_1"}


def series(name: str, values: str, **labels: str) -> dict[str, str]:
    text = ",".join(f'{k}="{v}"' for k, v in {"cluster": "c1", **labels}.items())
    return {"series": f"{name}{{{text}}}", "values": values}


def labels(**kv: str) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in {"cluster": "c1", **kv}.items()) + "}"


def gpu(index: str, **extra: str) -> str:
    return labels(instance=GPU_NODE, gpu=index, **extra)


def promtool_case(tmp_path: Path, inputs: list[dict[str, str]], exprs: list[dict[str, Any]],
                  rule_files: list[str]) -> None:
    spec = {"rule_files": rule_files, "evaluation_interval": "15s",
            "tests": [{"interval": "15s", "input_series": inputs, "promql_expr_test": exprs}]}
    (tmp_path / "case.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    done = run(tool("promtool"), "test", "rules", str(tmp_path / "case.yaml"))
    assert done.returncode == 0, done.stdout + done.stderr


def panel_exprs(uid: str, prefix: str, **chosen: str) -> list[str]:
    (dashboard,) = load_dashboards([ROOT / "dashboards" / "json" / f"{uid}.json"])
    (panel,) = [p for p in dashboard[0]["panels"] if p.get("title", "").startswith(prefix)]
    values = {"cluster": ".*", "job": JOB, "instance": ".*", "gpu": ".*", "__range": "10m", **chosen}
    return [interpolate(t["expr"], values) for t in panel["targets"]]


def port_inputs() -> list[dict[str, str]]:
    ports = {"mlx5_0": ("0+1500x40", "0+375x40"), "mlx5_1": ("0+750x40", "0x40")}
    inputs = []
    for device, (sent, waited) in ports.items():
        on_port = {"instance": PORT_NODE, "job": "node", "device": device, "port": "1"}
        inputs += [series(TRANSMITTED_BYTES, sent, **on_port), series(TRANSMIT_WAIT, waited, **on_port)]
    for index in ("0", "1", "2", "3"):
        inputs.append(series("DCGM_FI_DEV_GPU_UTIL", "95x40", instance=GPU_NODE, job="gpu", gpu=index,
                             hpc_job=JOB))
    for index, device in PORT_OF.items():
        inputs.append(series(NIC_INFO, "1x40", instance=GPU_NODE, job="gpu", gpu=index, UUID=f"GPU-{index}",
                             device=device, port="1", pcie="PIX"))
    return inputs


def test_each_port_lands_on_its_gpus_and_counts_once_for_their_node(tmp_path: Path) -> None:
    (node_tx,) = panel_exprs(NODE_UID, "Network transmit per GPU", instance=GPU_NODE)
    (job_tx,) = panel_exprs(JOB_UID, "Network transmit: the job's")
    (job_congestion,) = panel_exprs(JOB_UID, "Port congestion: the job's")
    cases = [
        {"expr": GPU_TX, "eval_time": "9m", "exp_samples": [
            {"labels": GPU_TX + gpu(i, device=d, port="1"), "value": 100 if d == "mlx5_0" else 50}
            for i, d in PORT_OF.items()]},
        # the node panel: the same three, ordered by GPU index; GPU 3 has no port
        {"expr": node_tx, "eval_time": "9m", "exp_samples": [
            {"labels": gpu(f"0{i}", device=d, port="1"), "value": 100 if d == "mlx5_0" else 50}
            for i, d in PORT_OF.items()]},
        # the job's node: mlx5_0 once though two of its GPUs sit on it
        {"expr": job_tx, "eval_time": "9m", "exp_samples": [{"labels": labels(instance=GPU_NODE), "value": 150}]},
        # words sent 25/s, waits 25/s: half its slots
        {"expr": job_congestion, "eval_time": "9m", "exp_samples": [{"labels": labels(instance=GPU_NODE),
                                                                       "value": 0.5}]},
    ]
    promtool_case(tmp_path, port_inputs(), [rounded(c) for c in cases], [str(ROOT / "generated" / RECORDING_FILE)])


def test_a_straggler_rows_port_congestion_sits_on_its_row_and_a_gpu_without_a_port_keeps_its_row(
        tmp_path: Path) -> None:
    rows, ports = panel_exprs(JOB_UID, "Activity furthest from the job's median")
    departure = "cluster_instance_gpu_job:gpu_activity_departure:points"
    points = {"0": "12", "1": "-3", "2": "8"}
    inputs = [series(departure, f"{p}x8", instance=GPU_NODE, gpu=i, hpc_job=JOB) for i, p in points.items()]
    # GPU 2 has no port; GPU 3's port is the most congested, but GPU 3 is no row of the table
    congestion = {"0": ("mlx5_0", "0.5"), "1": ("mlx5_1", "0.05"), "3": ("mlx5_3", "0.9")}
    inputs += [series(GPU_CONGESTION, f"{v}x8", instance=GPU_NODE, gpu=i, device=d, port="1")
               for i, (d, v) in congestion.items()]
    cases = [
        {"expr": rows, "eval_time": "1m", "exp_samples": [
            {"labels": departure + gpu(i, hpc_job=JOB), "value": float(p)} for i, p in points.items()]},
        # the table's labels exactly, no device or port: the merge joins each value to its row
        {"expr": ports, "eval_time": "1m", "exp_samples": [
            {"labels": gpu("0", hpc_job=JOB), "value": 0.5}, {"labels": gpu("1", hpc_job=JOB), "value": 0.05}]},
    ]
    promtool_case(tmp_path, inputs, cases, [])
