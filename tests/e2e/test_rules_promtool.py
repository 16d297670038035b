"""The generated rules and configs against the real tools: promtool, amtool and a running Alertmanager."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.paths import ROOT
from support.slack import budget, cpus
from support.waiting import eventually

from gpudash.config.durations import parse_duration
from gpudash.config.loading import load_settings
from gpudash.files import write_text_tree as write_files
from gpudash.repository import ALERTING_FILE, ALERTMANAGER_FILE, ALERTS_FILE, RECORDING_FILE, SCRAPE_FILE
from gpudash.rules.generated_files import MARK, render_all
from gpudash.stack.process import free_port

GENERATED = ROOT / "generated"
UNIT_TESTS = sorted((ROOT / "tests" / "rules").glob("*.yaml"))
# promtool cases for rules rendered with a site config: (test file under tests/rules/sites/, the site)
SITE_TESTS = {
    "kubeflow_job_label": {"jobs": {"label": "training_kubeflow_org_job_name"}},
    "maintenance": {"maintenance": ["gpu017", "gpu-b-3"]},
    "repeat_offender_days": {"scrape": {"interval": "5m"}},  # days of evaluations at an interval promtool affords
}


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed (make deps installs Prometheus and Alertmanager from Debian)")
    return path


def run(*args: str, cwd: Path | None = None, seconds: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, cwd=cwd, timeout=budget(seconds))


def render_site(tmp_path: Path, site: dict[str, Any]) -> Path:
    (tmp_path / "site.yaml").write_text(yaml.safe_dump(site))
    out = tmp_path / "out"
    write_files(out, render_all(load_settings(ROOT / "thresholds.yaml", tmp_path / "site.yaml")), MARK)
    return out


def test_generated_rules_pass_promtool_check() -> None:
    files = (ALERTS_FILE, RECORDING_FILE, ALERTING_FILE)
    result = run(tool("promtool"), "check", "rules", *(str(GENERATED / rel) for rel in files))
    assert result.returncode == 0, result.stdout + result.stderr
    for rel in files:
        count = sum(len(g["rules"]) for g in yaml.safe_load((GENERATED / rel).read_text())["groups"])
        assert f"{GENERATED / rel}\n  SUCCESS: {count} rules found" in result.stdout


def test_there_are_unit_tests_for_every_alert() -> None:
    text = "".join(p.read_text() for p in UNIT_TESTS)
    rules = [r for rel in (ALERTS_FILE, ALERTING_FILE)
             for g in yaml.safe_load((GENERATED / rel).read_text())["groups"] for r in g["rules"]]
    for alert in {r["alert"] for r in rules}:
        assert f"alertname: {alert}" in text, f"no promtool case fires {alert}"
    for benign in ("saw-tooth", "8-minute", "checkpoint", "97 %", "warm-up ramp"):
        assert benign in text


@pytest.fixture(scope="module")
def unit_test_runs(request: pytest.FixtureRequest) -> Iterator[dict[Path, Future[subprocess.CompletedProcess[str]]]]:
    """The selected files of tests/rules/ under promtool, as many at once as there are CPUs.

    A file costs up to ~20 s of CPU in one promtool thread (every rule evaluated at every step of each test's
    longest eval_time): side by side, the lot takes its CPU time divided by the CPUs. The costliest start
    first; each test reads its own file's result.
    """
    selected = {item.callspec.params["path"] for item in request.session.items
                if isinstance(item, pytest.Function) and item.originalname == "test_promtool_unit_tests"}
    promtool = tool("promtool")
    with ThreadPoolExecutor(max_workers=cpus()) as pool:
        # a safety net only: the longest files take minutes of CPU on a busy two-core machine
        yield {path: pool.submit(run, promtool, "test", "rules", path.name, cwd=path.parent, seconds=1200)
               for path in sorted(selected, key=evaluations, reverse=True)}


def evaluations(path: Path) -> float:
    """How many rule evaluations promtool makes for a test file: what its run costs."""
    spec = yaml.safe_load(path.read_text())
    step = parse_duration(str(spec.get("evaluation_interval", "1m"))).seconds
    return sum(max((parse_duration(str(case["eval_time"])).seconds for kind in ("alert_rule_test", "promql_expr_test")
                    for case in test.get(kind, [])), default=0) / step for test in spec["tests"])


@pytest.mark.timeout(1500)
@pytest.mark.parametrize("path", UNIT_TESTS, ids=[p.stem for p in UNIT_TESTS])
def test_promtool_unit_tests(path: Path, unit_test_runs: dict[Path, Future[subprocess.CompletedProcess[str]]]) -> None:
    result = unit_test_runs[path].result()
    assert result.returncode == 0, (result.stdout + result.stderr)[-6000:]


@pytest.mark.parametrize("name", sorted(SITE_TESTS))
def test_promtool_unit_tests_for_a_site(tmp_path: Path, name: str) -> None:
    out = render_site(tmp_path, SITE_TESTS[name])
    shutil.copy(ROOT / "tests" / "rules" / "sites" / f"{name}.yaml", out / "test.yaml")
    result = run(tool("promtool"), "test", "rules", "test.yaml", cwd=out)
    assert result.returncode == 0, (result.stdout + result.stderr)[-6000:]


def test_every_site_test_file_is_run() -> None:
    assert {p.stem for p in (ROOT / "tests" / "rules" / "sites").glob("*.yaml")} == set(SITE_TESTS)


def test_prometheus_accepts_the_scrape_snippet_with_the_rules(tmp_path: Path) -> None:
    config = {
        "global": {"scrape_interval": "15s", "evaluation_interval": "15s"},
        "rule_files": [str(GENERATED / rel) for rel in (RECORDING_FILE, ALERTS_FILE, ALERTING_FILE)],
        **yaml.safe_load((GENERATED / SCRAPE_FILE).read_text()),
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    result = run(tool("promtool"), "check", "config", str(tmp_path / "prometheus.yml"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_nvidia_smi_profile_rules_pass_promtool_check(tmp_path: Path) -> None:
    out = render_site(tmp_path, {"profile": "nvidia_smi"})
    result = run(tool("promtool"), "check", "rules", str(out / ALERTS_FILE), str(out / RECORDING_FILE))
    assert result.returncode == 0, result.stdout + result.stderr


def test_amtool_accepts_generated_and_every_receiver_kind(tmp_path: Path) -> None:
    assert run(tool("amtool"), "check-config", str(GENERATED / ALERTMANAGER_FILE)).returncode == 0
    out = render_site(tmp_path, {
        "clusters": [{"name": "east", "targets": [{"address": "a:9400"}]},
                     {"name": "west", "targets": [{"address": "b:9400"}]}],
        "receivers": [
            {"name": "pager", "type": "webhook", "url": "https://relay.example.org/page"},
            {"name": "team", "type": "slack", "api_url_env": "TEAM_SLACK_URL", "channel": "#gpu"},
            {"name": "mail", "type": "email", "to": "gpu@example.org", "from": "am@example.org",
             "smarthost": "smtp.example.org:587", "auth_username": "am", "auth_password_file": "/run/pw"},
        ],
    })
    result = run(tool("amtool"), "check-config", str(out / ALERTMANAGER_FILE))
    assert result.returncode == 0, result.stdout + result.stderr
    routed = run(tool("amtool"), "config", "routes", "test", "--config.file", str(out / ALERTMANAGER_FILE),
                 "cluster=west", "severity=warning", "alertname=GPUJobStalled")
    assert routed.stdout.strip() == "gpudash-warning-digest", routed.stdout + routed.stderr
    routed = run(tool("amtool"), "config", "routes", "test", "--config.file", str(out / ALERTMANAGER_FILE),
                 "cluster=elsewhere", "severity=critical", "alertname=GPUXidError")
    assert routed.stdout.strip() == "gpudash-critical", routed.stdout + routed.stderr
    for cluster in ("east", "elsewhere"):  # an idle job's info joins the digest, never a page
        routed = run(tool("amtool"), "config", "routes", "test", "--config.file", str(out / ALERTMANAGER_FILE),
                     f"cluster={cluster}", "severity=info", "alertname=GPUAllocatedIdle", "hpc_job=77001")
        assert routed.stdout.strip() == "gpudash-warning-digest", routed.stdout + routed.stderr


def test_amtool_routes_rma_alerts_to_the_rma_receivers_and_on_by_severity(tmp_path: Path) -> None:
    out = render_site(tmp_path, {
        "clusters": [{"name": "east", "targets": [{"address": "a:9400"}]}],
        "rma_receivers": [{"name": "tickets", "type": "webhook", "url": "https://tickets.example.org/gpu"}],
    })
    config = str(out / ALERTMANAGER_FILE)
    assert run(tool("amtool"), "check-config", config).returncode == 0

    def routed(*labels: str) -> list[str]:
        result = run(tool("amtool"), "config", "routes", "test", "--config.file", config, *labels)
        return result.stdout.strip().replace(",", " ").split()

    # `continue`: the ticket queue, then the page as for any critical alert
    assert routed("cluster=east", "severity=critical", "action=rma", "alertname=GPURowRemapFailure") == [
        "gpudash-rma", "gpudash-critical"]
    assert routed("cluster=east", "severity=critical", "action=reset_gpu", "alertname=GPUEccUncorrectable") == [
        "gpudash-critical"]
    # without rma_receivers: no RMA route, severity routing as for every alert
    plain = str(GENERATED / ALERTMANAGER_FILE)
    result = run(tool("amtool"), "config", "routes", "test", "--config.file", plain, "cluster=demo",
                 "severity=critical", "action=rma", "alertname=GPURowRemapFailure")
    assert result.stdout.strip() == "gpudash-critical", result.stdout + result.stderr


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    log = (tmp_path / "alertmanager.log").open("w")
    proc = subprocess.Popen(
        [tool("prometheus-alertmanager"), f"--config.file={GENERATED / ALERTMANAGER_FILE}",
         f"--storage.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
         "--cluster.listen-address="],
        stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        if proc.poll() is not None:
            pytest.fail(f"alertmanager exited: {(tmp_path / 'alertmanager.log').read_text()[-2000:]}")
        with urllib.request.urlopen(f"{url}/-/ready", timeout=budget(1)) as response:
            return response.status == 200

    try:
        eventually(ready, timeout=30, what="alertmanager to be ready", ignoring=(OSError,))
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=budget(10))
        log.close()


def post_alerts(url: str, alerts: list[dict[str, str]]) -> None:
    body = json.dumps([{"labels": labels} for labels in alerts]).encode()
    request = urllib.request.Request(f"{url}/api/v2/alerts", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=budget(5)) as response:
        assert response.status == 200


def inhibited(url: str) -> dict[tuple[str, str, str], bool]:
    def state() -> dict[tuple[str, str, str], bool] | None:
        with urllib.request.urlopen(f"{url}/api/v2/alerts", timeout=budget(5)) as response:
            alerts = json.load(response)
        found = {(a["labels"]["alertname"], a["labels"].get("gpu", ""), a["labels"]["severity"]):
                 bool(a["status"]["inhibitedBy"]) for a in alerts}
        return found if any(found.values()) else None

    # inhibition is computed on the next evaluation; wait until some alert shows it
    return eventually(state, timeout=10, what="an inhibited alert")


def test_alertmanager_inhibits_as_configured(alertmanager: str) -> None:
    node = {"cluster": "demo", "instance": "n1:9400"}
    other = {"cluster": "demo", "instance": "n2:9400"}
    job = {"hpc_job": "48213"}
    post_alerts(alertmanager, [
        {"alertname": "GPUExporterDown", "severity": "critical", **node},
        {"alertname": "GPUJobStalled", "severity": "warning", "gpu": "0", **node},
        {"alertname": "GPUExporterDown", "severity": "critical", "gpu": "3", **node},
        {"alertname": "GPUHighTemperature", "severity": "warning", "gpu": "1", **other},
        {"alertname": "GPUHighTemperature", "severity": "critical", "gpu": "1", **other},
        {"alertname": "GPUMemoryPressure", "severity": "warning", "gpu": "2", **other},
        {"alertname": "GPUThermalThrottling", "severity": "warning", "gpu": "4", **other},
        {"alertname": "GPUJobStraggler", "severity": "warning", "gpu": "4", **other, **job},
        {"alertname": "GPUJobStraggler", "severity": "warning", "gpu": "5", **other, **job},
        {"alertname": "GPUAllocatedIdle", "severity": "info", "cluster": "demo", "hpc_job": "77001"},
        {"alertname": "GPUFellOffBus", "severity": "critical", "action": "reboot_node", "gpu": "6", **other},
        {"alertname": "GPUXidError", "severity": "critical", "action": "reboot_node", "xid": "79", "gpu": "6", **other},
        {"alertname": "GPUExporterDown", "severity": "critical", "action": "none", "gpu": "6", **other},
        {"alertname": "GPUXidError", "severity": "warning", "action": "restart_job", "xid": "13", "gpu": "7",
         **other},
    ])
    state = inhibited(alertmanager)
    assert state == {
        ("GPUExporterDown", "", "critical"): False,  # the target itself
        ("GPUJobStalled", "0", "warning"): True,  # silenced by its node's exporter being down
        ("GPUExporterDown", "3", "critical"): True,  # one GPU silent: covered by the node-level alert
        ("GPUHighTemperature", "1", "warning"): True,  # critical of the same alert and GPU
        ("GPUHighTemperature", "1", "critical"): False,
        ("GPUMemoryPressure", "2", "warning"): False,  # other node, no critical: stays
        ("GPUThermalThrottling", "4", "warning"): False,
        ("GPUJobStraggler", "4", "warning"): True,  # its cause, throttling, is already alerting on that GPU
        ("GPUJobStraggler", "5", "warning"): False,  # no cause known on that GPU: stays
        ("GPUAllocatedIdle", "", "info"): False,  # a whole job: no node's alert silences it
        ("GPUFellOffBus", "6", "critical"): False,  # off the bus: it speaks for its GPU ...
        ("GPUXidError", "6", "critical"): True,  # ... and silences the rest of that GPU's alerts
        ("GPUExporterDown", "6", "critical"): True,
        ("GPUXidError", "7", "warning"): False,  # another GPU of the same node keeps its own
    }


def test_alertmanager_holds_back_a_drained_nodes_ports_not_an_exporter_down_nodes(alertmanager: str) -> None:
    port = {"cluster": "demo", "device": "mlx5_0", "port": "1", "severity": "critical", "action": "drain"}
    post_alerts(alertmanager, [
        {"alertname": "GPUNodeDrained", "severity": "info", "source": "slurm", "cluster": "demo",
         "instance": "n1:9400", "host": "n1"},
        # node_exporter scraped by IP: the rules gave its port alert the GPU node's host
        {"alertname": "GPUFabricPortFlapping", "instance": "10.0.0.1:9100", "host": "n1", **port},
        {"alertname": "GPUExporterDown", "severity": "critical", "cluster": "demo", "instance": "n2:9400"},
        {"alertname": "GPUFabricPortDown", "instance": "n2:9100", "host": "n2", **port},
        {"alertname": "GPUFabricPortDegraded", "instance": "n3:9100", "host": "n3", **port},
    ])

    def state() -> dict[tuple[str, str], bool] | None:
        with urllib.request.urlopen(f"{alertmanager}/api/v2/alerts", timeout=budget(5)) as response:
            alerts = json.load(response)
        found = {(a["labels"]["alertname"], a["labels"]["instance"]): bool(a["status"]["inhibitedBy"])
                 for a in alerts}
        return found if len(found) == 5 and any(found.values()) else None

    assert eventually(state, timeout=10, what="an inhibited alert") == {
        ("GPUNodeDrained", "n1:9400"): False,
        ("GPUFabricPortFlapping", "10.0.0.1:9100"): True,  # its node is drained
        ("GPUExporterDown", "n2:9400"): False,
        ("GPUFabricPortDown", "n2:9100"): False,  # node_exporter is another target: its port is a fault of its own
        ("GPUFabricPortDegraded", "n3:9100"): False,
    }


def test_amtool_routes_each_action_job_owner_heartbeat_and_drained_node(tmp_path: Path) -> None:
    out = render_site(tmp_path, {
        "clusters": [{"name": "east", "targets": [{"address": "a:9400", "rack": "r1"}]}],
        "rma_receivers": [{"name": "tickets", "type": "webhook", "url": "https://tickets.example.org/gpu"}],
        "heartbeat_receivers": [{"name": "deadman", "type": "webhook", "url": "https://hc.example.org/ping"}],
        "job_owners": {"label": "namespace", "owners": [
            {"value": "physics", "receivers": [{"name": "p", "type": "webhook", "url": "https://p.example.org/"}]},
            {"value": "vision", "receivers": [{"name": "v", "type": "webhook", "url": "https://v.example.org/"}]}]},
    })
    config = str(out / ALERTMANAGER_FILE)
    assert run(tool("amtool"), "check-config", config).returncode == 0

    def routed(*labels: str) -> list[str]:
        result = run(tool("amtool"), "config", "routes", "test", "--config.file", config, "cluster=east", *labels)
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout.strip().replace(",", " ").split()

    for action in ("reset_gpu", "reboot_node", "drain"):
        assert routed("severity=critical", f"action={action}", "alertname=GPUXidError") == ["gpudash-critical"]
    assert routed("severity=critical", "action=rma", "alertname=GPURowRemapFailure") == [
        "gpudash-rma", "gpudash-critical"]
    assert routed("severity=critical", "action=none", "alertname=GPUExporterDown") == ["gpudash-critical"]
    assert routed("severity=warning", "action=none", "alertname=GPUThermalThrottling") == ["gpudash-warning-digest"]
    assert routed("severity=warning", "action=restart_job", "namespace=physics") == ["gpudash-job-owner-physics"]
    assert routed("severity=critical", "action=none", "audience=job_owner", "namespace=vision") == [
        "gpudash-job-owner-vision"]
    assert routed("severity=warning", "action=restart_job", "namespace=chem") == ["gpudash-job-owner"]
    assert routed("alertname=Watchdog", "severity=info", "action=none") == ["gpudash-heartbeat"]
    assert routed("alertname=GPUNodeDrained", "severity=info", "action=none") == ["gpudash-null"]
    # without heartbeat_receivers, the Watchdog still never reaches on-call
    plain = run(tool("amtool"), "config", "routes", "test", "--config.file", str(GENERATED / ALERTMANAGER_FILE),
                "alertname=Watchdog", "severity=info", "action=none")
    assert plain.stdout.strip() == "gpudash-null", plain.stdout + plain.stderr
