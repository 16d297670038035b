"""The GPU health rules: the XID table's groups, the actions, runbook links and the RMA route."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from support.paths import ROOT

from gpudash.config.loading import Settings, load_settings
from gpudash.health.xid import ACTIONS, UNKNOWN_ACTION, UNKNOWN_SEVERITY, XID_TABLE
from gpudash.repository import ALERTMANAGER_FILE, ALERTS_FILE, RECORDING_FILE
from gpudash.rules.alert_spec import ACTION_TEXT
from gpudash.rules.generated_files import render_all
from gpudash.rules.health_alerts import HEALTH_ALERTS, LATCHED, TEMPERATURE, WATCHED_BY, xid_groups


def rules_of(files: dict[str, str]) -> list[dict[str, Any]]:
    return [rule for group in yaml.safe_load(files[ALERTS_FILE])["groups"] for rule in group["rules"]]


def site_file(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_every_xid_of_the_table_is_in_exactly_one_group_of_its_severity_and_action() -> None:
    seen: list[int] = []
    for severity, action, group in xid_groups(XID_TABLE):
        assert {(r.severity, r.action) for r in group} == {(severity, action)}
        seen += [r.code for r in group]
    assert sorted(seen) == sorted(XID_TABLE)
    severities = [severity for severity, _, _ in xid_groups(XID_TABLE)]
    assert severities == sorted(severities, key=["critical", "warning", "info"].index)  # most severe first


def test_one_xid_rule_per_group_and_one_for_codes_not_in_the_table(settings: Settings) -> None:
    xid = [r for r in rules_of(render_all(settings)) if r["alert"] == "GPUXidError"]
    expected = []
    for severity, action, group in xid_groups(XID_TABLE):
        if plain := [row for row in group if row.code not in WATCHED_BY]:
            expected.append((severity, action, plain))
        for row in (r for r in group if r.code in WATCHED_BY):  # its own rule, and a reset where unwatched
            field = WATCHED_BY[row.code]
            expected += [(severity, action, [row], {field: "published"}),
                         ("warning", "reset_gpu", [row], {field: "absent"})]
    assert len(xid) == len(expected) + 1
    # no two rules of the alert share their labels (promtool check rules refuses duplicates)
    assert len({tuple(sorted(r["labels"].items())) for r in xid}) == len(xid)
    for rule, (severity, action, group, *field) in zip(xid, expected, strict=False):
        assert rule["labels"] == {"severity": severity, "action": action, **(field[0] if field else {})}
        codes = "|".join(str(r.code) for r in group)
        assert f'xid=~"{codes}"' in rule["expr"]
        for row in group:
            assert f'label_replace(vector(1), "xid", "{row.code}", "", "")' in rule["expr"]
    unknown = xid[-1]
    assert unknown["labels"] == {"severity": UNKNOWN_SEVERITY, "action": UNKNOWN_ACTION}
    assert 'xid!~"' in unknown["expr"] and "\nunless on (xid)\n" in unknown["expr"]


def test_every_alert_has_an_action_with_a_text() -> None:
    assert set(ACTION_TEXT) == set(ACTIONS)


def test_health_rules_use_each_gpus_own_limits_and_never_count_a_gpu_twice(settings: Settings) -> None:
    rules = rules_of(render_all(settings))
    temperature = {(r["labels"]["sensor"], r["labels"]["severity"]): r["expr"] for r in rules
                   if r["alert"] == "GPUHighTemperature"}
    # the warning is the recording of the GPUs near their own limit; the critical compares those with the limit
    near = "cluster_instance_gpu:gpu_memory_temperature_celsius:near_limit"
    assert temperature[("hbm", "warning")] == f"max by (cluster, instance, gpu) ({near})"
    recorded = {r["record"]: r["expr"] for group in yaml.safe_load(render_all(settings)[RECORDING_FILE])["groups"]
                for r in group["rules"]}
    assert ">= on (cluster, instance, gpu)\n  (max by (cluster, instance, gpu) (DCGM_FI_DEV_MEM_MAX_OP_TEMP) - 5)" \
        in recorded[near]
    assert f"max by (cluster, instance, gpu, UUID, hostname) ({near})\n  >= on (cluster, instance, gpu)\n" \
        in temperature[("hbm", "critical")]
    assert "unless on (cluster, instance, gpu)\n  max by (cluster, instance, gpu) (DCGM_FI_DEV_MEM_MAX_OP_TEMP)" \
        in temperature[("hbm", "critical")]
    nvlink = [r["expr"] for r in rules if r["alert"] == "GPUNVLinkErrors"]
    assert len(nvlink) == 3
    # the warning, and the recorded critical conditions: the DCGM totals give way to the per-link series wherever
    # a GPU has both
    critical = [recorded[f"cluster_instance_gpu_link:gpu_nvlink_{name}"]
                for name in ("recovery_errors:latched", "crc_errors_per_second:storm")]
    for expr in [e for e in nvlink if " offset " in e] + critical:
        assert ("unless on (cluster, instance, gpu)\nmax by (cluster, instance, gpu) "
                "(gpudash_nvlink_errors_total)\n)") in expr


def test_nvidia_smi_profile_keeps_the_health_alerts_it_can_evaluate(tmp_path: Path) -> None:
    files = render_all(load_settings(ROOT / "thresholds.yaml", site_file(tmp_path, {"profile": "nvidia_smi"})))
    names = {r["alert"] for r in rules_of(files)}
    assert {"GPUEccUncorrectable", "GPURowRemapFailure"} <= names  # remapped-row series it publishes
    assert not {"GPUNVLinkErrors", "GPUFellOffBus", "GPURowRemapPending"} & names
    temperature = [r["expr"] for r in rules_of(files) if r["alert"] == "GPUHighTemperature"]
    assert temperature and not any("MAX_OP_TEMP" in e for e in temperature)  # the fixed levels only


def test_a_sites_runbook_base_url_makes_runbook_urls(tmp_path: Path) -> None:
    base = "https://git.example.com/ops/gpu/blob/main/docs/alerts.md"
    files = render_all(load_settings(ROOT / "thresholds.yaml", site_file(tmp_path, {"runbook_base_url": base})))
    for rule in rules_of(files):
        assert rule["annotations"]["runbook_url"] == f"{base}#{rule['alert'].lower()}"
        assert "runbook" not in rule["annotations"]
    assert "github.com/gpudash" not in json.dumps(rules_of(files))


def test_rma_alerts_also_go_to_the_sites_rma_receivers(tmp_path: Path, settings: Settings) -> None:
    assert "gpudash-rma" not in render_all(settings)[ALERTMANAGER_FILE]  # none configured: severity routing only
    site = site_file(tmp_path, {"rma_receivers": [{"name": "tickets", "type": "webhook",
                                                   "url": "https://tickets.example.org/gpu"}]})
    am = yaml.safe_load(render_all(load_settings(ROOT / "thresholds.yaml", site))[ALERTMANAGER_FILE])
    first = next(r for r in am["route"]["routes"] if r["matchers"] == ['action="rma"'])
    assert first["receiver"] == "gpudash-rma"
    assert first["continue"] is True  # and then the severity routes below, as for any alert
    assert first["group_by"] == ["cluster", "instance", "gpu", "alertname"]
    (rma,) = [r for r in am["receivers"] if r["name"] == "gpudash-rma"]
    assert rma == {"name": "gpudash-rma", "webhook_configs": [{"url": "https://tickets.example.org/gpu",
                                                               "send_resolved": True}]}
    assert "tickets.example.org" not in json.dumps([r for r in am["receivers"] if r is not rma])
    rules = rules_of(render_all(settings))
    assert {r["alert"] for r in rules if r["labels"]["action"] == "rma"} == {"GPURowRemapFailure", "GPURepeatOffender"}


def test_the_operator_resource_carries_the_rma_receiver_and_its_secret(tmp_path: Path) -> None:
    from gpudash.kube.operator import alertmanager_resource, receiver_secret_keys

    site = site_file(tmp_path, {"rma_receivers": [{"name": "tickets", "type": "webhook", "url_env": "RMA_URL"}]})
    settings = load_settings(ROOT / "thresholds.yaml", site)
    spec = alertmanager_resource(settings, render_all(settings)[ALERTMANAGER_FILE])["spec"]
    rma = next(r for r in spec["receivers"] if r["name"] == "gpudash-rma")
    assert rma["webhookConfigs"] == [{"urlSecret": {"name": "gpudash-alertmanager-receivers", "key": "tickets-url"},
                                      "sendResolved": True}]
    assert [r["receiver"] for r in spec["route"]["routes"] if r.get("continue")] == ["gpudash-rma"]
    assert "tickets-url" in receiver_secret_keys(settings)


def test_alert_names_are_listed_once() -> None:
    from gpudash.rules.alert_table import alert_names

    assert len(alert_names()) == len(set(alert_names())) == 24


def test_health_pages_name_the_card_or_the_job(settings: Settings) -> None:
    """A reset, reboot, drain or RMA keeps the UUID and host name; a restart_job XID keeps the job label."""
    health = {spec.name for spec in (*HEALTH_ALERTS, TEMPERATURE)} - {"GPUNVLinkErrors"}
    judged = 0
    for rule in (r for r in rules_of(render_all(settings)) if r["alert"] in health):
        action = rule["labels"]["action"]
        kept = {name.strip() for by in re.findall(r"\bby \(([^)]*)\)", rule["expr"]) for name in by.split(",")}
        if action in LATCHED:
            assert {"UUID", "hostname"} <= kept, rule["alert"]
            judged += 1
        elif action == "restart_job":
            assert {"hpc_job", "namespace", "pod"} <= kept, rule["alert"]
            judged += 1
    assert judged >= 10
