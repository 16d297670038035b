"""What the reviewed panels' queries return, evaluated by promtool on series shaped like each exporter's.

The XID table counts events, not changes: a code that comes and goes back to 0 is one event, a new err_code
series (dcgm-exporter) is one event though it never changes, and the bundled exporter's counter counts its
own rise. The utilization bands are ten rows over all clusters, the empty ones 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from test_rules_promtool import ROOT, run, tool

from gpudash.catalog import DCGM
from gpudash.config.loading import load_settings
from gpudash.promql.for_settings import promql_for
from gpudash.promql.query import BANDS, PromQL

NODE = {"cluster": "a", "instance": "n1:9400"}


def labels(**extra: str) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in {**NODE, **extra}.items()) + "}"


def promtool_case(tmp_path: Path, inputs: list[dict[str, str]], exprs: list[dict[str, Any]],
                  rule_files: tuple[Path, ...] = (), evaluation_interval: str = "1m") -> None:
    """promtool evaluates every rule group of `rule_files` at `evaluation_interval`, whatever its own interval."""
    spec = {"rule_files": [str(p) for p in rule_files], "evaluation_interval": evaluation_interval,
            "tests": [{"interval": "1m", "input_series": inputs, "promql_expr_test": exprs}]}
    (tmp_path / "case.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    done = run(tool("promtool"), "test", "rules", str(tmp_path / "case.yaml"))
    assert done.returncode == 0, done.stdout + done.stderr


def promql(recorded: bool = True) -> PromQL:
    return promql_for(load_settings(ROOT / "thresholds.yaml"), recorded=recorded, profile=DCGM)


def xid_inputs() -> list[dict[str, str]]:
    """Three GPUs' XIDs as each exporter publishes them, over ten minutes at one sample a minute."""
    return [
        # Bundled exporter, GPU 0: the gauge shows 43 for a while and returns to 0; its counter appears at 1.
        {"series": f"DCGM_FI_DEV_XID_ERRORS{labels(gpu='0')}", "values": "0 0 43 43 43 0 0 0 0 0 0"},
        {"series": f"gpudash_xid_errors_total{labels(gpu='0', xid='43')}", "values": "_ _ 1 1 1 1 1 1 1 1 1"},
        # dcgm-exporter with err_code, GPU 1: a constant err_code="0" series, then a new err_code="79" one.
        {"series": f"DCGM_FI_DEV_XID_ERRORS{labels(gpu='1', err_code='0')}", "values": "0x10"},
        {"series": f"DCGM_FI_DEV_XID_ERRORS{labels(gpu='1', err_code='79')}", "values": "_ _ _ _ 79x6"},
        # dcgm-exporter without err_code, GPU 2: 48, back to 0, 48 again, back to 0: two events, not four.
        {"series": f"DCGM_FI_DEV_XID_ERRORS{labels(gpu='2')}", "values": "0 48 0 0 48 48 0 0 0 0 0"},
    ]


def test_xid_events_over_a_range_count_events_with_their_code(tmp_path: Path) -> None:
    q = promql()
    in_range = q.xid_events("30m")
    assert in_range is not None
    inputs = [
        *xid_inputs(),
        # GPU 3: no XID at all, its counter published at 0 from its start within the window.
        {"series": f"DCGM_FI_DEV_XID_ERRORS{labels(gpu='3')}", "values": "0x10"},
        {"series": f"gpudash_xid_errors_total{labels(gpu='3', xid='13')}", "values": "0x10"},
    ]
    expected = [{"labels": labels(gpu="0", xid="43"), "value": 1},
                {"labels": labels(gpu="1", xid="79"), "value": 1},
                {"labels": labels(gpu="2"), "value": 2}]
    promtool_case(tmp_path, inputs, [{"expr": in_range, "eval_time": "10m", "exp_samples": expected}])


def test_xid_events_per_step_mark_the_step_of_each_event_only(tmp_path: Path) -> None:
    per_step = promql().xid_events("1m", per_step=True)
    assert per_step is not None
    inputs = [{"series": f"DCGM_FI_DEV_XID_ERRORS{labels(gpu='2')}", "values": "0 48 48 0 0"},
              {"series": f"gpudash_xid_errors_total{labels(gpu='0', xid='13')}", "values": "1 1 3 3 3"}]
    cases = [
        {"expr": per_step, "eval_time": "1m", "exp_samples": [{"labels": labels(gpu="2"), "value": 1}]},
        # The counter rose by two in this step; the gauge held its code (no new event).
        {"expr": per_step, "eval_time": "2m", "exp_samples": [{"labels": labels(gpu="0", xid="13"), "value": 2}]},
        # The gauge's return to 0 is no event.
        {"expr": per_step, "eval_time": "3m", "exp_samples": []},
    ]
    promtool_case(tmp_path, inputs, cases)


