"""An injected fault goes all the way: simulated leak -> rule fires in Prometheus -> Alertmanager delivers it
to a webhook receiver, grouped, as a warning for the job's owner: memory pressure never pages on-call.

The rules and alertmanager.yml come from `gpudash rules --thresholds T --site S --out D`, with a thresholds
file whose levels and windows are short enough for a test (memory levels 20 % / 30 %, a 6 s growth
window, `for: 2s`, the digest's timing in seconds); the routes, grouping and inhibitions are the generated
ones, unchanged.
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
    data["alertmanager"]["digest"].update({"group_wait": "1s", "group_interval": "2s"})
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


def _pressure(receiver: WebhookReceiver) -> list[dict[str, Any]]:
    return [n for n in receiver.received() if n.get("status") == "firing"
            and any(a["labels"]["alertname"] == "GPUMemoryPressure" for a in n["alerts"])]


def test_leak_fires_in_prometheus_and_reaches_the_webhook_as_the_jobs_never_as_a_page(alert_stack: AlertStack) -> None:
    s = alert_stack
    # 1. the rule fires in Prometheus at the critical level, for the two leaking GPUs only, as a warning to the
    #    job's owner: the job's memory, not on-call's
    firing = eventually(lambda: s.prometheus.query(
        'ALERTS{alertname="GPUMemoryPressure",level="critical",alertstate="firing"}'), timeout=60,
        what="GPUMemoryPressure over the critical level firing in Prometheus")
    assert sorted(a["metric"]["gpu"] for a in firing) == ["0", "1"]
    for alert in firing:
        assert alert["metric"]["severity"] == "warning" and alert["metric"]["audience"] == "job_owner"

    # 2. Alertmanager delivers them grouped into one notification, never through the critical (paging) receiver
    def both_gpus() -> list[dict[str, Any]]:
        return [n for n in _pressure(s.receiver)
                if {a["labels"]["gpu"] for a in n["alerts"] if a["labels"]["level"] == "critical"} == {"0", "1"}]

    notification = eventually(both_gpus, timeout=40, what="the memory-pressure notification at the webhook")[0]
    assert notification["receiver"] == "gpudash-job-owner"  # the default owner: the site lists none
    for alert in notification["alerts"]:
        # the group also carries the warning level's alerts, which may already have resolved
        assert alert["status"] == "firing" or alert["labels"]["level"] == "warning"
        assert alert["annotations"]["runbook"] == "docs/alerts.md#gpumemorypressure"
        assert alert["labels"]["action"] == "none" and alert["labels"]["severity"] == "warning"
    assert "Framebuffer memory over 30%" in " ".join(a["annotations"]["summary"] for a in notification["alerts"])
    # delivered while the job leaks (the owner route waits its group_wait first): both GPUs grew within 2 minutes
    growing = s.prometheus.query('deriv(DCGM_FI_DEV_FB_USED{gpu=~"0|1"}[2m]) > 0')
    assert sorted(g["metric"]["gpu"] for g in growing) == ["0", "1"]

    # 3. nothing paged, and the quiet GPUs never alerted
    assert not [n for n in s.receiver.received() if n["receiver"] == "gpudash-critical"
                and any(a["labels"]["alertname"] == "GPUMemoryPressure" for a in n["alerts"])]
    assert not s.prometheus.query('ALERTS{alertname="GPUMemoryPressure",severity="critical"}')
    assert not [a for a in s.alertmanager.alerts() if a["labels"].get("gpu") in ("2", "3")
                and a["labels"]["alertname"] == "GPUMemoryPressure"]
