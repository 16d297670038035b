"""The demo's simulated node: what it shows when the demo starts is what the demo says it shows.

The node's clock starts LEAD before the demo; these read the simulation (a pure function of time) around
that moment, as the alert rules would: the jobs busy, each injected fault doing what its alerts look for.
"""

from __future__ import annotations

import statistics

import pytest

from gpudash.exporter.sim.fleet import Fleet
from gpudash.exporter.sim.spec import parse_fault
from gpudash.stack.demo_node import (
    FAULTS,
    GPUS,
    INJECTED,
    JOBS,
    LEAD_S,
    LIVE_PAGE,
    exporter_args,
    node_fleet,
    story,
)

EPOCH = 1_796_000_000.0
TRAINING = (0, 1, 2, 4, 5, 6)
AROUND_START = range(int(LEAD_S) - 60, int(LEAD_S) + 300, 10)  # the demo's first five minutes


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    return node_fleet(EPOCH)[0]


def test_the_exporter_is_given_the_fleet_the_history_is_written_from() -> None:
    args = exporter_args(EPOCH - 0.123)
    assert float(args[args.index("--sim-epoch") + 1]) == EPOCH - 0.123
    assert [args[i + 1] for i, a in enumerate(args) if a == "--fault"] == list(FAULTS)
    assert [args[i + 1] for i, a in enumerate(args) if a == "--sim-job"] == list(JOBS)
    assert args[args.index("--simulate") + 1] == str(GPUS)


def test_around_the_start_the_jobs_train_and_serve(fleet: Fleet) -> None:
    for t in AROUND_START:
        util = {i: fleet.sample_gpu(i, t).values["gpu_util"] for i in range(GPUS)}
        assert min(util[i] for i in TRAINING) >= 85, (t, util)  # warmed up, no checkpoint or input stall
        assert util[7] > 0 and util[3] == 0
        assert {i for i in range(GPUS) if fleet.job(i, t)} == {*TRAINING, 7}


def test_the_cooling_failure_holds_gpu_5_at_its_limit_for_longer_than_the_alert_waits(fleet: Fleet) -> None:
    limit = fleet.model.sw_thermal_c
    # GPUHighTemperature (critical): the median over 2 min at or above the limit, held for 3 min before the start
    for end in range(int(LEAD_S) - 200, int(LEAD_S) + 300, 15):
        temps = [fleet.sample_gpu(5, t).values["gpu_temp"] for t in range(end - 120, end + 1, 15)]
        assert statistics.median(temps) >= limit, (end, temps)


def test_gpu_2_leaks_and_is_not_yet_out_of_memory(fleet: Fleet) -> None:
    def used(t: float) -> float:
        return min(fleet.sample_gpu(2, s).values["fb_used"] for s in range(int(t) - 300, int(t) + 1, 15))

    total = fleet.model.fb_total_mib
    assert used(LEAD_S - 600) < used(LEAD_S - 300) < used(LEAD_S) < 0.9 * total


def test_the_live_fault_comes_after_the_start_and_is_an_xid_that_pages(fleet: Fleet) -> None:
    live = [f for f in INJECTED if parse_fault(f.spec)[1].start > LEAD_S]
    assert [f.gpu for f in live] == [6] and LIVE_PAGE in live[0].alerts
    assert fleet.sample_gpu(6, LEAD_S).xid.last_code == 0
    assert fleet.sample_gpu(6, LEAD_S + 60).xid.last_code in (48, 63)


def test_the_story_names_each_fault_its_gpu_and_when() -> None:
    lines = story().splitlines()
    assert lines == [f"  GPU {f.gpu}, {f.when}: {f.what} ({', '.join(f.alerts)})" for f in INJECTED]
    assert "47 min before the start" in lines[0] and "20 s after the start" in lines[2]
    assert all(0 <= f.gpu < GPUS for f in INJECTED)