def test_utilization_bands_are_ten_rows_over_every_cluster(tmp_path: Path) -> None:
    bands = promql(recorded=False).utilization_bands()
    inputs = [
        {"series": 'DCGM_FI_DEV_GPU_UTIL{cluster="a",instance="n1:9400",gpu="0"}', "values": "95x3"},
        {"series": 'DCGM_FI_DEV_GPU_UTIL{cluster="a",instance="n1:9400",gpu="1"}', "values": "97x3"},
        {"series": 'DCGM_FI_DEV_GPU_UTIL{cluster="a",instance="n1:9400",gpu="2"}', "values": "15x3"},
        {"series": 'DCGM_FI_DEV_GPU_UTIL{cluster="b",instance="n2:9400",gpu="0"}', "values": "100x3"},
    ]
    counts = {"90": 3, "10": 1}
    expected = [{"labels": f'{{band="{band}"}}', "value": counts.get(band, 0)} for band in BANDS]
    promtool_case(tmp_path, inputs, [{"expr": bands, "eval_time": "2m", "exp_samples": expected}])


def test_health_ledger_counts_first_events_hourly_events_and_no_moved_history(tmp_path: Path) -> None:
    from gpudash.panels.health_ledger import ledger_columns

    columns = {c.title: c.expr.replace("$ledger", "2h") for c in ledger_columns(promql())}
    inputs = [
        # The bundled exporter creates a code's counter at its first event (at 1), 20 minutes before the hour.
        {"series": f"gpudash_xid_errors_total{labels(gpu='0', UUID='GPU-A', xid='79')}", "values": "_x159 1x30"},
        # Two DBEs 15 minutes before the hour.
        {"series": f"DCGM_FI_DEV_ECC_DBE_AGG_TOTAL{labels(gpu='0', UUID='GPU-A')}", "values": "2x164 4x25"},
        # A GPU that arrived on this node 80 minutes before the hour with 3 DBEs of its past: none are new.
        {"series": f"DCGM_FI_DEV_ECC_DBE_AGG_TOTAL{labels(gpu='1', UUID='GPU-B')}", "values": "_x99 3x90"},
    ]
    recording = (ROOT / "generated" / "prometheus" / "gpu-recording.rules.yml",)
    # The ledger's recordings are evaluated every hour (their group's interval), here on the hour.
    promtool_case(tmp_path, inputs, [
        # Within the hour nothing shows yet: the ledger's points are hourly.
        {"expr": columns["DBE aggregate"], "eval_time": "170m", "exp_samples": []},
        # From the hourly evaluation on, the hour's events count; the moved GPU's past does not.
        {"expr": columns["XIDs for reboot_node"], "eval_time": "181m",
         "exp_samples": [{"labels": '{UUID="GPU-A"}', "value": 1}]},
        {"expr": columns["DBE aggregate"], "eval_time": "181m",
         "exp_samples": [{"labels": '{UUID="GPU-A"}', "value": 2}]},
    ], recording, evaluation_interval="1h")


def test_fleet_alert_annotation_marks_each_gpudash_alert_once_per_cluster(tmp_path: Path) -> None:
    import json

    fleet = json.loads((ROOT / "dashboards" / "json" / "gpudash-fleet.json").read_text())
    (firing,) = [a for a in fleet["annotations"]["list"] if a.get("name") == "Firing alerts"]
    expr = firing["target"]["expr"].replace("$cluster", ".*")

    def alert(name: str, severity: str, gpu: str, cluster: str = "a") -> dict[str, str]:
        return {"series": f'ALERTS{{alertname="{name}",alertstate="firing",severity="{severity}",cluster="{cluster}",'
                          f'instance="n1:9400",gpu="{gpu}"}}', "values": "1x3"}

    inputs = [
        *(alert("GPUThermalThrottling", "warning", str(gpu)) for gpu in range(8)),  # one alert on eight GPUs
        alert("GPUThermalThrottling", "warning", "0", cluster="b"),
        alert("NodeFilesystemAlmostOutOfSpace", "warning", "0"),  # another exporter's alert
        alert("GPUAllocatedIdle", "info", "1"),  # gpudash's, but only for the digest
    ]
    expected = [{"labels": '{alertname="GPUThermalThrottling",cluster="a",severity="warning"}', "value": 8},
                {"labels": '{alertname="GPUThermalThrottling",cluster="b",severity="warning"}', "value": 1}]
    promtool_case(tmp_path, inputs, [{"expr": expr, "eval_time": "2m", "exp_samples": expected}])
