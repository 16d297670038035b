"""What a rule reads bounds what it costs Prometheus at every evaluation: each series at most a few times,
however many XID codes a group holds."""

from __future__ import annotations

import math
import re
from collections import Counter

import pytest
import yaml

from gpudash.config.loading import Settings
from gpudash.infiniband import NIC_INFO
from gpudash.promql.fabric_recordings import GPU_PORTS, JOB_GPUS
from gpudash.promql.for_settings import promql_for
from gpudash.promql.inline import reads_recorded
from gpudash.promql.query import Scope, any_bit_set
from gpudash.promql.scanner import metric_names
from gpudash.repository import ALERTS_FILE, RECORDING_FILE
from gpudash.rules.generated_files import render_all

MOST_READS = 4  # e.g. a memory-growth test: the ratio now and in each of three thirds of the window


def reads(expr: str) -> Counter[str]:
    """How many times an expression selects each set of series: a metric name with its matchers (the same name
    under other matchers selects other series: a link's replay counter is not its CRC counter)."""
    found: Counter[str] = Counter()
    for name in metric_names(expr):
        for matchers in re.findall(rf"(?<![\w:]){re.escape(name)}(?![\w:(])(\{{[^}}]*\}})?", expr):
            found[name + matchers] += 1
    return found


def every_rule(settings: Settings) -> list[tuple[str, str]]:
    files = render_all(settings)
    return [(rule.get("alert") or rule["record"], rule["expr"]) for path in (RECORDING_FILE, ALERTS_FILE)
            for group in yaml.safe_load(files[path])["groups"] for rule in group["rules"]]


def test_reads_counts_each_selector_of_a_name() -> None:
    expr = "x > 0 and (changes(x[10m]) > 0 or (x unless x offset 10m)) or x_total{a='b'} or rate(x_total[5m])"
    assert reads(expr) == {"x": 4, "x_total{a='b'}": 1, "x_total": 1}


def test_no_rule_reads_one_series_more_than_a_few_times(settings: Settings) -> None:
    over = {name: {m: n for m, n in reads(expr).items() if n > MOST_READS} for name, expr in every_rule(settings)}
    assert {name: counts for name, counts in over.items() if counts} == {}


def test_an_xid_rule_reads_the_gauge_as_often_whatever_its_group_holds(settings: Settings) -> None:
    xid = [expr for name, expr in every_rule(settings) if name == "GPUXidError"]
    counts = {reads(expr)["DCGM_FI_DEV_XID_ERRORS"] for expr in xid}
    # every group reads the gauge's value now, once; a group of new events adds the recorded events (sparse)
    assert len(xid) > 2 and counts == {1}
    new_events = [expr for expr in xid if "cluster_instance_gpu_xid:gpu_xid_errors:new" in expr]
    assert new_events and all("changes(" not in expr for expr in xid)


@pytest.mark.parametrize("bits", [[32, 64, 128, 8], [8], [8, 16], [1, 8], [2, 8, 32], [4, 16, 32]])
def test_any_bit_set_is_true_exactly_where_a_bit_is_set(bits: list[int]) -> None:
    test = any_bit_set("x", bits)
    as_python = test.replace("!= bool", "!=").replace("> bool", ">").replace("floor(", "math.floor(")
    for x in range(1024):
        assert bool(eval(as_python, {"math": math, "x": x})) == any(x & b for b in bits), (x, test)


def test_the_throttle_reasons_mask_is_read_once_per_evaluation_and_each_clock_once(settings: Settings) -> None:
    rules = dict(every_rule(settings))
    throttling, reasons = rules["GPUThermalThrottling"], rules["cluster_instance_gpu:gpu_thermal_reason:set"]
    assert reads(reasons)["DCGM_FI_DEV_CLOCKS_EVENT_REASONS"] == 1  # instant: a subquery would test every step
    assert "DCGM_FI_DEV_CLOCKS_EVENT_REASONS" not in throttling and "gpu_thermal_reason:set[2m]" in throttling
    assert reads(throttling) == {"DCGM_FI_DEV_SM_CLOCK": 2, "DCGM_FI_DEV_MAX_SM_CLOCK": 1, "DCGM_FI_DEV_GPU_TEMP": 1,
                                 "cluster_instance_gpu:gpu_thermal_reason:set": 1}


