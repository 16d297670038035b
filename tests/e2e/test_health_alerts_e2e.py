"""Every health alert goes all the way: a simulated exporter with one fault per GPU -> the generated rules fire
in a real Prometheus -> the generated alertmanager.yml delivers each to a webhook with its severity, action
and runbook; action=rma reaches the site's RMA receiver too, and the GPU that fell off the bus delivers
nothing else (its XIDs fire in Prometheus, Alertmanager holds them inhibited).

The rules come from `gpudash rules` with a thresholds file whose windows, `for:` and notification timing are
short enough for a test; the expressions, routes and inhibitions are the generated ones, unchanged.
Grouping makes the inhibition deterministic: every fault starts at FAULT_AT, and each group waits
GROUP_WAIT before its first notification, well after GPUFellOffBus (for: 1s) has reached Alertmanager.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.e2e import gpudash_rules, site_yaml
from support.paths import ROOT
from support.ports import on_free_ports
from support.waiting import eventually

from gpudash.exporter.sim.faults_health import storm_link
from gpudash.rules.alertmanager import CRITICAL_RECEIVER, DIGEST_RECEIVER, JOB_OWNER_RECEIVER, RMA_RECEIVER
from gpudash.stack.process import AlertmanagerProcess, PrometheusProcess
from gpudash.stack.servers import ExporterProcess, WebhookReceiver, prometheus_config, rule_files, scrape_jobs

SEED = 5
FAULT_AT = 10  # s after the exporter starts: Prometheus has scraped every counter at its healthy value by then
GROUP_WAIT = "8s"
LOST_GPU = "12"
HEALTHY = ("13", "14", "15")
FAULTS = {
    "0": "dbe-burst", "1": "remap-pending", "2": "remap-failure", "3": "nvlink-crc-storm",
    "4": "xid:13", "5": "xid:94", "6": "xid:95", "7": "xid:119", "8": "xid:79", "9": "xid:63",
    "10": "xid:999", "11": "xid:54",
}
EXPORTER_ARGS = ["--simulate", "16", "--seed", str(SEED), "--expected-gpus", "16",
                 "--nvlink-per-link",  # the NVLink alert then names the link
                 *[a for gpu, fault in FAULTS.items() for a in ("--fault", f"{gpu}={fault}@{FAULT_AT}s")],
                 # an XID on the GPU just before it falls off the bus: both stay firing, neither may be delivered
                 "--fault", f"{LOST_GPU}=xid:13@{FAULT_AT - 1}s", "--fault", f"{LOST_GPU}=fell-off-bus@{FAULT_AT}s"]

# (alertname, gpu, xid or None) -> (severity, action): what each fault must deliver
EXPECTED: dict[tuple[str, str, str | None], tuple[str, str]] = {
    ("GPUEccUncorrectable", "0", None): ("warning", "reset_gpu"),  # contained: reset when idle
    ("GPURecoveryAction", "0", None): ("critical", "drain"),  # the burst's recovery action 4, drain and reset
    ("GPURowRemapPending", "0", None): ("warning", "reset_gpu"),
    ("GPUXidError", "0", "48"): ("critical", "reset_gpu"),
    ("GPURowRemapPending", "1", None): ("warning", "reset_gpu"),
    ("GPURowRemapFailure", "2", None): ("critical", "rma"),
    ("GPUXidError", "2", "64"): ("critical", "reset_gpu"),
    ("GPURecoveryAction", "2", None): ("critical", "reset_gpu"),  # the remap failure's recovery action 1
    ("GPUNVLinkErrors", "3", None): ("critical", "reset_gpu"),
    ("GPUXidError", "4", "13"): ("warning", "restart_job"),
    ("GPUXidError", "5", "94"): ("warning", "restart_job"),
    ("GPUXidError", "6", "95"): ("critical", "reset_gpu"),
    ("GPUXidError", "7", "119"): ("critical", "reset_gpu"),
    ("GPUXidError", "8", "79"): ("critical", "reboot_node"),
    ("GPUXidError", "9", "63"): ("info", "none"),
    ("GPUXidError", "10", "999"): ("warning", "reset_gpu"),  # not in the XID table: the safe default
    ("GPUXidError", "11", "54"): ("critical", "drain"),
    ("GPUFellOffBus", LOST_GPU, None): ("critical", "reboot_node"),
}


def short_thresholds(path: Path) -> Path:
    data = yaml.safe_load((ROOT / "thresholds.yaml").read_text())
    alerts = data["alerts"]
    alerts["xid"].update(window="1m")
    alerts["memory_errors"].update(window="1m", pending_for="2s")
    # a 300/s storm's CRC rate over 10 s passes 100/s within 4 s: the warning's `for:` outlasts that onset
    alerts["nvlink"].update({"window": "10s", "storm_window": "10s", "for": "15s"})
    alerts["fell_off_bus"].update({"for": "1s"})
    alerts["recovery_action"].update({"for": "1s"})
    for route in ("critical", "digest"):
        data["alertmanager"][route] = {"group_wait": GROUP_WAIT, "group_interval": "2s", "repeat_interval": "1h"}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@dataclass
class HealthStack:
    prometheus: PrometheusProcess
    alertmanager: AlertmanagerProcess
    receiver: WebhookReceiver
    rma: WebhookReceiver


@pytest.fixture(scope="module")
def health_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HealthStack]:
    with on_free_ports(1, partial(_health_stack, tmp_path_factory.mktemp("health-alerts-e2e"))) as stack:
        yield stack


@contextmanager
def _health_stack(tmp: Path, port: int) -> Iterator[HealthStack]:
    """Prometheus before the exporter, which takes `port`: it must see the healthy counters before the faults."""
    with WebhookReceiver() as receiver, WebhookReceiver() as rma:
        site = site_yaml(tmp / "site.yml", "e2e", [f"127.0.0.1:{port}"], webhook=receiver.url)
        data = yaml.safe_load(site.read_text())
        data["rma_receivers"] = [{"name": "tickets", "type": "webhook", "url": rma.url}]
        site.write_text(yaml.safe_dump(data, sort_keys=False))
        files = gpudash_rules(tmp / "generated", site, short_thresholds(tmp / "thresholds.yaml"))
        rules = rule_files(files)
        with AlertmanagerProcess(files["alertmanager/alertmanager.yml"]) as alertmanager:
            config = prometheus_config(scrape_jobs(files), rule_files=list(rules), interval="1s",
                                       alertmanager=alertmanager.address)
            with PrometheusProcess(config, rules) as prometheus, ExporterProcess(EXPORTER_ARGS, port=port):
                # the counters' healthy values must be in Prometheus before the faults, or no increase shows
                eventually(lambda: prometheus.query('DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{gpu="0"} == 0'), timeout=30,
                           what="a healthy sample of GPU 0's DBE counter")
                yield HealthStack(prometheus, alertmanager, receiver, rma)


def _key(labels: dict[str, str]) -> tuple[str, str, str | None]:
    return labels["alertname"], labels.get("gpu", ""), labels.get("xid")


Delivered = dict[tuple[str, str, str | None], list[tuple[str, dict[str, Any]]]]


def _delivered(receiver: WebhookReceiver) -> Delivered:
    """Every firing alert the receiver got, by (alertname, gpu, xid): (Alertmanager receiver name, alert)s."""
    out: Delivered = {}
    for n in receiver.received():
        for a in n["alerts"]:
            if a["status"] == "firing":
                out.setdefault(_key(a["labels"]), []).append((n["receiver"], a))
    return out


def test_each_health_alert_reaches_the_webhook_with_its_severity_action_and_runbook(
        health_stack: HealthStack) -> None:
    s = health_stack

    def every_expected() -> Delivered | None:
        delivered = _delivered(s.receiver)
        return delivered if set(EXPECTED) <= set(delivered) else None

    delivered = eventually(every_expected, timeout=75, what=f"every expected alert at the webhook: {sorted(EXPECTED)}")
    for key, (severity, action) in EXPECTED.items():
        for receiver, alert in delivered[key]:  # every notification of it, and no other severity
            labels = alert["labels"]
            assert (labels["severity"], labels["action"]) == (severity, action), key
            # a job's alert goes to its owner (here the default: no owner listed), the rest by severity
            wanted = JOB_OWNER_RECEIVER if action == "restart_job" else \
                CRITICAL_RECEIVER if severity == "critical" else DIGEST_RECEIVER
            assert receiver == wanted, key
            assert alert["annotations"]["runbook"] == f"docs/alerts.md#{key[0].lower()}", key
            assert alert["annotations"]["summary"] and alert["annotations"]["description"], key
    # the NVLink alert names the link the storm hit
    assert {a["labels"]["link"] for _, a in delivered[("GPUNVLinkErrors", "3", None)]} == {str(storm_link(SEED, 3))}
    # info never pages: no notification to the critical receiver carries an info alert
    assert not [a for n in s.receiver.received() if n["receiver"] == CRITICAL_RECEIVER
                for a in n["alerts"] if a["labels"]["severity"] != "critical"]
    # the healthy GPUs delivered nothing
    assert not [k for k in delivered if k[1] in HEALTHY]


def test_rma_alerts_also_reach_the_rma_receiver_and_nothing_else_does(health_stack: HealthStack) -> None:
    s = health_stack
    tickets = eventually(lambda: _delivered(s.rma), timeout=75, what="the RMA ticket at the second webhook")
    assert list(tickets) == [("GPURowRemapFailure", "2", None)]
    ((receiver, alert), *_) = tickets[("GPURowRemapFailure", "2", None)]
    assert receiver == RMA_RECEIVER and alert["labels"]["action"] == "rma"
    assert alert["annotations"]["runbook"] == "docs/alerts.md#gpurowremapfailure"
    # `continue: true`: the same alert pages through the critical route as well
    eventually(lambda: ("GPURowRemapFailure", "2", None) in _delivered(s.receiver), timeout=75,
               what="GPURowRemapFailure at the critical receiver too")
    assert not [a for n in s.rma.received() for a in n["alerts"] if a["labels"]["action"] != "rma"]


def test_a_gpu_off_the_bus_delivers_only_that_its_other_alerts_fire_but_are_inhibited(
        health_stack: HealthStack) -> None:
    s = health_stack
    # Prometheus fires the lost GPU's XIDs (13 just before the fall, 79 with it) beside GPUFellOffBus
    firing = eventually(lambda: {(a["metric"]["alertname"], a["metric"].get("xid")) for a in s.prometheus.query(
        f'ALERTS{{alertstate="firing",gpu="{LOST_GPU}"}}')} >= {("GPUFellOffBus", None), ("GPUXidError", "13"),
                                                                ("GPUXidError", "79")} or None,
        timeout=60, what="GPUFellOffBus and the lost GPU's XID alerts firing in Prometheus")
    assert firing
    eventually(lambda: ("GPUFellOffBus", LOST_GPU, None) in _delivered(s.receiver), timeout=75,
               what="GPUFellOffBus at the webhook")

    held = {_key(a["labels"]): a for a in s.alertmanager.alerts() if a["labels"].get("gpu") == LOST_GPU}
    (off_bus,) = [a for k, a in held.items() if k[0] == "GPUFellOffBus"]
    assert off_bus["status"]["state"] == "active"
    others = {k: a for k, a in held.items() if k[0] != "GPUFellOffBus"}
    assert {("GPUXidError", LOST_GPU, "13"), ("GPUXidError", LOST_GPU, "79")} <= set(others)
    for key, alert in others.items():
        assert alert["status"]["state"] == "suppressed", key
        assert off_bus["fingerprint"] in alert["status"]["inhibitedBy"], (key, alert["status"])
    # and the webhook got nothing of that GPU but GPUFellOffBus, in any notification so far
    assert {k for k in _delivered(s.receiver) if k[1] == LOST_GPU} == {("GPUFellOffBus", LOST_GPU, None)}


def test_healthy_gpus_raise_nothing_in_prometheus(health_stack: HealthStack) -> None:
    s = health_stack
    eventually(lambda: s.prometheus.query('ALERTS{alertname="GPUEccUncorrectable",alertstate="firing"}'),
               timeout=60, what="the fault alerts evaluated")
    healthy = "|".join(HEALTHY)
    assert s.prometheus.query(f'ALERTS{{gpu=~"{healthy}"}}') == []
    # the node publishes every GPU it expects (the lost one as down), so no node-level GPUFellOffBus
    assert s.prometheus.query('ALERTS{alertname="GPUFellOffBus",gpu=""}') == []
