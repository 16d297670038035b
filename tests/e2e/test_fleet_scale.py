"""Fleet panels stay bounded however many GPUs there are; the node dashboard never sees the fleet.

Two synthetic fleets (16 and 128 GPUs, two clusters, the simulated node's behaviour) are backfilled with
promtool into a real Prometheus, gpudash's recording rules on top; then every panel runs as Grafana runs
it when the dashboard opens (bench/grafana_load.py). A fleet panel may draw one series per cluster (and
per utilization band or XID code inside a cluster), or at most `fleet_topk` GPUs or nodes: never a number
that grows with the fleet. dcgm-exporter's dashboard 12239 runs too, as proof that a per-GPU panel here
would be caught. The fleets carry `hpc_job` labels (bench/fleetgen.py: jobs of 16 down to 2 GPUs, free
nodes), so the fleet's job tables fill up and the job dashboard draws the same number of series for a
16-GPU job at both sizes.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.paths import ROOT

from bench import fleet_tsdb, fleetgen, grafana_load, rule_cost
from gpudash.catalog import DCGM, THERMAL_OR_BRAKE_REASONS
from gpudash.config.loading import load_settings
from gpudash.panels.build import build_all
from gpudash.promql.for_settings import recording_rules

pytestmark = pytest.mark.timeout(240)

SMALL, LARGE = 16, 128  # 2 and 16 nodes: more nodes than fleet_topk at the large size
END = 1_800_000_000 // 7200 * 7200
PER_CLUSTER = 10  # the widest fan-out inside a cluster: ten utilization bands
CONDITIONAL = ("Memory pressure", "Throttled GPUs")
# Labels that name one GPU or one node: a panel whose series carry one of these draws GPUs or nodes.
PER_GPU_OR_NODE = {"instance", "gpu", "UUID", "hostname", "pci_bus_id", "device"}

Opened = dict[int, dict[str, grafana_load.OpenResult]]


def dashboards() -> dict[str, dict[str, Any]]:
    settings = load_settings(ROOT / "thresholds.yaml")
    recorded = build_all(settings, ROOT / "dashboards", recorded=True, profile_name="dcgm")
    raw = build_all(settings, ROOT / "dashboards", recorded=False, profile_name="dcgm")
    return {"fleet": recorded["gpudash-fleet.json"], "fleet raw": raw["gpudash-fleet.json"],
            "node": recorded["gpudash-node.json"], "job": recorded["gpudash-job.json"],
            "dcgm 12239": json.loads((ROOT / "tests/fixtures/dcgm-exporter/dashboard-12239.json").read_text())}


@pytest.fixture(scope="module")
def opened(tmp_path_factory: pytest.TempPathFactory) -> Opened:
    boards = dashboards()
    keys = fleetgen.keys_read(boards.values())
    settings = load_settings(ROOT / "thresholds.yaml")
    # The last 35 minutes and the same minutes a day earlier (the comparison row), nothing in between.
    timeline = fleetgen.dashboard_timeline(END, range_s=1800, margin_s=300, coarse_s=86400)
    pool = fleet_tsdb.simulate_pool(1, timeline, keys, workers=2, nodes=2)
    rules = [(rec.record, expr) for rec, expr in recording_rules(settings, profile=DCGM)]
    out: Opened = {}
    for gpus in (SMALL, LARGE):
        home = tmp_path_factory.mktemp(f"fleet-{gpus}")
        data = home / "data"
        data.mkdir()
        fleet_tsdb.backfill_raw(fleetgen.FleetShape(gpus, 1), timeline, keys, pool, data, workers=2, say=None)
        windows = [fleetgen.Window(w.start, min(w.end, timeline.end - 1)) for w in timeline.detail]
        fleet_tsdb.backfill_rules_in_passes(data, home / "prometheus.log", rule_cost.passes(rules), timeline.scrape_s,
                                            windows, home)
        with fleet_tsdb.running_prometheus(data, home / "prometheus.log") as url:
            out[gpus] = {name: grafana_load.open_dashboard(url, board, END) for name, board in boards.items()}
    return out


def topk() -> int:
    return int(load_settings(ROOT / "thresholds.yaml").thresholds.dashboards.fleet_topk)


@pytest.mark.parametrize("variant", ["fleet", "fleet raw"])
def test_fleet_panels_are_bounded_by_topk_or_clusters(opened: Opened, variant: str) -> None:
    k = topk()
    for gpus in (SMALL, LARGE):
        bound = max(k, fleetgen.cluster_count(gpus) * PER_CLUSTER)
        # per query: a table's queries each return one series per row of the same k rows
        for panel in opened[gpus][variant].panels:
            assert panel.widest <= bound, f"{gpus} GPUs: {panel.title!r} returns {panel.widest} series"
            if panel.labels & PER_GPU_OR_NODE:
                assert panel.widest <= k, (
                    f"{gpus} GPUs: {panel.title!r} draws {panel.widest} GPUs or nodes, more than topk {k}")


@pytest.mark.parametrize("variant", ["fleet", "fleet raw"])
def test_fleet_panels_do_not_grow_with_the_fleet(opened: Opened, variant: str) -> None:
    k = topk()
    small = {p.title: p.widest for p in opened[SMALL][variant].panels}
    large = {p.title: p.widest for p in opened[LARGE][variant].panels}
    assert small.keys() == large.keys()
    for title, series in large.items():
        # Same clusters at both sizes: only a top-k list may fill up, and only to k.
        assert series <= max(small[title], k, fleetgen.cluster_count(LARGE) * PER_CLUSTER), title
    # The lists do fill up (so the bounds above were tested against real rankings): 16 nodes, 128 GPUs > k.
    ranked = [p for p in opened[LARGE][variant].panels if f"(top {k})" in p.title or f"(bottom {k})" in p.title]
    # Lists of the GPUs that pass a test (memory pressure, throttled) may rightly hold fewer than k.
    per_gpu = [p for p in ranked if "per job" not in p.title and not p.title.startswith(CONDITIONAL)]
    assert len(per_gpu) >= 3 and all(p.widest == k for p in per_gpu), [(p.title, p.widest) for p in per_gpu]
    # 18 jobs at 128 GPUs: the job table holds k of them.
    (held,) = [p for p in ranked if "per job" in p.title]
    assert held.widest == k and held.labels >= {"cluster", "hpc_job"}, held


def test_job_dashboard_does_not_depend_on_fleet_size(opened: Opened) -> None:
    """Opened on the first job (a 16-GPU job at both sizes): the same series, and a panel's count is bounded."""
    small = [(p.title, p.series) for p in opened[SMALL]["job"].panels]
    large = [(p.title, p.series) for p in opened[LARGE]["job"].panels]
    assert [t for t, _ in small] == [t for t, _ in large]
    for (title, few), (_, many) in zip(small, large, strict=True):
        assert many <= max(few, topk()), title
    assert sum(series for _, series in large) > 20  # the job is there: its panels have data


def test_the_check_catches_a_panel_that_draws_every_gpu(opened: Opened) -> None:
    """dcgm-exporter 12239 draws every GPU: on the same data its panels grow with the fleet."""
    temps = {gpus: next(p for p in opened[gpus]["dcgm 12239"].panels if p.title == "GPU Temperature")
             for gpus in (SMALL, LARGE)}
    assert temps[SMALL].series == SMALL and temps[LARGE].series == LARGE
    assert max(topk(), fleetgen.cluster_count(LARGE) * PER_CLUSTER) < LARGE


def test_node_dashboard_does_not_depend_on_fleet_size(opened: Opened) -> None:
    small = [(p.title, p.series) for p in opened[SMALL]["node"].panels]
    large = [(p.title, p.series) for p in opened[LARGE]["node"].panels]
    assert small == large
    # One node: 8 GPUs, one row per GPU and thermal or power-brake reason at most.
    assert max(series for _, series in large) <= len(THERMAL_OR_BRAKE_REASONS) * fleetgen.GPUS_PER_NODE
    assert any(series == fleetgen.GPUS_PER_NODE for _, series in large)