def test_no_rule_computes_the_memory_ratio_again(settings: Settings) -> None:
    """Every rule that needs used / (used + free) of each GPU reads the recording of it."""
    files = render_all(settings)
    ratio = "cluster_instance_gpu:gpu_fb_used:ratio"
    body = next(rule["expr"] for group in yaml.safe_load(files[RECORDING_FILE])["groups"]
                for rule in group["rules"] if rule.get("record") == ratio)
    again = [name for name, expr in every_rule(settings) if name != ratio and body in expr]
    readers = [name for name, expr in every_rule(settings) if ratio in expr]
    assert again == [] and "cluster_instance_gpu:gpu_fb_hours_to_full:growing" in readers


def test_the_fabric_finds_each_gpus_host_ports_and_job_once_per_evaluation(settings: Settings) -> None:
    rules = dict(every_rule(settings))
    per_gpu = [n for n in rules if n.startswith(("cluster_instance_gpu:infiniband_", "cluster_job:infiniband_"))
               and n != GPU_PORTS]
    assert len(per_gpu) == 8
    for name in per_gpu:  # recorded series only: no GPU's raw series, read again by every one of them
        assert all(":" in read for read in metric_names(rules[name])), (name, rules[name])
    # the maps they join through read the raw series, once each
    assert reads(rules[GPU_PORTS]) == {NIC_INFO: 1}
    assert sum(reads(rules[JOB_GPUS]).values()) == 2 and GPU_PORTS in reads(rules[JOB_GPUS])


def test_the_nvlink_counters_are_read_for_the_critical_conditions_once_by_their_recordings(settings: Settings) -> None:
    """The critical rules and the warning's exclusion read the recorded links; only the warning's own rise
    reads the counters: each twice (now and a window ago), the per-link series once more (the totals give way)."""
    rules = every_rule(settings)
    alerts = [expr for name, expr in rules if name == "GPUNVLinkErrors"]
    counters = [{m: n for m, n in reads(expr).items() if "nvlink_errors" in m or "NVLINK" in m} for expr in alerts]
    critical = [c for c, expr in zip(counters, alerts, strict=True) if " offset " not in expr]
    wear = next(c for c, expr in zip(counters, alerts, strict=True) if " offset " in expr)
    assert len(critical) == 2 and critical == [{}, {}]
    assert wear == {'gpudash_nvlink_errors_total{error=~"crc_flit|crc_data"}': 2,
                    'gpudash_nvlink_errors_total{error=~"replay"}': 2, "gpudash_nvlink_errors_total": 1,
                    **{f"DCGM_FI_DEV_NVLINK_{kind}_ERROR_COUNT_TOTAL": 2
                       for kind in ("CRC_FLIT", "CRC_DATA", "REPLAY")}}


