"""End to end: a real Prometheus scrapes the simulated exporter and dcgm-exporter's own dashboard works."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.slack import budget
from support.waiting import eventually

from gpudash.exporter.collectors import all_signals
from gpudash.exporter.service import Exporter
from gpudash.exporter.sim.fleet import fleet_from_specs
from gpudash.exporter.sim.simulated import SimulatedSource
from gpudash.stack.process import PrometheusProcess

GPUS = 8


def _dashboard_queries(dashboard: dict[str, object]) -> list[str]:
    """Every panel target of a Grafana dashboard, with $instance and $gpu as 'match anything'."""
    found: list[str] = []

    def walk(panels: object) -> None:
        for panel in panels if isinstance(panels, list) else []:
            for target in panel.get("targets", []):
                if target.get("expr"):
                    found.append(target["expr"].replace("$instance", ".*").replace("$gpu", ".*"))
            walk(panel.get("panels", []))

    walk(dashboard["panels"])
    return found


@pytest.fixture(scope="module")
def stack() -> Iterator[tuple[Exporter, PrometheusProcess]]:
    fleet = fleet_from_specs(GPUS, seed=11, workloads=["7=idle"],
                             faults=["3=lost@0", "5=nvlink-crc-storm:300@0", "6=dbe-burst@0"])
    with Exporter(SimulatedSource(fleet), collectors=all_signals(nvlink_per_link=True), interval=0.5,
                  slow_interval=1.0) as exporter:
        config = (
            "global:\n  scrape_interval: 1s\n"
            "scrape_configs:\n  - job_name: gpu\n"
            f"    static_configs:\n      - targets: ['127.0.0.1:{exporter.port}']\n"
        )
        with PrometheusProcess(config) as prometheus:
            prometheus.wait_for('up{job="gpu"} == 1')
            prometheus.wait_for("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")
            yield exporter, prometheus


def test_every_query_of_dcgm_exporters_dashboard_returns_data(
    stack: tuple[Exporter, PrometheusProcess], reference: Path
) -> None:
    _, prometheus = stack
    dashboard = json.loads((reference / "dcgm-exporter" / "dashboard-12239.json").read_text())
    queries = _dashboard_queries(dashboard)
    assert len(queries) == 8
    for expr in queries:
        result = prometheus.wait_for(expr, timeout=budget(15))
        if "sum(" not in expr and "avg(" not in expr:
            assert {series["metric"]["gpu"] for series in result} == {str(i) for i in range(GPUS) if i != 3}, expr
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":  # label_values(DCGM_FI_DEV_GPU_TEMP, instance|gpu)
            metric, label = variable["query"].removeprefix("label_values(").removesuffix(")").split(", ")
            values = prometheus.get_json(f"/api/v1/label/{label}/values", **{"match[]": metric})["data"]
            assert values, variable["query"]


def test_lost_gpu_is_down_and_the_rest_keep_reporting(stack: tuple[Exporter, PrometheusProcess]) -> None:
    _, prometheus = stack
    up = {s["metric"]["gpu"]: s["value"][1] for s in prometheus.wait_for("gpudash_gpu_up")}
    assert up == {str(i): ("0" if i == 3 else "1") for i in range(GPUS)}
    assert prometheus.wait_for('gpudash_xid_errors_total{gpu="3",xid="79"} == 1')
    assert prometheus.wait_for("rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION[5s]) / 1000 > 50")


def test_every_scrape_succeeds_and_the_target_is_healthy(stack: tuple[Exporter, PrometheusProcess]) -> None:
    # How fast a scrape is lives in bench/exporter_bench.py (p99 per fleet size); here: none of them fails.
    _, prometheus = stack
    eventually(lambda: prometheus.query('count_over_time(up{job="gpu"}[1m]) >= 3'), timeout=30,
               what="three scrapes of the exporter")
    assert prometheus.query('min_over_time(up{job="gpu"}[1m]) == 1')  # empty if any scrape failed
    (target,) = [t for t in prometheus.targets() if t["labels"]["job"] == "gpu"]
    assert target["health"] == "up" and target["lastError"] == ""


def test_health_series_and_faults_reach_prometheus(stack: tuple[Exporter, PrometheusProcess]) -> None:
    _, prometheus = stack
    # the lost GPU is one fewer than the node expects
    assert prometheus.wait_for("scalar(count(gpudash_gpu_up == 1)) < gpudash_node_gpus_expected == 8")
    assert prometheus.wait_for('DCGM_EXP_XID_ERRORS_COUNT{gpu="3",xid="79",window_size_in_ms="300000"} == 1')
    # a CRC storm on one link of GPU 5, hundreds a second
    assert prometheus.wait_for('rate(DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL{gpu="5"}[5s]) > 100')
    storm = prometheus.wait_for('increase(gpudash_nvlink_errors_total{gpu="5",error="crc_flit"}[5s]) > 0')
    assert len(storm) == 1 and storm[0]["metric"]["link"]
    # GPU 6's double-bit burst, a pending remap; every other GPU's counters flat
    assert prometheus.wait_for('DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{gpu="6"} > 0 and DCGM_FI_DEV_ROW_REMAP_PENDING == 1')
    assert prometheus.wait_for('sum(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{gpu!="6"}) == 0')
    flat = prometheus.wait_for('rate(DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL{gpu!="5"}[5s]) == 0')
    assert {series["metric"]["gpu"] for series in flat} == {str(i) for i in range(GPUS) if i not in (3, 5)}


def test_dcgm_exporter_4_8_fields_reach_prometheus(stack: tuple[Exporter, PrometheusProcess]) -> None:
    _, prometheus = stack
    # the counter since start beside the windowed gauge, for the lost GPU's XID 79
    assert prometheus.wait_for('DCGM_EXP_XID_ERRORS_TOTAL{gpu="3",xid="79"} == 1')
    # GPU 6's double-bit burst fails its memory watch; the GPUs without a fault pass every watch they show
    fail = prometheus.wait_for('DCGM_EXP_GPU_HEALTH_STATUS{health_watch="MEM"} == 20')
    assert [(s["metric"]["gpu"], s["metric"]["health_error_code"]) for s in fail] == \
        [("6", "DCGM_FR_VOLATILE_DBE_DETECTED")]
    passing = prometheus.wait_for('DCGM_EXP_GPU_HEALTH_STATUS{gpu=~"0|1|2|4"} == 0')
    assert {s["metric"]["health_watch"] for s in passing} == {"MEM", "NVLINK", "THERMAL", "POWER"}
    # P2P over NVLink from every GPU that is up to every other that is up: 7 x 6, none to or from the lost GPU 3
    peers = prometheus.wait_for("DCGM_EXP_P2P_STATUS == 0")
    assert len(peers) == 7 * 6 and all("3" not in (s["metric"]["gpu"], s["metric"]["peer_gpu"]) for s in peers)
