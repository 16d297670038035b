"""The fleet dashboard's recorded lists and the GPU-seconds recordings, evaluated by promtool as Prometheus
evaluates the rule file: each list holds exactly the GPUs that pass its test, an XID event is noted once
(a job label that changes on the GPU, or an exporter that comes back after a gap, is no new event), and the
GPU-seconds add up to the GPU-hours a job held, the evaluations after it ended not counted.

The rules are rendered for a one-minute interval, the interval promtool evaluates them at.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from test_panel_queries_promtool import labels, xid_inputs
from test_rules_promtool import ROOT, run, tool

from gpudash.catalog import DCGM
from gpudash.config.durations import parse_duration
from gpudash.config.loading import load_settings
from gpudash.promql.alert_states import BUSY_AT_IDLE_POWER
from gpudash.promql.for_settings import promql_for, recording_rules
from gpudash.promql.query import PromQL
from gpudash.promql.recordings import FLEET_LISTS

INTERVAL = parse_duration("1m")
# the lists, the job GPU-seconds and the job counts they read, and the memory ratio the memory-pressure list reads
# and the GPUs busy at near-idle power the spinning lists read (each recorded before them)
WANTED = {rec.record for rec in FLEET_LISTS} | {"cluster_job:gpu_held_seconds:interval",
                                                  "cluster_job:gpu_idle_seconds:interval",
                                                  "cluster_job:gpu_count:count", "cluster_job:gpu_idle:count",
                                                  "cluster_instance_gpu:gpu_fb_used:ratio", BUSY_AT_IDLE_POWER}


def run_case(tmp_path: Path, inputs: list[dict[str, str]], exprs: list[dict[str, Any]]) -> None:
    settings = load_settings(ROOT / "thresholds.yaml")
    rules = [{"record": rec.record, "expr": expr}
             for rec, expr in recording_rules(settings, profile=DCGM, rule_interval=INTERVAL) if rec.record in WANTED]
    assert {r["record"] for r in rules} == WANTED
    (tmp_path / "lists.rules.yml").write_text(yaml.safe_dump(
        {"groups": [{"name": "lists", "interval": str(INTERVAL), "rules": rules}]}, sort_keys=False))
    spec = {"rule_files": ["lists.rules.yml"], "evaluation_interval": str(INTERVAL),
            "tests": [{"interval": str(INTERVAL), "input_series": inputs, "promql_expr_test": exprs}]}
    (tmp_path / "case.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    done = run(tool("promtool"), "test", "rules", str(tmp_path / "case.yaml"), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def fleet() -> PromQL:
    return promql_for(load_settings(ROOT / "thresholds.yaml"), profile=DCGM, rule_interval=INTERVAL)


def test_the_xid_recording_notes_each_new_code_once_with_its_code(tmp_path: Path) -> None:
    in_range = fleet().xid_events("30m", recorded_gauge=True)
    per_step = fleet().xid_events("1m", per_step=True, scan_gauge=False, recorded_gauge=True)
    assert in_range is not None and per_step is not None
    inputs = [
        # GPU 0, the bundled exporter: its counter counts, the gauge's event is not counted twice; GPU 1, a new
        # err_code series; GPU 2, no err_code: two events, code 48 from the gauge's value.
        *xid_inputs(),
        # GPU 3 holds code 31 while its job changes (a new series with another hpc_job): no new event.
        {"series": f"DCGM_FI_DEV_XID_ERRORS{labels(gpu='3', hpc_job='1')}", "values": "0 31 31 31 stale"},
        {"series": f"DCGM_FI_DEV_XID_ERRORS{labels(gpu='3', hpc_job='2')}", "values": "_ _ _ _ 31x6"},
        # GPU 4: its exporter is gone for 7 minutes (longer than the 5-minute lookback) and comes back showing
        # the code it showed before: the same event, not a second one.
        {"series": f"DCGM_FI_DEV_XID_ERRORS{labels(gpu='4')}", "values": "0 94 stale _ _ _ _ _ _ 94 94"},
    ]
    expected = [{"labels": labels(gpu="0", xid="43"), "value": 1},
                {"labels": labels(gpu="1", xid="79"), "value": 1},
                {"labels": labels(gpu="2", xid="48"), "value": 2},
                {"labels": labels(gpu="3", xid="31"), "value": 1},
                {"labels": labels(gpu="4", xid="94"), "value": 1}]
    step = [
        # Per step: the event in the step it happened, once. (The steps end half-way between evaluations: before
        # Prometheus 3, a range includes a sample on its left edge, which Prometheus's own rule evaluations,
        # offset within their interval, do not land on.)
        {"expr": per_step, "eval_time": "4m30s", "exp_samples": [
            {"labels": labels(gpu="1", xid="79"), "value": 1}, {"labels": labels(gpu="2", xid="48"), "value": 1}]},
        {"expr": per_step, "eval_time": "5m30s", "exp_samples": []},
    ]
    run_case(tmp_path, inputs, [{"expr": in_range, "eval_time": "10m", "exp_samples": expected}, *step])


def test_the_lists_hold_only_the_gpus_that_pass_their_test(tmp_path: Path) -> None:
    used, free = "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE"
    clock, max_clock, util = "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MAX_SM_CLOCK", "DCGM_FI_DEV_GPU_UTIL"
    inputs = [
        # Memory: GPU 0 over 90 % and growing 1,500 MiB per 15 minutes; GPU 1 at 97 % and flat; GPU 2 growing at
        # half full.
        {"series": f"{used}{labels(gpu='0')}", "values": "72000+100x20"},
        {"series": f"{free}{labels(gpu='0')}", "values": "8000-100x20"},
        {"series": f"{used}{labels(gpu='1')}", "values": "77600x20"},
        {"series": f"{free}{labels(gpu='1')}", "values": "2400x20"},
        {"series": f"{used}{labels(gpu='2')}", "values": "30000+100x20"},
        {"series": f"{free}{labels(gpu='2')}", "values": "50000-100x20"},
        # GPU 3 stopped reporting at 10m; its memory series is not in the other tests.
        {"series": f"{used}{labels(gpu='3')}", "values": "1000x10 stale"},
        {"series": f"{free}{labels(gpu='3')}", "values": "79000x10 stale"},
        # Clocks: GPU 0 busy at 1,200 of 1,980 MHz (throttled); GPU 1 idle at 210 MHz; GPU 2 busy at full clock.
        {"series": f"{clock}{labels(gpu='0')}", "values": "1200x20"},
        {"series": f"{max_clock}{labels(gpu='0')}", "values": "1980x20"},
        {"series": f"{util}{labels(gpu='0')}", "values": "100x20"},
        {"series": f"{clock}{labels(gpu='1')}", "values": "210x20"},
        {"series": f"{max_clock}{labels(gpu='1')}", "values": "1980x20"},
        {"series": f"{util}{labels(gpu='1')}", "values": "0x20"},
        {"series": f"{clock}{labels(gpu='2')}", "values": "1980x20"},
        {"series": f"{max_clock}{labels(gpu='2')}", "values": "1980x20"},
        {"series": f"{util}{labels(gpu='2')}", "values": "100x20"},
        # Reasons: GPU 2 has the power brake set (one reason), the idle reason on GPU 1 does not count.
        {"series": f"gpudash_clock_event_active{labels(gpu='2', clock_event='hw_power_brake_slowdown')}",
         "values": "1x20"},
        {"series": f"gpudash_clock_event_active{labels(gpu='1', clock_event='gpu_idle')}", "values": "1x20"},
    ]
    # 6,000 MiB free at 20m, growing 6,000 MiB per hour (the last 15 minutes' 1,500, times four): one hour.
    hours_left = 1.0
    cases = [
        {"expr": "cluster_instance_gpu:gpu_fb_hours_to_full:growing", "eval_time": "20m",
         "exp_samples": [{"labels": "cluster_instance_gpu:gpu_fb_hours_to_full:growing" + labels(gpu="0"),
                          "value": hours_left}]},
        {"expr": "cluster_instance_gpu:gpu_sm_clock_to_max:throttled", "eval_time": "20m",
         "exp_samples": [{"labels": "cluster_instance_gpu:gpu_sm_clock_to_max:throttled" + labels(gpu="0"),
                          "value": 1200 / 1980}]},
        {"expr": "cluster_instance_gpu:gpu_throttle_reasons:count", "eval_time": "20m",
         "exp_samples": [{"labels": "cluster_instance_gpu:gpu_throttle_reasons:count" + labels(gpu="2"),
                          "value": 1}]},
        {"expr": "cluster_instance_gpu:gpu_reporting:stopped", "eval_time": "20m",
         "exp_samples": [{"labels": "cluster_instance_gpu:gpu_reporting:stopped" + labels(gpu="3"), "value": 1}]},
        # Before GPU 3 stopped, nobody is silent.
        {"expr": "cluster_instance_gpu:gpu_reporting:stopped", "eval_time": "9m", "exp_samples": []},
    ]
    run_case(tmp_path, inputs, cases)


def test_gpu_seconds_add_up_to_the_gpu_hours_held_until_the_job_ended(tmp_path: Path) -> None:
    util = "DCGM_FI_DEV_GPU_UTIL"
    inputs = [
        # Job 7 holds two GPUs for five evaluations (0-4m), one of them idle; then it ends.
        {"series": f"{util}{labels(gpu='0', hpc_job='7')}", "values": "90x4 stale"},
        {"series": f"{util}{labels(gpu='1', hpc_job='7')}", "values": "0x4 stale"},
    ]
    held = "sum_over_time(cluster_job:gpu_held_seconds:interval[30m]) / 3600"
    idle = "sum_over_time(cluster_job:gpu_idle_seconds:interval[30m]) / 3600"
    job = '{cluster="a",hpc_job="7"}'
    cases = [{"expr": held, "eval_time": "20m", "exp_samples": [{"labels": job, "value": 2 * 5 * 60 / 3600}]},
             {"expr": idle, "eval_time": "20m", "exp_samples": [{"labels": job, "value": 1 * 5 * 60 / 3600}]}]
    run_case(tmp_path, inputs, cases)