def test_the_spinning_recordings_read_utilization_and_power_once_between_them(settings: Settings) -> None:
    """Busy at near-idle power is recorded once; the profiled and unprofiled recordings complete it."""
    rules = every_rule(settings)
    names = [name for name, _ in rules]
    shared = "cluster_instance_gpu:gpu_utilization:busy_at_idle_power"
    dense = {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_ENFORCED_POWER_LIMIT"}
    for kind in ("profiled", "unprofiled"):
        spinning = f"cluster_instance_gpu:gpu_spinning:{kind}"
        read = reads(dict(rules)[spinning])
        assert read[shared] == 1 and not dense & set(read), read
        assert names.index(shared) < names.index(spinning)
    assert reads(dict(rules)[shared])["DCGM_FI_DEV_GPU_UTIL"] == 1


def test_the_clock_event_mask_is_cut_to_the_gpus_that_can_hold_a_thermal_bit_before_its_bits_are_computed(
        settings: Settings) -> None:
    expr = dict(every_rule(settings))["cluster_instance_gpu:gpu_thermal_reason:set"]
    (arithmetic,) = re.findall(r"floor\(\((DCGM_FI_DEV_CLOCKS_EVENT_REASONS >= (\d+))\) / (\d+)\)", expr)
    assert arithmetic[1] == arithmetic[2]  # the lowest wanted bit: a mask under it holds none of the wanted bits


def test_a_jobs_gpu_seconds_read_the_job_counts_recorded_before_them(settings: Settings) -> None:
    rules = dict(every_rule(settings))
    for name, reads_ in (("cluster_job:gpu_held_seconds:interval", "cluster_job:gpu_count:count"),
                         ("cluster_job:gpu_held:timestamp", "cluster_job:gpu_count:count"),
                         ("cluster_job:gpu_idle_seconds:interval", "cluster_job:gpu_idle:count")):
        assert set(metric_names(rules[name])) == {reads_}, (name, rules[name])
        assert list(rules).index(reads_) < list(rules).index(name)


def test_the_memory_alerts_read_the_growth_recorded_once(settings: Settings) -> None:
    """The three thirds of the growth window are read once per evaluation, by the recording, not by each alert."""
    ratio, growing = "cluster_instance_gpu:gpu_fb_used:ratio", "cluster_instance_gpu:gpu_fb_used:growing"
    rules = every_rule(settings)
    memory = [expr for name, expr in rules if name in ("GPUMemoryPressure", "GPUMemoryLeakPredicted")]
    assert len(memory) == 3
    for expr in memory:
        assert f"min_over_time({ratio}" not in expr and reads(expr)[growing] == 1, expr
    assert reads(dict(rules)[growing])[ratio] == 3
    assert [name for name, _ in rules].index(growing) > [name for name, _ in rules].index(ratio)


@pytest.mark.parametrize(("name", "per_node", "how", "key"),
                         [("cluster:gpu_count:count", "cluster_instance:gpu_count:count", "count", "gpu_util"),
                          ("cluster:gpu_power_watts:sum", "cluster_instance:gpu_power_watts:sum", "sum", "power")])
def test_a_clusters_gpu_count_and_power_add_up_its_nodes_recorded_before_them(
        settings: Settings, name: str, per_node: str, how: str, key: str) -> None:
    rules = dict(every_rule(settings))
    assert rules[name] == f"sum by (cluster) ({per_node})"
    assert list(rules).index(per_node) < list(rules).index(name)
    # exact: the node's is each GPU's series once, unfiltered, counted or summed per node; a sum of those per
    # cluster is the same count or sum per cluster
    assert rules[per_node] == f"{how} by (cluster, instance) ({promql_for(settings).gpu_once(key)})"


def test_without_recording_rules_a_dashboard_reads_the_nodes_expression_not_their_recorded_series(
        settings: Settings) -> None:
    scope = Scope((("cluster", "=~", "$cluster"),))
    raw = promql_for(settings, scope, recorded=False).use("cluster:gpu_count:count")
    assert raw.startswith("sum by (cluster) (count by (cluster, instance) (max by (cluster, instance, gpu) (")
    assert ":" not in "".join(metric_names(raw)) and '{cluster=~"$cluster"}' in raw
    assert promql_for(settings, scope).use("cluster:gpu_count:count") == 'cluster:gpu_count:count{cluster=~"$cluster"}'


def test_a_recording_reads_only_recordings_its_group_evaluates_before_it(settings: Settings) -> None:
    """What a live Prometheus gives: within one evaluation of a group, a rule sees what the rules before it wrote."""
    later = []
    for group in yaml.safe_load(render_all(settings)[RECORDING_FILE])["groups"]:
        written: set[str] = set()
        every = {rule["record"]: rule["expr"] for rule in group["rules"]}
        for rule in group["rules"]:
            later += [(rule["record"], read) for read in reads_recorded(rule["expr"], every) if read not in written]
            written.add(rule["record"])
    assert later == []
