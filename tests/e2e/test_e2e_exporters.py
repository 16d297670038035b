"""The dashboards against other exporters' real output, scraped by a real Prometheus.

- dcgm-exporter: every default counter (names, types and help from its default-counters.csv) on the
  per-GPU label sets of its real /metrics samples, one host with the old `Hostname` label (two H100s in
  Kubernetes mode, one allocated to a pod) and one with `hostname`.
- utkuozdemir/nvidia_gpu_exporter: its real output from an H100 under load, with the nvidia_smi profile.

Each is served as a static /metrics file. One Prometheus scrapes all three, each exporter in a cluster
of its own, with the recording rules `gpudash rules` renders for that exporter's profile.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from support.e2e import StaticMetrics, dcgm_shaped, gpudash_rules, site_yaml, statuses, unexplained
from support.paths import REFERENCE, ROOT
from support.site_query import site_promql
from support.slack import budget

from gpudash.catalog import Publisher, profile
from gpudash.check.judge import GroupResult, Status, run_check
from gpudash.check.queries import VARIABLE, built_dashboards, dashboard_groups, load_dashboards, rule_groups
from gpudash.config.loading import load_settings
from gpudash.infiniband import NIC_INFO
from gpudash.promql.alert_states import ALERT_STATES
from gpudash.promql.fabric_recordings import FABRIC_RECORDINGS
from gpudash.promql.ledger_recordings import LEDGER_RECORDINGS
from gpudash.promql.recordings import FLEET_LISTS, signals_in
from gpudash.promql.resets import RESET_RECORDINGS
from gpudash.promql.scanner import metric_names
from gpudash.repository import RECORDING_FILE
from gpudash.stack.process import PrometheusProcess
from gpudash.stack.servers import prometheus_config, scrape_jobs


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusProcess]:
    tmp = tmp_path_factory.mktemp("exporters-e2e")
    reference = REFERENCE
    smi_body = (reference / "nvidia_gpu_exporter" / "exposition-h100-under-load.metrics").read_bytes()
    with StaticMetrics(dcgm_shaped(reference, "Hostname")) as legacy, \
            StaticMetrics(dcgm_shaped(reference, "hostname")) as current, StaticMetrics(smi_body) as smi:
        dcgm_files = gpudash_rules(tmp / "dcgm", site_yaml(tmp / "dcgm.yml", "dcgm", [legacy.address, current.address]))
        smi_files = gpudash_rules(tmp / "smi", site_yaml(tmp / "smi.yml", "smi", [smi.address],
                                                         metric_profile="nvidia_smi"))
        # Same job name for both, as the rules expect; the cluster label keeps the two rule sets apart.
        jobs = scrape_jobs(dcgm_files)
        jobs[0]["static_configs"] += scrape_jobs(smi_files)[0]["static_configs"]
        rules = {"dcgm.rules.yml": dcgm_files[RECORDING_FILE],
                 "smi.rules.yml": _renamed_group(smi_files[RECORDING_FILE])}
        with PrometheusProcess(prometheus_config(jobs, rule_files=list(rules), interval="1s"), rules) as server:
            server.wait_for('cluster:gpu_count:count{cluster="dcgm"} == 3', timeout=budget(30))
            server.wait_for('cluster:gpu_count:count{cluster="smi"}', timeout=budget(30))
            server.wait_for("count(up == 1) == 3", timeout=budget(30))
            # recorded series a few evaluations old (one a second), as on any running server
            for cluster in ("dcgm", "smi"):
                server.wait_for(f'count_over_time(cluster:gpu_count:count{{cluster="{cluster}"}}[1m]) >= 3',
                                timeout=budget(30))
                # without an energy counter (nvidia-smi), energy adds the recorded power up over a subquery at
                # the site's scrape interval (15 s): it answers once the recording spans two steps
                server.wait_for(f'count_over_time(cluster:gpu_power_watts:sum{{cluster="{cluster}"}}[1m]) > 30',
                                timeout=budget(60))
            yield server


def _reads_optional(expr: str, metric_profile: str) -> bool:
    """A signal outside dcgm-exporter's defaults, or the fabric's node_exporter series (no RDMA port here)."""
    return (any(s.publisher is not Publisher.DCGM_DEFAULT for s in signals_in(expr, profile(metric_profile)))
            or any(name.startswith("node_infiniband_") or name == NIC_INFO for name in metric_names(expr)))


def _renamed_group(text: str) -> str:
    data = yaml.safe_load(text)
    for group in data["groups"]:
        group["name"] += "-nvidia-smi"
    return yaml.safe_dump(data, sort_keys=False)


def _check(url: str, dashboards: list[tuple[dict, str]], cluster: str, metric_profile: str) -> list[GroupResult]:
    groups = dashboard_groups(dashboards, scrape_interval_s=1, variables={"cluster": cluster}, range_s=1800)
    return run_check(url, groups, site_promql(metric_profile, 1))


def test_dcgm_exporter_output_both_host_label_spellings(prometheus: PrometheusProcess) -> None:
    hosts = {s["metric"].get("Hostname") or s["metric"].get("hostname")
             for s in prometheus.query('DCGM_FI_DEV_GPU_UTIL{cluster="dcgm"}')}
    assert hosts == {"computeinstance-e00c1p6dpy98xytphp", "testhost"}

    results = _check(prometheus.url, load_dashboards([ROOT / "dashboards" / "json"]), "dcgm", "dcgm")
    assert unexplained(results) == []
    by = statuses(results)
    assert len(by["OK"]) > 45
    # what dcgm-exporter does not publish by default is reported optional, by name
    optional = {item.split(" / ", 1)[1] for item in by.get("OPTIONAL", [])}
    assert {"Power per GPU", "SM clock", "Throttle reasons", "Memory per process"} <= optional
    # the panels built on default counters all have data, the $gpu variable lists all three GPUs
    gpu_var = next(r for g in results for r in g.results if r.query.kind == VARIABLE and r.query.item == "$gpu")
    assert gpu_var.status is Status.OK and gpu_var.series == 2  # gpu "0" and "1" (both hosts number from 0)


def test_dcgm_exporter_output_with_its_own_dashboard(prometheus: PrometheusProcess, reference: Path) -> None:
    results = _check(prometheus.url, load_dashboards([reference / "dcgm-exporter" / "dashboard-12239.json"]),
                     "dcgm", "dcgm")
    assert [f"{r.query.item}: {r.detail}" for g in results for r in g.results if r.status is not Status.OK] == []


def test_nvidia_smi_profile_against_nvidia_gpu_exporter_output(prometheus: PrometheusProcess) -> None:
    settings = load_settings(ROOT / "thresholds.yaml")
    dashboards = built_dashboards(settings, "nvidia_smi", ROOT / "dashboards")
    results = _check(prometheus.url, dashboards, "smi", "nvidia_smi")
    assert unexplained(results, "nvidia_smi") == []
    by = statuses(results)
    assert len(by["OK"]) > 35
    assert "FAILED" not in by and "EMPTY" not in by and "ERROR" not in by
    # the uuid-keyed $gpu variable lists the H100
    gpu_var = next(r for g in results for r in g.results if r.query.kind == VARIABLE and r.query.item == "$gpu")
    assert gpu_var.status is Status.OK and gpu_var.series == 1


def test_recording_rules_of_both_profiles_evaluate(prometheus: PrometheusProcess, tmp_path: Path) -> None:
    settings = load_settings(ROOT / "thresholds.yaml")
    assert settings.site.profile == "dcgm"
    for name, metric_profile in (("dcgm", "dcgm"), ("smi", "nvidia_smi")):
        site = site_yaml(tmp_path / f"{name}.yml", name, ["127.0.0.1:1"], metric_profile=metric_profile)
        files = gpudash_rules(tmp_path / name, site)
        path = tmp_path / name / RECORDING_FILE
        assert path.read_text() == files[RECORDING_FILE]
        results = run_check(prometheus.url, rule_groups([path]), site_promql(metric_profile, 1))
        rows = [r for g in results for r in g.results]
        assert len(rows) >= 12
        # every rule has data, but those on a signal this exporter does not publish, reported as optional, the
        # job-level ones (these exporters attribute no GPU to a job: no hpc_job label), and the fleet's recorded
        # lists, which hold only the GPUs passing their test: none here (or, comparing with 15 minutes ago,
        # none yet in this young Prometheus), the states the alerts share (likewise), the resets recorded by UUID,
        # which exist only when a GPU needs one, the health ledger's hourly points, which exist only where a
        # counter rose or a GPU stopped reporting, and the fabric's, which exist only where a node has RDMA ports
        lists = {rec.record for rec in (*FLEET_LISTS, *ALERT_STATES, *RESET_RECORDINGS, *LEDGER_RECORDINGS,
                                        *FABRIC_RECORDINGS)}
        assert [f"{r.query.item}: {r.status.value} {r.detail}" for r in rows if r.status is not Status.OK
                and not (r.status is Status.OPTIONAL and _reads_optional(r.query.expr, metric_profile))
                and r.status is not Status.NO_JOBS
                and not (r.query.item in lists and r.status in (Status.NOTHING_MATCHES, Status.NEEDS_HISTORY))] == []
