"""`gpudash doctor` against real Prometheus and Alertmanager, a simulated exporter and the Grafana stand-in:
a healthy stack first, then one broken link at a time, each asserting the line doctor prints for it.

One exporter and one Alertmanager are shared by the module, and every Prometheus (one healthy, one per link it
breaks) is started at once: each takes seconds to its first scrape, and these overlap. Only the node that loses
a GPU gets an exporter and a Prometheus of its own, as its fault is timed from its start.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from grafana_standin import StandIn
from support.cli import Ran, gpudash
from support.e2e import StaticMetrics, dcgm_shaped, gpudash_rules, site_yaml
from support.paths import ROOT
from support.ports import on_free_ports
from support.waiting import eventually

from gpudash.config.durations import parse_duration
from gpudash.repository import ALERTMANAGER_FILE
from gpudash.stack.process import AlertmanagerProcess, PrometheusProcess, free_port
from gpudash.stack.servers import ExporterProcess, WebhookReceiver, prometheus_config, rule_files, scrape_jobs

CLUSTER = "doctor"
LINKS = ("exporter", "targets", "labels", "rules", "alerting", "grafana", "physics")
GRAFANA_ENV = ("GRAFANA_URL", "GRAFANA_TOKEN", "GRAFANA_USER", "GRAFANA_PASSWORD", "PROMETHEUS_URL",
               "ALERTMANAGER_URL", "GPUDASH_SITE", "GPUDASH_THRESHOLDS")


class Stack:
    def __init__(self, tmp: Path, exporter: ExporterProcess, hook: WebhookReceiver) -> None:
        self.tmp = tmp
        self.exporter = exporter
        self.site = site_yaml(tmp / "gpudash.yaml", CLUSTER, [exporter.address], webhook=hook.url)
        self.files = gpudash_rules(tmp / "generated", self.site)

    def thresholds(self, name: str, changes: dict[tuple[str, ...], Any]) -> Path:
        data = yaml.safe_load((ROOT / "thresholds.yaml").read_text())
        for path, value in changes.items():
            node = data
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = value
        target = self.tmp / f"{name}.thresholds.yaml"
        target.write_text(yaml.safe_dump(data, sort_keys=False))
        return target

    def rendered(self, thresholds: Path) -> dict[str, str]:
        return gpudash_rules(self.tmp / f"generated-{thresholds.stem}", self.site, thresholds)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with WebhookReceiver() as hook, ExporterProcess(["--simulate", "2", "--seed", "7"]) as exporter:
        yield Stack(tmp_path_factory.mktemp("doctor"), exporter, hook)


@pytest.fixture(scope="module")
def alertmanager(stack: Stack) -> Iterator[AlertmanagerProcess]:
    with AlertmanagerProcess(stack.files[ALERTMANAGER_FILE]) as am:
        yield am


def prometheus_setup(stack: Stack, alertmanager: AlertmanagerProcess | None, *, files: dict[str, str] | None = None,
                     rules: bool = True, jobs: Sequence[dict[str, Any]] | None = None) -> tuple[str, dict[str, str]]:
    """prometheus.yml and its rule files: the exporter scraped at 1 s, the generated rules unless `rules` is off."""
    files = files or stack.files
    loaded = rule_files(files) if rules else {}
    config = prometheus_config(jobs if jobs is not None else scrape_jobs(files), rule_files=list(loaded),
                               interval="1s", alertmanager=alertmanager.address if alertmanager else None)
    return config, loaded


def wait_ready(stack: Stack, prom: PrometheusProcess, rules: bool) -> None:
    """Until the exporter has been scraped with every field and (with rules) each group evaluated once, but the
    hourly one, whose first evaluation comes at its slot in the hour: up to an hour after Prometheus starts."""
    prom.wait_for(f'up{{instance="{stack.exporter.address}"}} == 1')
    prom.wait_for("gpudash_exporter_fields_pending == 0")
    if rules:
        eventually(lambda: all(not g.get("lastEvaluation", "0001").startswith("0001")
                               for g in prom.get_json("/api/v1/rules")["data"]["groups"] if g["interval"] < 3600),
                   what="every rule group evaluated once")


@dataclass(frozen=True)
class Servers:
    prometheus: dict[str, PrometheusProcess]  # by the link it breaks ("healthy" breaks none)
    dead: str  # the target whose exporter never started
    patient: Path  # thresholds with a 2 h `for:` on GPUExporterDown, which the dead target's Prometheus runs


@pytest.fixture(scope="module")
def servers(stack: Stack, alertmanager: AlertmanagerProcess) -> Iterator[Servers]:
    """Every Prometheus the tests ask, started together: each takes seconds to its first scrape, and these overlap."""
    older = stack.thresholds("older", {("temperature", "gpu_warning_celsius"): 75,
                                       ("alerts", "temperature", "for"): "10m"})
    patient = stack.thresholds("patient", {("alerts", "exporter_down", "for"): "2h",
                                           ("alerts", "exporter_down", "lookback"): "3h"})
    patient_files = stack.rendered(patient)
    dead = f"127.0.0.1:{free_port()}"
    with_dead = scrape_jobs(patient_files)
    with_dead[0]["static_configs"].append({"targets": [dead], "labels": {"cluster": CLUSTER, "rack": "rack-2"}})
    unlabelled = scrape_jobs(stack.files)
    for static in unlabelled[0]["static_configs"]:
        static.pop("labels", None)
    setups = {
        "healthy": prometheus_setup(stack, alertmanager),
        "no rules": prometheus_setup(stack, alertmanager, rules=False),
        "older rules": prometheus_setup(stack, alertmanager, files=stack.rendered(older)),
        "no alerting": prometheus_setup(stack, None),
        "target down": prometheus_setup(stack, alertmanager, files=patient_files, jobs=with_dead),
        "no cluster": prometheus_setup(stack, alertmanager, jobs=unlabelled),
    }
    with ExitStack() as started:
        running = {name: started.enter_context(PrometheusProcess(config, loaded))
                   for name, (config, loaded) in setups.items()}
        for name, prom in running.items():
            wait_ready(stack, prom, rules=bool(setups[name][1]))
        running["target down"].wait_for('ALERTS{alertname="GPUExporterDown",alertstate="pending"}')
        yield Servers(running, dead, patient)


def doctor(stack: Stack, *args: str, thresholds: Path | None = None, env: dict[str, str] | None = None) -> Ran:
    extra = ["--thresholds", str(thresholds)] if thresholds else []
    quiet: dict[str, str | None] = {name: None for name in GRAFANA_ENV}
    ran = gpudash("doctor", "--site", str(stack.site), *extra, *args, cwd=ROOT, env={**quiet, **(env or {})})
    print(ran.out)  # the lines docs/doctor.md shows (pytest -s)
    return ran


def lines(ran: Ran, verdict: str, link: str) -> list[str]:
    return [line for line in ran.out.splitlines() if re.match(rf"{re.escape(verdict)}\s+{link}\s", line)]


def test_a_healthy_stack_holds_at_every_link(stack: Stack, alertmanager: AlertmanagerProcess,
                                             servers: Servers) -> None:
    healthy = servers.prometheus["healthy"]
    with StandIn("11.6.0") as grafana:
        env = {"GRAFANA_URL": grafana.url, "GRAFANA_TOKEN": grafana.token}
        done = gpudash("provision", "--prometheus-url", healthy.url, "--no-files", "--site", str(stack.site),
                       cwd=ROOT, env=env)
        assert done.code == 0, done.out + done.err
        ran = doctor(stack, "--prometheus", healthy.url, "--alertmanager", alertmanager.url, env=env)
    assert ran.code == 0, ran.out + ran.err
    assert not [line for line in ran.out.splitlines() if line.startswith("FAIL")]
    for link in LINKS:
        assert lines(ran, "ok", link), f"no ok line for {link}:\n{ran.out}"
    assert f"ok    exporter  {stack.exporter.address}: gpudash exporter: 2 GPUs (0, 1)" in ran.out
    # an exporter that saw no XID has no last-XID time yet: nothing is missing
    assert f"ok    exporter  {stack.exporter.address}: every field the dashboards and rules read" in ran.out, ran.out
    boards = len(list((ROOT / "dashboards" / "json").glob("*.json")))
    assert f"ok    grafana   Grafana 11.6.0: {boards} of {boards} dashboards as generated" in ran.out
    assert ran.out.rstrip().endswith("every link checked holds")


def test_no_rule_files_loaded(stack: Stack, servers: Servers) -> None:
    prom = servers.prometheus["no rules"]
    ran = doctor(stack, "--prometheus", prom.url)
    assert ran.code == 1
    assert lines(ran, "FAIL", "rules") == [
        "FAIL  rules     rule groups: none of gpudash's rule groups is loaded (gpudash-gpu-alerts, "
        "gpudash-gpu-health-alerts, gpudash-gpu-recording, gpudash-gpu-job-states and 3 more); it has no rules at "
        "all; why: prometheus.yml has no "
        "rule_files naming the generated files, or they are not on its host; fix: copy "
        "generated/prometheus/{gpu-alerts.rules.yml, gpu-recording.rules.yml} beside prometheus.yml, add "
        f"rule_files: [gpu-alerts.rules.yml, gpu-recording.rules.yml], then curl -X POST {prom.url}/-/reload "
        "(needs --web.enable-lifecycle) or restart Prometheus"]
    assert "doctor: 1 failed (links: rules)" in ran.err


def test_rules_from_an_older_thresholds_file(stack: Stack, servers: Servers) -> None:
    ran = doctor(stack, "--prometheus", servers.prometheus["older rules"].url)
    assert ran.code == 1
    # the warning level is read by the recording of the GPUs near their limit, the for: by the alerts
    alerts, recording = lines(ran, "FAIL", "rules")
    assert alerts.startswith("FAIL  rules     gpudash-gpu-alerts: differs from `gpudash rules` in 5 rules: "
                             "GPUHighTemperature (none, gpu, warning): for 10m loaded, 3m generated"), alerts
    assert "why: Prometheus holds rule files rendered from another thresholds.yaml" in alerts
    assert recording.startswith("FAIL  rules     gpudash-gpu-health-states: differs from `gpudash rules` in 1 rule: "
                                "cluster_instance_gpu:gpu_temperature_celsius:near_limit: expr `max by (cluster, "
                                "instance, gpu, UUID, hostname) (quantile_over_time(0.5, DCGM_FI_DEV_GPU_TEMP[2m]))"
                                ), recording


def test_no_alerting_section(stack: Stack, servers: Servers) -> None:
    prom = servers.prometheus["no alerting"]
    ran = doctor(stack, "--prometheus", prom.url)
    assert ran.code == 1
    assert lines(ran, "FAIL", "alerting") == [
        "FAIL  alerting  prometheus: Prometheus has no active Alertmanager: rules fire, nobody is told; why: "
        "prometheus.yml has no alerting.alertmanagers section, or its targets cannot be resolved; fix: "
        "prometheus.yml: alerting: {alertmanagers: [{static_configs: [{targets: ['ALERTMANAGER:9093']}]}]}, "
        f"then curl -X POST {prom.url}/-/reload (needs --web.enable-lifecycle) or restart Prometheus"]


def test_a_target_down(stack: Stack, servers: Servers) -> None:
    dead = servers.dead
    ran = doctor(stack, "--prometheus", servers.prometheus["target down"].url, thresholds=servers.patient)
    assert ran.code == 1
    assert lines(ran, "FAIL", "targets") == [
        f'FAIL  targets   {dead}: target DOWN: Get "http://{dead}/metrics": dial tcp {dead}: connect: connection '
        "refused; why: the exporter is not running there, the address or port is wrong, or a firewall stops "
        f"Prometheus; fix: `curl http://{dead}/metrics` from the Prometheus host; fix the target address in the "
        "scrape config"]
    assert "ok    targets   job gpu-exporter: 1 of 2 targets up" in ran.out
    # Prometheus names its targets, and the exporter that does not answer is the first broken link.
    assert f"FAIL  exporter  {dead}: cannot read /metrics: connection refused" in ran.out


def test_an_alert_pending_with_the_time_left(stack: Stack, servers: Servers) -> None:
    dead = servers.dead
    ran = doctor(stack, "--prometheus", servers.prometheus["target down"].url, thresholds=servers.patient)
    (line,) = [line for line in lines(ran, "hint", "rules") if "GPUExporterDown" in line]
    match = re.fullmatch(rf"hint  rules     GPUExporterDown: pending for (\w+) \(cluster={CLUSTER}, "
                         rf"instance={re.escape(dead)}\): fires in (\w+) if it holds \(for: 2h\); why: an alert "
                         r"fires only after its condition has held for its whole `for:`", line)
    assert match, line
    held, left = (0 if text == "0s" else parse_duration(text).seconds for text in match.groups())
    assert left > 7000 and held + left in (7199, 7200, 7201)  # held + left = the 2 h `for:` (to the second)


def test_series_without_the_cluster_label(stack: Stack, servers: Servers) -> None:
    ran = doctor(stack, "--prometheus", servers.prometheus["no cluster"].url)
    assert ran.code == 1
    assert lines(ran, "FAIL", "labels") == [
            "FAIL  labels    DCGM_FI_DEV_GPU_UTIL: label 'cluster' is on no series; it has "
            "DCGM_FI_DRIVER_VERSION, UUID, device, gpu, hostname, instance, job, modelName and 1 more; why: the "
            "dashboards and rules select on 'cluster': their panels show No data; fix: give each scrape target "
            "`labels: {cluster: NAME}` (the scrape config `gpudash rules` renders does), or set "
            "global.external_labels.cluster on each cluster's Prometheus"]


def test_a_data_source_uid_grafana_does_not_have(stack: Stack, servers: Servers) -> None:
    healthy = servers.prometheus["healthy"]
    with StandIn("11.6.0") as grafana:
        ran = doctor(stack, "--prometheus", healthy.url, "--grafana", grafana.url,
                     env={"GRAFANA_TOKEN": grafana.token})
    assert ran.code == 1
    assert lines(ran, "FAIL", "grafana")[0] == (
        "FAIL  grafana   data source gpudash-prometheus: Grafana has no data source with uid 'gpudash-prometheus'; "
        "it has no Prometheus data source; why: the dashboards' queries go to a data source that is not there: "
        f"every panel errors; fix: `gpudash provision --prometheus-url {healthy.url}` creates it")
    assert grafana.token not in ran.out + ran.err


@pytest.mark.parametrize("host_label", ["hostname", "Hostname"])
def test_a_dcgm_exporter_target(stack: Stack, reference: Path, host_label: str) -> None:
    with StaticMetrics(dcgm_shaped(reference, host_label)) as dcgm:
        ran = doctor(stack, "--exporter", dcgm.address, "--format", "json")
    assert ran.code == 0, ran.out + ran.err
    found = json.loads(ran.out)["findings"]
    assert [(f["verdict"], f["what"].split(":")[0]) for f in found] == [
        # the health alerts' fields (ECC, max operating temperatures, NVLink, remap pending) are optional too;
        # DCGM_EXP_XID_ERRORS_COUNT is not among them: the fleet counts XIDs from the default last-XID gauge
        ("ok", "dcgm-exporter"), ("hint", "missing optional fields DCGM_FI_DEV_CLOCKS_EVENT_REASONS, "
                                          "DCGM_EXP_CLOCK_EVENTS_COUNT, DCGM_FI_DEV_ECC_DBE_AGG_TOTAL, "
                                          "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL and 18 more")]
    assert "dcgm-exporter's counters file" in found[1]["fix"]


def test_a_node_that_lost_a_gpu(stack: Stack, alertmanager: AlertmanagerProcess) -> None:
    @contextmanager
    def node(port: int) -> Iterator[tuple[str, PrometheusProcess]]:
        # Prometheus first, on the address the exporter will take: its first scrapes (a few seconds after it
        # starts) see both GPUs, then one is lost.
        address = f"127.0.0.1:{port}"
        jobs = scrape_jobs(stack.files)
        jobs[0]["static_configs"] = [{"targets": [address], "labels": {"cluster": CLUSTER, "rack": "rack-1"}}]
        config = prometheus_config(jobs, interval="1s", alertmanager=alertmanager.address)
        with PrometheusProcess(config) as prom, ExporterProcess(["--simulate", "2", "--seed", "7", "--fault",
                                                                 "1=lost@8s+1h"], port=port):
            yield address, prom

    with on_free_ports(1, node) as (address, prom):
        prom.wait_for("count(DCGM_FI_DEV_GPU_UTIL) == 2")
        prom.wait_for("count(DCGM_FI_DEV_GPU_UTIL) == 1")
        ran = doctor(stack, "--prometheus", prom.url)
    assert ran.code == 1
    assert f"FAIL  exporter  {address}: NVML cannot read GPU 1 (gpudash_gpu_up 0)" in ran.out
    assert lines(ran, "FAIL", "physics") == [
        f"FAIL  physics   {address} ({CLUSTER}): 1 GPU reporting now, 2 within the last 1h; why: a GPU fell off "
        "the bus (XID 79), or NVML lost it; fix: `nvidia-smi` and `dmesg | grep -i xid` on the node; drain it, reset "
        "the GPU or reboot"]


def test_credentials_in_urls_are_never_printed(stack: Stack, alertmanager: AlertmanagerProcess,
                                               servers: Servers) -> None:
    def with_login(url: str) -> str:
        return url.replace("http://", "http://admin:s3cret-pw@")

    ran = doctor(stack, "--prometheus", with_login(servers.prometheus["no alerting"].url), "--alertmanager",
                 with_login(alertmanager.url), "--exporter", with_login(stack.exporter.url), "--format", "json")
    assert ran.code == 1  # the missing alerting section, named without the password
    assert "s3cret" not in ran.out + ran.err and "admin" not in ran.out + ran.err
    assert any(f["link"] == "alerting" and f["verdict"] == "FAIL" for f in json.loads(ran.out)["findings"])
