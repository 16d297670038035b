"""What the alert and recording rules say: every alert with its labels and annotations, runbook links, the
recording rules the alerts use, thresholds and site settings moving the expressions, the nvidia_smi profile."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from support.paths import ROOT
from support.rule_files import alerts_named, rules_of, site_file

from gpudash.catalog import SIGNALS
from gpudash.config.loading import Settings, load_settings
from gpudash.health.xid import ACTIONS
from gpudash.promql.recordings import RECORDINGS
from gpudash.repository import ALERTS_FILE, RECORDING_FILE
from gpudash.rules.alert_table import alert_names
from gpudash.rules.alerts import alert_rules
from gpudash.rules.fabric_alerts import FABRIC_ALERTS
from gpudash.rules.generated_files import render_all
from gpudash.rules.health_alerts import HEALTH_ALERTS
from gpudash.rules.recording import GROUP_NAMES

JOB_ALERTS = ("GPUJobStraggler", "GPUAllocatedIdle", "GPUJobHung", "GPUFabricStragglerCongestion")
# Alerts about one GPU that name the job on it too: what to restart, whose memory it is.
NAMING_THE_JOB = ("GPUMemoryPressure", "GPUMemoryLeakPredicted", "GPUJobStalled")
LEVELS = ("critical", "warning", "info")


def test_every_alert_is_there_with_severity_labels_and_annotations(settings: Settings) -> None:
    files = render_all(settings)
    rules = rules_of(files)
    assert {r["alert"] for r in rules} == set(alert_names())
    for rule in rules:
        per_job = rule["alert"] in JOB_ALERTS + NAMING_THE_JOB
        severity, action = rule["labels"]["severity"], rule["labels"]["action"]
        assert severity in LEVELS and action in ACTIONS, rule["alert"]
        # info never pages: an idle job, or an XID whose table action is none
        assert (severity == "info") == (rule["alert"] == "GPUAllocatedIdle" or
                                        (rule["alert"] == "GPUXidError" and action == "none")), rule["alert"]
        notes = rule["annotations"]
        assert set(notes) == {"summary", "description", "runbook"}  # no runbook_base_url: the repository's section
        assert notes["runbook"] == "docs/alerts.md#" + rule["alert"].lower()
        text = notes["summary"] + notes["description"]
        assert ("$labels.instance" in text) != (rule["alert"] in ("GPUAllocatedIdle", "GPUJobHung")), rule["alert"]
        assert ("$labels.hpc_job" in text) == per_job, rule["alert"]
        shown = "$value" in notes["description"] or "$labels.xid" in notes["description"]
        flags = ("GPUExporterDown", "GPURowRemapPending", "GPURowRemapFailure")  # the value is only 0/1
        assert shown or rule["alert"] in flags, f"{rule['alert']}: description shows no value"
        # one GPU's labels (one job's for a job alert), whatever else the exporter attaches (UUID, modelName, pod ...)
        outer = {"GPUJobStraggler": "max by (cluster, instance, gpu, hpc_job) (",
                 "GPUAllocatedIdle": "count by (cluster, hpc_job) (",
                 "GPUJobHung": "max by (cluster, hpc_job, namespace, pod) ("}.get(rule["alert"])
        assert rule["expr"].startswith(outer) if outer else "by (cluster, instance" in rule["expr"], rule["alert"]
    severities = {(r["alert"], r["labels"]["severity"]) for r in rules}
    for alert in ("GPUHighTemperature", "GPUXidError"):
        assert {(alert, "warning"), (alert, "critical")} <= severities


def test_memory_pressure_goes_to_the_jobs_owner_never_paging_and_names_the_job(settings: Settings) -> None:
    rules = alerts_named(render_all(settings), "GPUMemoryPressure")
    assert [r["labels"] for r in rules] == [
        {"severity": "warning", "action": "none", "audience": "job_owner", "level": level}
        for level in ("warning", "critical")]
    for rule in rules:
        assert rule["expr"].startswith("max by (cluster, instance, gpu, hpc_job, namespace, pod) (")
        assert "$labels.hpc_job" in rule["annotations"]["summary"]


def test_every_restart_job_page_of_the_job_alerts_names_the_job(settings: Settings) -> None:
    rules = [r for r in rules_of(render_all(settings))
             if r["alert"] in JOB_ALERTS + NAMING_THE_JOB and r["labels"]["action"] == "restart_job"]
    assert {r["alert"] for r in rules} == {"GPUMemoryLeakPredicted", "GPUJobStalled", "GPUJobHung"}
    for rule in rules:
        assert "hpc_job, namespace, pod) (" in rule["expr"], rule["alert"]
        assert "$labels.hpc_job" in rule["annotations"]["summary"] + rule["annotations"]["description"]


def _recorded(files: dict[str, str], record: str) -> str:
    for group in yaml.safe_load(files[RECORDING_FILE])["groups"]:
        for rule in group["rules"]:
            if rule["record"] == record:
                return str(rule["expr"])
    raise AssertionError(f"no recording {record}")


def test_hung_job_is_judged_per_job_with_profiling_or_on_power_alone(settings: Settings) -> None:
    files = render_all(settings)
    profiled, unprofiled = alerts_named(files, "GPUJobHung")
    for rule, judged_on, kind in ((profiled, "tensor_dram_power", "profiled"), (unprofiled, "power", "unprofiled")):
        assert rule["for"] == "5m" and rule["keep_firing_for"] == "5m"
        assert rule["labels"] == {"severity": "warning", "action": "restart_job", "judged_on": judged_on}
        # one alert per job: the GPUs' test is counted per job against the job's size
        assert "count by (cluster, hpc_job) (" in rule["expr"] and ">= 0.5\n" in rule["expr"]
        # every evaluation of the 10m window but the newest (39 of 40 at 15 s) found the GPU spinning
        assert f"count_over_time(cluster_instance_gpu:gpu_spinning:{kind}[10m]) >= 39" in rule["expr"]
        assert "DCGM_FI_DEV_POWER_USAGE" not in rule["expr"]  # the recording reads the signals, once each
        # both complete the GPUs busy at near-idle power, recorded first
        assert _recorded(files, f"cluster_instance_gpu:gpu_spinning:{kind}").startswith(f"{BUSY_AT_IDLE_POWER}\n")
    busy = _recorded(files, BUSY_AT_IDLE_POWER)
    assert "DCGM_FI_DEV_GPU_UTIL >= 80" in busy
    # power against the limit where published, else against the watts level
    assert "(DCGM_FI_DEV_ENFORCED_POWER_LIMIT) < 0.25" in busy and "(DCGM_FI_DEV_POWER_USAGE) < 175" in busy
    spins_profiled = _recorded(files, "cluster_instance_gpu:gpu_spinning:profiled")
    spins_unprofiled = _recorded(files, "cluster_instance_gpu:gpu_spinning:unprofiled")
    assert "DCGM_FI_PROF_DRAM_ACTIVE) < 0.05" in spins_profiled and "DCGM_FI_PROF_DRAM_ACTIVE" not in spins_unprofiled
    assert spins_unprofiled.endswith("unless on (cluster, instance, gpu)\nDCGM_FI_PROF_PIPE_TENSOR_ACTIVE")
    assert "publish no tensor or DRAM activity" in unprofiled["annotations"]["description"]
    assert "publish no" not in profiled["annotations"]["description"]


def test_runbook_links_point_at_a_section_of_docs_alerts(settings: Settings) -> None:
    # GitHub's anchor for a heading: lower case, spaces to dashes, punctuation dropped
    headings = {re.sub(r"[^a-z0-9 _-]", "", line[3:].strip().lower()).replace(" ", "-")
                for line in (ROOT / "docs" / "alerts.md").read_text().splitlines() if line.startswith("## ")}
    assert {name.lower() for name in alert_names()} <= headings
    for rule in rules_of(render_all(settings)):
        page, anchor = rule["annotations"]["runbook"].split("#")
        assert (ROOT / page).is_file()
        assert anchor == rule["alert"].lower() and anchor in headings


def test_no_metric_name_is_typed_in_the_rules_package() -> None:
    names = {s.dcgm_name for s in SIGNALS}
    for path in (ROOT / "gpudash" / "rules").glob("*.py"):
        text = path.read_text()
        typed = [n for n in names if n in text]
        assert not typed, f"{path.name} types {typed}: read names from gpudash.catalog"


def test_recording_rules_come_from_the_shared_registry_and_alerts_use_them(settings: Settings) -> None:
    files = render_all(settings)
    recorded = [r["record"] for r in rules_of(files, RECORDING_FILE)]
    # the rule-interval groups in their order, each in the registry's order; the hourly ones after the rest
    assert recorded == [r.record for part in GROUP_NAMES for r in RECORDINGS if r.group == part and not r.hourly] + [
        r.record for r in RECORDINGS if r.hourly]
    for name in recorded:
        assert re.fullmatch(r"[a-z_]+:[a-z_]+:[a-z_]+", name), name
    memory = alerts_named(files, "GPUMemoryPressure") + alerts_named(files, "GPUMemoryLeakPredicted")
    assert all("cluster_instance_gpu:gpu_fb_used:ratio" in r["expr"] for r in memory)
    assert "DCGM_FI_DEV_FB_TOTAL" not in files[ALERTS_FILE] + files[RECORDING_FILE]


def test_memory_ratio_uses_used_plus_free(settings: Settings) -> None:
    expr = {r["record"]: r["expr"] for r in rules_of(render_all(settings), RECORDING_FILE)}
    assert expr["cluster_instance_gpu:gpu_fb_used:ratio"] == (
        "DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE)")


# GPUHighTemperature reads these: the temperature medians, windows and margins are in them
GPU_NEAR = "cluster_instance_gpu:gpu_temperature_celsius:near_limit"
HBM_NEAR = "cluster_instance_gpu:gpu_memory_temperature_celsius:near_limit"
NVLINK_STORM = "cluster_instance_gpu_link:gpu_nvlink_crc_errors_per_second:storm"
BUSY_AT_IDLE_POWER = "cluster_instance_gpu:gpu_utilization:busy_at_idle_power"


@pytest.mark.parametrize(("path", "value", "alert", "expected"), [
    (("memory", "warning_ratio"), 0.8, "GPUMemoryPressure", "> 0.8\n"),
    (("temperature", "hbm_critical_celsius"), 97, "GPUHighTemperature", ":near_limit) > 97"),
    (("alerts", "temperature", "window"), "90s", GPU_NEAR, "DCGM_FI_DEV_GPU_TEMP[90s]"),
    (("alerts", "memory_leak", "horizon"), "6h", "GPUMemoryLeakPredicted", "[1h], 21600)"),
    (("alerts", "job_stalled", "util_below_percent"), 2, "GPUJobStalled", ")) < 2\n"),
    (("alerts", "data_loader", "cpu_load_ratio"), 0.75, "GPUDataLoaderBottleneck", "> 0.75\n"),
    (("alerts", "xid", "overrides"), {777: "rma"}, "GPUXidError", 'xid=~"777"'),
    (("temperature", "gpu_margin_celsius"), 7, GPU_NEAR, "(DCGM_FI_DEV_GPU_MAX_OP_TEMP) - 7)"),
    (("temperature", "hbm_margin_celsius"), 3, HBM_NEAR, "(DCGM_FI_DEV_MEM_MAX_OP_TEMP) - 3)"),
    (("alerts", "nvlink", "crc_per_second_critical"), 50, NVLINK_STORM, "[5m]) >= 50)"),
    (("alerts", "nvlink", "storm_window"), "2m", NVLINK_STORM, "[2m]) >= 100)"),
    (("alerts", "nvlink", "window"), "2h", "GPUNVLinkErrors", "offset 2h) >= 7200)"),  # 3,600 an hour, for 2h
    (("alerts", "nvlink", "crc_per_hour_warning"), 1800, "GPUNVLinkErrors", "offset 1h) >= 1800)"),
    (("alerts", "nvlink", "replay_per_hour_warning"), 30, "GPUNVLinkErrors", "offset 1h) >= 30)"),
    (("alerts", "memory_errors", "window"), "30m", "GPUEccUncorrectable", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL[30m]"),
    (("clocks", "throttle_drop_ratio"), 0.2, "GPUThermalThrottling", "0.8 * max by"),
    (("alerts", "job_straggler", "min_gpus"), 8, "GPUJobStraggler", "cluster_job:gpu_count:count >= 8\n"),
    (("alerts", "job_straggler", "busy_above_percent"), 70, "GPUJobStraggler", "median[5m]) > 70\n"),
    (("alerts", "job_straggler", "clock_below_ratio"), 0.2, "GPUJobStraggler",
     "0.8 * avg_over_time(cluster_job:gpu_sm_clock_mhz:median[5m])"),
    (("alerts", "job_straggler", "activity_points"), 30, "GPUJobStraggler", ":points) > 30\n"),
    (("alerts", "job_straggler", "window"), "7m", "GPUJobStraggler", "cluster_job:gpu_count:count offset 7m"),
    (("alerts", "allocated_idle", "util_below_percent"), 2, "GPUAllocatedIdle", "[1h])) < 2\n"),
    (("alerts", "allocated_idle", "window"), "3h", "GPUAllocatedIdle", 'hpc_job!=""} offset 3h)'),
    (("alerts", "repeat_offender", "resets"), 4, "GPURepeatOffender", ":new[7d])) >= 4)"),
    (("alerts", "repeat_offender", "window"), "14d", "GPURepeatOffender", "gpu_reset_episodes:new[14d])) >= 3)"),
])
def test_a_threshold_change_changes_the_rules(thresholds_copy: Callable[..., Path], monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path, path: tuple[str, ...], value: object, alert: str,
                                              expected: str) -> None:
    monkeypatch.chdir(tmp_path)
    before = render_all(load_settings(ROOT / "thresholds.yaml"))
    after = render_all(load_settings(thresholds_copy((path, value))))

    def text(files: dict[str, str]) -> str:  # an alert's expressions, or a recording's (named level:metric:ops)
        if ":" in alert:
            return _recorded(files, alert)
        return "\n".join(r["expr"] + "\n" for r in alerts_named(files, alert))

    assert expected in text(after)
    assert expected not in text(before)


def test_the_exporter_down_lookback_moves_the_recording_the_alert_reads(
        thresholds_copy: Callable[..., Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    after = render_all(load_settings(thresholds_copy((("alerts", "exporter_down", "lookback"), "3h"))))
    stopped = "cluster_instance_gpu:gpu_reporting:stopped"
    recorded = next(r["expr"] for r in rules_of(after, RECORDING_FILE) if r.get("record") == stopped)
    assert "DCGM_FI_DEV_FB_USED[3h]" in recorded
    assert all(stopped in r["expr"] for r in alerts_named(after, "GPUExporterDown"))


@pytest.mark.parametrize(("path", "value", "alert", "expected", "scale"), [
    (("memory", "warning_ratio"), 0.8, "GPUMemoryPressure", "> 0.8", (1, 100)),
    # the warning level moves the recording of the GPUs near their limit, which GPUHighTemperature reads
    (("temperature", "gpu_warning_celsius"), 75, "cluster_instance_gpu:gpu_temperature_celsius:near_limit", "> 75",
     (1,)),
])
def test_a_threshold_change_moves_rules_and_dashboard_steps_together(
        thresholds_copy: Callable[..., Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        path: tuple[str, ...], value: float, alert: str, expected: str, scale: tuple[int, ...]) -> None:
    build_all = pytest.importorskip("gpudash.panels.build").build_all
    monkeypatch.chdir(tmp_path)

    def steps(settings: Settings) -> set[float]:
        text = json.dumps(build_all(settings, ROOT / "dashboards"))
        return {float(v) for v in re.findall(r'"color": "[a-z]+", "value": ([0-9.]+)', text)}

    changed = load_settings(thresholds_copy((path, value)))
    files = render_all(changed)
    exprs = [_recorded(files, alert)] if ":" in alert else [r["expr"] for r in alerts_named(files, alert)]
    assert any(expected in e for e in exprs)
    before, after = steps(load_settings(ROOT / "thresholds.yaml")), steps(changed)
    assert any(value * s in after and value * s not in before for s in scale), (sorted(before), sorted(after))


def test_nvidia_smi_profile_leaves_out_what_it_cannot_evaluate(tmp_path: Path) -> None:
    files = render_all(load_settings(ROOT / "thresholds.yaml", site_file(tmp_path, {"profile": "nvidia_smi"})))
    names = {r["alert"] for r in rules_of(files)}
    assert "GPUXidError" not in names  # nvidia_gpu_exporter publishes no XID series
    assert {"GPUHighTemperature", "GPUMemoryPressure", "GPUJobStalled", "GPUJobHung"} <= names
    # no profiling in that profile: the hang is judged on utilization and power (against the limit) alone
    (hung,) = [r for r in rules_of(files) if r["alert"] == "GPUJobHung"]
    assert "cluster_instance_gpu:gpu_spinning:unprofiled[10m]" in hung["expr"]
    assert _recorded(files, "cluster_instance_gpu:gpu_spinning:unprofiled") == BUSY_AT_IDLE_POWER
    spins = _recorded(files, BUSY_AT_IDLE_POWER)
    assert "nvidia_smi_power_draw_watts" in spins and "nvidia_smi_enforced_power_limit_watts" in spins
    assert "publish no tensor or DRAM activity" in hung["annotations"]["description"]
    text = files[ALERTS_FILE] + files[RECORDING_FILE]
    assert "DCGM_FI_" not in text and "by (cluster, instance, uuid)" in text
    assert "(nvidia_smi_utilization_gpu_ratio[" in text  # ranges on the raw series, converted after


def test_job_alerts_read_the_sites_job_label(tmp_path: Path) -> None:
    label = "training_kubeflow_org_job_name"
    files = render_all(load_settings(ROOT / "thresholds.yaml", site_file(tmp_path, {"jobs": {"label": label}})))
    for alert in JOB_ALERTS:
        for rule in alerts_named(files, alert):
            assert "hpc_job" not in rule["expr"] + json.dumps(rule["annotations"]), alert
            assert f'{label}!=""' in rule["expr"] and f"$labels.{label}" in rule["annotations"]["summary"], alert
    for alert in NAMING_THE_JOB:
        for rule in alerts_named(files, alert):
            assert "hpc_job" not in rule["expr"] + json.dumps(rule["annotations"]), alert
            assert f"{label}, namespace, pod)" in rule["expr"] and f"$labels.{label}" in rule["annotations"]["summary"]
    straggler = alerts_named(files, "GPUJobStraggler")[0]["expr"]
    assert f"on (cluster, {label}) group_left ()" in straggler
    assert f"max by (cluster, instance, gpu, {label})" in straggler
    assert "cluster_instance_gpu_job:gpu_activity_departure:points" in straggler
    assert f"count by (cluster, {label})" in alerts_named(files, "GPUAllocatedIdle")[0]["expr"]
    recorded = {r["record"]: r["expr"] for r in rules_of(files, RECORDING_FILE)}
    expected = f'count by (cluster, {label}) (DCGM_FI_DEV_GPU_UTIL{{{label}!=""}})'
    assert recorded["cluster_job:gpu_count:count"] == expected


def test_straggler_judges_sm_activity_first_then_utilization_and_the_clock(settings: Settings) -> None:
    files = render_all(settings)
    recorded = {r["record"]: r["expr"] for r in rules_of(files, RECORDING_FILE)}
    departure = recorded["cluster_instance_gpu_job:gpu_activity_departure:points"]
    # SM activity on the left of `or`: a GPU that has it is never judged on utilization too
    assert departure.index("DCGM_FI_PROF_SM_ACTIVE") < departure.index("\nor\n") < departure.index("GPU_UTIL")
    records = [r["record"] for r in rules_of(files, RECORDING_FILE)]
    for median in ("cluster_job:gpu_sm_active:median", "cluster_job:gpu_utilization:median"):
        assert f"avg_over_time({median}[5m])" in departure
        assert records.index(median) < records.index("cluster_instance_gpu_job:gpu_activity_departure:points")
    (rule,) = alerts_named(files, "GPUJobStraggler")
    expr = rule["expr"]
    assert "abs(cluster_instance_gpu_job:gpu_activity_departure:points) > 20" in expr
    assert "DCGM_FI_DEV_SM_CLOCK" in expr and "0.9 * avg_over_time(cluster_job:gpu_sm_clock_mhz:median[5m])" in expr
    # the job must keep its size over the window and have existed a window ago
    assert "min_over_time(cluster_job:gpu_count:count[5m]) == max_over_time(cluster_job:gpu_count:count[5m])" in expr
    assert "cluster_job:gpu_count:count offset 5m" in expr
    assert rule["for"] == "10m" and rule["labels"] == {"severity": "warning", "action": "none"}


def test_nvidia_smi_profile_judges_stragglers_on_utilization_and_clock(tmp_path: Path) -> None:
    files = render_all(load_settings(ROOT / "thresholds.yaml", site_file(tmp_path, {"profile": "nvidia_smi"})))
    (rule,) = alerts_named(files, "GPUJobStraggler")
    departure = {r["record"]: r["expr"] for r in rules_of(files, RECORDING_FILE)}[
        "cluster_instance_gpu_job:gpu_activity_departure:points"]
    assert "sm_active" not in departure + rule["expr"] and "(nvidia_smi_utilization_gpu_ratio{hpc_job" in departure
    assert "nvidia_smi_clocks_current_sm_clock_hz{hpc_job" in rule["expr"]
    assert "its activity (utilization)" in rule["annotations"]["description"]
    assert alerts_named(files, "GPUAllocatedIdle")


def test_cluster_recordings_count_a_gpu_once_whatever_jobs_share_it() -> None:
    from support.paths import ROOT

    from gpudash.config.loading import load_settings
    from gpudash.promql.fabric_recordings import JOB_GPUS
    from gpudash.promql.for_settings import recording_rules
    from gpudash.promql.recordings import JOB_RECORDINGS

    job_level = {r.record for r in JOB_RECORDINGS} | {"cluster_instance_gpu:gpu_fb_used:ratio", JOB_GPUS}
    for rec, expr in recording_rules(load_settings(ROOT / "thresholds.yaml")):
        # not only recorded series, merged already; a signal read for its presence alone needs no merging
        values = re.sub(r"unless on \([\w, ]*\)\s*(?:DCGM_|gpudash_)\w+", "", expr)
        reads_signals = re.search(r"\b(?:DCGM_|gpudash_)", values)
        if rec.record not in job_level and reads_signals:  # per cluster or node: every GPU signal merged first
            merged = re.findall(r"max by \(cluster, instance, gpu[\w, ]*\) \((?:\w+\()?(?:DCGM_|gpudash_)", expr)
            assert merged, (rec.record, expr)


def test_the_reset_recording_counts_the_codes_the_sites_xid_table_calls_a_reset(
        thresholds_copy: Callable[..., Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)

    def codes(settings: Settings) -> set[str]:
        expr = next(r["expr"] for r in rules_of(render_all(settings), RECORDING_FILE)
                    if r["record"] == "cluster_instance_gpu_uuid:gpu_reset_signals:new")
        found = {frozenset(m.split("|")) for m in re.findall(r'"\(?([0-9|]+)\)?"', expr)}
        (one,) = found  # the gauge's events and the counter's series: the same codes
        return set(one)

    table = codes(load_settings(ROOT / "thresholds.yaml"))
    assert {"48", "79", "119"} <= table and not {"13", "43", "63"} & table  # reset_gpu / reboot_node only
    site = codes(load_settings(thresholds_copy((("alerts", "xid", "overrides"), {13: "reset_gpu", 48: "none"}))))
    assert site == (table | {"13"}) - {"48"}


def test_the_gpu_alerts_come_in_two_groups_evaluated_side_by_side(settings: Settings) -> None:
    files = render_all(settings)
    groups = yaml.safe_load(files[ALERTS_FILE])["groups"]
    assert [g["name"] for g in groups] == ["gpudash-gpu-alerts", "gpudash-gpu-health-alerts"]
    first, health = ({r["alert"] for r in g["rules"]} for g in groups)
    table = {spec.name for spec in (*HEALTH_ALERTS, *FABRIC_ALERTS)}
    assert health <= table and not first & table
    assert {"GPUXidError", "GPUNVLinkErrors", "GPURepeatOffender", "GPUFabricPortDown"} <= health
    assert {"GPUHighTemperature", "GPUJobHung", "GPUExporterDown", "GPUAllocatedIdle"} <= first
    # every rule once, in the table's order
    assert [r["alert"] for g in groups for r in g["rules"]] == [r.alert for r in alert_rules(settings)]
