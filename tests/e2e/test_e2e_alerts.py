"""An injected fault goes all the way: simulated leak -> rule fires in Prometheus -> Alertmanager delivers it
to a webhook receiver, grouped, with the warning inhibited by the critical alert.

The rules and alertmanager.yml come from `gpudash rules --thresholds T --site S --out D`, with a thresholds
file whose levels and windows are short enough for a test (memory levels 20 % / 30 %, a 6 s growth
window, `for: 2s`); the routes, grouping and inhibitions are the generated ones, unchanged.
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

from gpudash.stack.process import AlertmanagerProcess, PrometheusProcess
from gpudash.stack.servers import ExporterProcess, WebhookReceiver, prometheus_config, rule_files, scrape_jobs

LEAK_START_S, LEAK_TO_OOM_S = 4, 40
# GPUs 0 and 1 leak together (one notification should carry both); 2 and 3 stay quiet.
EXPORTER_ARGS = ["--simulate", "4", "--seed", "5", *[a for i in range(4) for a in ("--workload", f"{i}=idle")],
                 *[a for i in (0, 1) for a in ("--fault", f"{i}=leak:{LEAK_TO_OOM_S}s@{LEAK_START_S}s")]]


def short_thresholds(path: Path) -> Path:
    data = yaml.safe_load((ROOT / "thresholds.yaml").read_text())
    data["memory"].update(warning_ratio=0.2, critical_ratio=0.3)
    data["alerts"]["memory_pressure"].update({"growth_window": "6s", "for": "2s"})
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@dataclass
class AlertStack:
    prometheus: PrometheusProcess
    alertmanager: AlertmanagerProcess
    receiver: WebhookReceiver
    exporter: ExporterProcess


@pytest.fixture(scope="module")
def alert_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AlertStack]:
    with on_free_ports(1, partial(_alert_stack, tmp_path_factory.mktemp("alerts-e2e"))) as stack:
        yield stack


@contextmanager
def _alert_stack(tmp: Path, port: int) -> Iterator[AlertStack]:
    """Prometheus before the exporter, which takes `port`."""
    with WebhookReceiver() as receiver:
        site = site_yaml(tmp / "site.yml", "e2e", [f"127.0.0.1:{port}"], webhook=receiver.url)
        files = gpudash_rules(tmp / "generated", site, short_thresholds(tmp / "thresholds.yaml"))
        rules = rule_files(files)
        with AlertmanagerProcess(files["alertmanager/alertmanager.yml"]) as alertmanager:
            config = prometheus_config(scrape_jobs(files), rule_files=list(rules), interval="1s",
                                       alertmanager=alertmanager.address)
            with PrometheusProcess(config, rules) as prometheus, ExporterProcess(EXPORTER_ARGS, port=port) as exporter:
                yield AlertStack(prometheus, alertmanager, receiver, exporter)


def _critical_pressure(receiver: WebhookReceiver) -> list[dict[str, Any]]:
    return [n for n in receiver.received()
            if n.get("status") == "firing" and n["groupLabels"].get("alertname") == "GPUMemoryPressure"
            and n["commonLabels"].get("severity") == "critical"]


def test_leak_fires_in_prometheus_and_reaches_the_webhook_grouped_with_the_warning_inhibited(
        alert_stack: AlertStack) -> None:
    s = alert_stack
    # 1. the rule fires in Prometheus, for the two leaking GPUs only
    firing = eventually(lambda: s.prometheus.query(
        'ALERTS{alertname="GPUMemoryPressure",severity="critical",alertstate="firing"}'), timeout=60,
        what="GPUMemoryPressure critical firing in Prometheus")
    assert sorted(a["metric"]["gpu"] for a in firing) == ["0", "1"]

    # 2. Alertmanager delivers one notification carrying both GPUs: a page groups by cluster, rack, alertname and
    # action (this Prometheus adds no rack: the group has none)
    (notification,) = eventually(lambda: _critical_pressure(s.receiver), timeout=40,
                                 what="the critical notification at the webhook")
    assert notification["receiver"] == "gpudash-critical"
    assert notification["groupLabels"] == {"alertname": "GPUMemoryPressure", "cluster": "e2e", "action": "none"}
    assert {a["labels"]["instance"] for a in notification["alerts"]} == {s.exporter.address}
    assert sorted(a["labels"]["gpu"] for a in notification["alerts"]) == ["0", "1"]
    for alert in notification["alerts"]:
        assert alert["status"] == "firing"
        assert alert["annotations"]["runbook"] == "docs/alerts.md#gpumemorypressure"
        assert alert["labels"]["action"] == "none"
        assert "Framebuffer memory over 30%" in alert["annotations"]["summary"]
    # delivered while the job is still leaking, before its OOM: both GPUs' memory still grows
    growing = s.prometheus.query('deriv(DCGM_FI_DEV_FB_USED{gpu=~"0|1"}[5s]) > 0')
    assert sorted(g["metric"]["gpu"] for g in growing) == ["0", "1"]

    # 3. the warning of the same alert on the same GPUs is held back by the critical one (inhibition)
    held = {a["labels"]["gpu"]: a for a in s.alertmanager.alerts()
            if a["labels"]["alertname"] == "GPUMemoryPressure" and a["labels"]["severity"] == "warning"}
    assert sorted(held) == ["0", "1"]
    for alert in held.values():
        assert alert["status"]["state"] == "suppressed"
        assert alert["status"]["inhibitedBy"], alert["status"]
    assert not [n for n in s.receiver.received() if n["commonLabels"].get("severity") == "warning"]
    # and the quiet GPUs never alerted
    assert not [a for a in s.alertmanager.alerts() if a["labels"].get("gpu") in ("2", "3")
                and a["labels"]["alertname"] == "GPUMemoryPressure"]
