"""The generated alertmanager.yml in the real Alertmanager, each receiver a local webhook: a page per action to
its receiver (rma to the ticket queue as well), job alerts to their owner by the owner label (two owners and
the default), the Watchdog's heartbeat repeated, a drained node's alerts held back, and a rack event (8 GPUs
across 2 nodes of one rack) in one notification.

The routes, grouping and inhibitions are `gpudash rules`' for a site config naming every kind of receiver;
only the timings of thresholds.yaml `alertmanager:` are shortened (1 s waits, a 2 s heartbeat). Last, a real
Prometheus evaluating the generated rules with the generated alert_relabel_configs: its Watchdog reaches the
heartbeat receiver, an exporter-down page carries its target's rack, and a node under `maintenance:` is held.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.e2e import gpudash_rules
from support.paths import ROOT
from support.waiting import eventually

from gpudash.repository import ALERTING_FILE, ALERTS_FILE, RECORDING_FILE, SCRAPE_FILE
from gpudash.stack.process import AlertmanagerProcess, PrometheusProcess, free_port
from gpudash.stack.servers import WebhookReceiver, prometheus_config

HOOKS = ("oncall", "tickets", "physics", "vision", "owners", "heartbeat")
SHORT = {"group_wait": "1s", "group_interval": "1s", "repeat_interval": "1h"}


def short_thresholds(path: Path) -> Path:
    data = yaml.safe_load((ROOT / "thresholds.yaml").read_text())
    data["alertmanager"] = {"critical": dict(SHORT), "digest": dict(SHORT), "job_owner": dict(SHORT),
                            "heartbeat": {"group_wait": "1s", "group_interval": "1s", "repeat_interval": "2s"}}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def site(path: Path, hooks: dict[str, WebhookReceiver]) -> Path:
    def hook(name: str) -> list[dict[str, str]]:
        return [{"name": name, "type": "webhook", "url": hooks[name].url}]

    path.write_text(yaml.safe_dump({
        "clusters": [{"name": "c1", "targets": [{"address": "n1:9400", "rack": "r1"}]}],
        "receivers": hook("oncall"),
        "rma_receivers": hook("tickets"),
        "heartbeat_receivers": hook("heartbeat"),
        "job_owners": {"label": "namespace", "default_receivers": hook("owners"),
                       "owners": [{"value": "physics", "receivers": hook("physics")},
                                  {"value": "vision", "receivers": hook("vision")}]},
    }, sort_keys=False))
    return path


@dataclass
class Stack:
    alertmanager: AlertmanagerProcess
    hooks: dict[str, WebhookReceiver]

    def firing(self, hook: str) -> list[dict[str, Any]]:
        return [n for n in self.hooks[hook].received() if n.get("status") == "firing"]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("am-routing")
    with ExitStack() as running:
        hooks = {name: running.enter_context(WebhookReceiver()) for name in HOOKS}
        files = gpudash_rules(tmp / "generated", site(tmp / "site.yml", hooks), short_thresholds(tmp / "t.yaml"))
        alertmanager = running.enter_context(AlertmanagerProcess(files["alertmanager/alertmanager.yml"]))
        alertmanager.post_alerts([{"labels": labels} for labels in ALERTS])
        yield Stack(alertmanager, hooks)


def gpu(alertname: str, severity: str, action: str, instance: str, index: int, rack: str,
        **more: str) -> dict[str, str]:
    return {"alertname": alertname, "severity": severity, "action": action, "cluster": "c1", "rack": rack,
            "instance": instance, "gpu": str(index), **more}


ALERTS = [
    # one page per action, each on a node of its own
    gpu("GPUXidError", "critical", "reset_gpu", "n1:9400", 0, "r1", xid="48"),
    gpu("GPUFellOffBus", "critical", "reboot_node", "n2:9400", 1, "r2"),
    gpu("GPUNVLinkErrors", "critical", "drain", "n3:9400", 2, "r3"),
    gpu("GPURowRemapFailure", "critical", "rma", "n4:9400", 3, "r4"),
    gpu("GPUThermalThrottling", "warning", "none", "n1:9400", 4, "r1"),  # the digest, never a page
    # the job's owner, by namespace: two listed owners and one that is not (the default)
    gpu("GPUJobStalled", "warning", "restart_job", "n5:9400", 0, "r5", namespace="physics", hpc_job="j-100"),
    gpu("GPUMemoryPressure", "critical", "none", "n5:9400", 1, "r5", namespace="vision", hpc_job="j-200",
        audience="job_owner"),
    gpu("GPUXidError", "warning", "restart_job", "n5:9400", 2, "r5", namespace="chem", hpc_job="j-300", xid="13"),
    # a rack event: 8 GPUs of two nodes of rack r9 at once
    *[gpu("GPUXidError", "critical", "reset_gpu", f"n{node}:9400", index, "r9", xid="74")
      for node in (7, 8) for index in range(4)],
    # a drained node: its own alert reaches nobody and holds back its GPU alerts
    {"alertname": "GPUNodeDrained", "severity": "info", "action": "none", "source": "slurm", "cluster": "c1",
     "instance": "n6:9400"},
    gpu("GPUXidError", "critical", "reset_gpu", "n6:9400", 0, "r6", xid="48"),
    gpu("GPUFellOffBus", "critical", "reboot_node", "n6:9400", 1, "r6"),
    {"alertname": "Watchdog", "severity": "info", "action": "none"},
]


def test_the_watchdog_beats_to_the_heartbeat_receiver_only_and_repeats(stack: Stack) -> None:
    beats = eventually(lambda: stack.firing("heartbeat") if len(stack.firing("heartbeat")) >= 2 else None,
                       timeout=60, what="two Watchdog heartbeats")
    assert {n["receiver"] for n in beats} == {"gpudash-heartbeat"}
    assert all([a["labels"]["alertname"] for a in n["alerts"]] == ["Watchdog"] for n in beats)
    for hook in HOOKS[:-1]:
        assert not [n for n in stack.firing(hook) if n["commonLabels"].get("alertname") == "Watchdog"], hook


def _pages(stack: Stack) -> dict[str, dict[str, Any]]:
    """On-call's notifications by action, once every action's has come."""
    def pages() -> dict[str, dict[str, Any]] | None:
        got = {n["groupLabels"]["action"]: n for n in stack.firing("oncall") if "action" in n["groupLabels"]
               and n["groupLabels"].get("rack") != "r9"}
        return got if {"reset_gpu", "reboot_node", "drain", "rma"} <= set(got) else None

    found: dict[str, dict[str, Any]] = eventually(pages, timeout=60, what="a page per action")
    return found


def test_a_page_per_action_reaches_on_call_and_rma_the_ticket_queue_too(stack: Stack) -> None:
    pages = _pages(stack)
    for action, node in (("reset_gpu", "n1"), ("reboot_node", "n2"), ("drain", "n3"), ("rma", "n4")):
        page = pages[action]
        assert page["receiver"] == "gpudash-critical"
        assert page["groupLabels"] == {"cluster": "c1", "rack": page["commonLabels"]["rack"], "action": action,
                                       "alertname": page["commonLabels"]["alertname"]}
        assert [a["labels"]["instance"] for a in page["alerts"]] == [f"{node}:9400"]
    (ticket,) = eventually(lambda: stack.firing("tickets"), timeout=30, what="the RMA ticket")
    assert ticket["receiver"] == "gpudash-rma"
    assert [a["labels"]["alertname"] for a in ticket["alerts"]] == ["GPURowRemapFailure"]
    # no warning pages: it waits in the digest (the same webhook here, another receiver)
    digest = eventually(lambda: [n for n in stack.firing("oncall") if n["receiver"] == "gpudash-warning-digest"],
                        timeout=30, what="the digest")
    assert [a["labels"]["alertname"] for n in digest for a in n["alerts"]] == ["GPUThermalThrottling"]
    assert not [n for n in stack.firing("oncall") if n["commonLabels"].get("alertname") == "GPUThermalThrottling"
                and n["receiver"] == "gpudash-critical"]


def test_job_alerts_reach_their_owner_by_namespace_and_the_rest_the_default(stack: Stack) -> None:
    for hook, receiver, alertname, job in (("physics", "gpudash-job-owner-physics", "GPUJobStalled", "j-100"),
                                           ("vision", "gpudash-job-owner-vision", "GPUMemoryPressure", "j-200"),
                                           ("owners", "gpudash-job-owner", "GPUXidError", "j-300")):
        (note,) = eventually(lambda h=hook: stack.firing(h), timeout=30, what=f"{hook}'s notification")
        assert note["receiver"] == receiver
        assert [(a["labels"]["alertname"], a["labels"]["hpc_job"]) for a in note["alerts"]] == [(alertname, job)]
    _pages(stack)  # by now every page has gone out: none of them was a job's
    paged = {a["labels"].get("hpc_job") for n in stack.firing("oncall") for a in n["alerts"]}
    assert paged == {None}, "a job alert reached on-call"


def test_a_rack_event_of_8_gpus_on_2_nodes_is_one_page(stack: Stack) -> None:
    rack = eventually(lambda: [n for n in stack.firing("oncall") if n["groupLabels"].get("rack") == "r9"],
                      timeout=30, what="the rack's page")
    # wait for two more heartbeats (each at least a group_interval later): nothing else comes for the rack
    seen = len(stack.firing("heartbeat"))
    eventually(lambda: len(stack.firing("heartbeat")) >= seen + 2, timeout=30, what="two more heartbeats")
    rack = [n for n in stack.firing("oncall") if n["groupLabels"].get("rack") == "r9"]
    assert len(rack) == 1
    (page,) = rack
    assert page["groupLabels"] == {"cluster": "c1", "rack": "r9", "alertname": "GPUXidError", "action": "reset_gpu"}
    assert sorted((a["labels"]["instance"], a["labels"]["gpu"]) for a in page["alerts"]) == [
        (f"n{node}:9400", str(index)) for node in (7, 8) for index in range(4)]


def test_a_drained_nodes_alerts_are_held_back_and_its_own_reaches_nobody(stack: Stack) -> None:
    def held() -> dict[str, Any] | None:
        on_node = {a["labels"]["alertname"]: a for a in stack.alertmanager.alerts()
                   if a["labels"].get("instance") == "n6:9400"}
        inhibited = [a for a in on_node.values() if a["status"]["inhibitedBy"]]
        return on_node if len(inhibited) == 2 else None

    on_node = eventually(held, timeout=30, what="the drained node's alerts inhibited")
    assert sorted(name for name, a in on_node.items() if a["status"]["state"] == "suppressed") == [
        "GPUFellOffBus", "GPUXidError"]
    assert on_node["GPUNodeDrained"]["status"]["inhibitedBy"] == []
    assert [r["name"] for r in on_node["GPUNodeDrained"]["receivers"]] == ["gpudash-null"]
    _pages(stack)  # every other page has gone out by now
    delivered = {a["labels"]["instance"] for hook in HOOKS for n in stack.firing(hook) for a in n["alerts"]
                 if "instance" in a["labels"]}
    assert "n6:9400" not in delivered
    # the other nodes' alerts of the same names were not held back
    assert {"n1:9400", "n2:9400"} <= delivered


# ------------------------------------------------------------------ a real Prometheus evaluating the rules

@dataclass
class Evaluated:
    down: str  # a GPU exporter target that is down, in rack r7
    held: str  # another, down too, of a node under maintenance
    heartbeat: WebhookReceiver
    oncall: WebhookReceiver
    alertmanager: AlertmanagerProcess


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Evaluated]:
    """Prometheus with the generated rules (GPU alerts and the alerting's own), scrape config and
    alert_relabel_configs, its two GPU exporter targets closed ports on two loopback addresses."""
    tmp = tmp_path_factory.mktemp("am-prometheus")
    down, held = f"127.0.0.2:{free_port()}", f"127.0.0.3:{free_port()}"
    thresholds = short_thresholds(tmp / "t.yaml")
    data = yaml.safe_load(thresholds.read_text())
    data["alerts"]["exporter_down"]["for"] = "1s"
    thresholds.write_text(yaml.safe_dump(data, sort_keys=False))
    with ExitStack() as running:
        heartbeat, oncall = (running.enter_context(WebhookReceiver()) for _ in range(2))
        (tmp / "site.yml").write_text(yaml.safe_dump({
            "scrape": {"interval": "1s", "timeout": "1s"},
            "clusters": [{"name": "c1", "targets": [{"address": down, "rack": "r7"},
                                                    {"address": held, "rack": "r8"}]}],
            "receivers": [{"name": "oncall", "type": "webhook", "url": oncall.url}],
            "heartbeat_receivers": [{"name": "deadman", "type": "webhook", "url": heartbeat.url}],
            "maintenance": ["127.0.0.3"],
        }))
        files = gpudash_rules(tmp / "generated", tmp / "site.yml", thresholds)
        alertmanager = running.enter_context(AlertmanagerProcess(files["alertmanager/alertmanager.yml"]))
        rules = {Path(rel).name: files[rel] for rel in (RECORDING_FILE, ALERTS_FILE, ALERTING_FILE)}
        snippet = yaml.safe_load(files[SCRAPE_FILE])
        config = yaml.safe_load(prometheus_config(snippet["scrape_configs"], rule_files=list(rules), interval="1s",
                                                  alertmanager=alertmanager.address))
        config["alerting"].update(snippet["alerting"])  # the alert_relabel_configs that add `rack`
        running.enter_context(PrometheusProcess(yaml.safe_dump(config), rules))
        yield Evaluated(down, held, heartbeat, oncall, alertmanager)


def test_prometheus_heartbeat_racks_and_maintenance_through_alertmanager(evaluated: Evaluated) -> None:
    e = evaluated
    beat = e.heartbeat.wait_for(lambda n: n.get("status") == "firing", timeout=90)
    assert beat is not None and beat["receiver"] == "gpudash-heartbeat"
    assert [a["labels"]["alertname"] for a in beat["alerts"]] == ["Watchdog"]

    page = e.oncall.wait_for(lambda n: n["commonLabels"].get("alertname") == "GPUExporterDown", timeout=90)
    assert page is not None and page["receiver"] == "gpudash-critical"
    # Prometheus added the target's rack to the alert; the page is grouped by it
    assert page["groupLabels"] == {"cluster": "c1", "rack": "r7", "alertname": "GPUExporterDown", "action": "none"}
    assert [a["labels"]["instance"] for a in page["alerts"]] == [e.down]

    def held_back() -> dict[str, Any] | None:
        alerts = {a["labels"]["alertname"]: a for a in e.alertmanager.alerts() if a["labels"].get("instance") == e.held}
        return alerts if alerts.get("GPUExporterDown", {}).get("status", {}).get("inhibitedBy") else None

    on_held = eventually(held_back, timeout=60, what="the maintenance node's alert held back")
    assert on_held["GPUNodeDrained"]["labels"]["source"] == "site"
    assert on_held["GPUExporterDown"]["labels"]["rack"] == "r8"
    # the next heartbeats came and went: the held node never reached on-call
    seen = len(e.heartbeat.received())
    eventually(lambda: len(e.heartbeat.received()) >= seen + 2, timeout=30, what="two more heartbeats")
    assert e.held not in {a["labels"].get("instance") for n in e.oncall.received() for a in n["alerts"]}
