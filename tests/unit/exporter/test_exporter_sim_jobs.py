"""Simulated jobs over a cluster of simulated nodes: the layout, its specs, and the attributor's labels."""

from __future__ import annotations

import functools
import math
from pathlib import Path

import pytest
from support.cli import gpudash

from gpudash.errors import UsageError
from gpudash.exporter.poller import Poller
from gpudash.exporter.sim.cluster_node import SimulatedAttributor, cluster_node, default_epoch
from gpudash.exporter.sim.fleet import Fleet, fleet_from_specs
from gpudash.exporter.sim.jobs import Job, default_layout, layout_from_specs, parse_job, read_job_file
from gpudash.exporter.sim.simulated import SimulatedSource

NODES = ("node-01", "node-02", "node-03")
JOB = "48213=node-01:0-7,node-02:0-7@0"


@functools.cache  # a fleet is a pure function of its arguments; its energy integral is the costly part
def node(name: str, faults: tuple[str, ...] = (), jobs: tuple[str, ...] = (JOB,), seed: int = 3) -> Fleet:
    fleet, _ = cluster_node(8, seed, faults, node=name, nodes=NODES, default_jobs=False, job_specs=jobs, epoch=0.0)
    return fleet


def test_a_spec_names_the_job_its_gpus_on_each_node_its_times_and_kind() -> None:
    job = parse_job("48213/inference=node-01:0-3,6,node-02:0-7@10m+4h")
    assert job == Job("48213", (("node-01", (0, 1, 2, 3, 6)), ("node-02", tuple(range(8)))), 600.0, 15000.0,
                      "inference")
    assert job.size == 13 and job.nodes == ("node-01", "node-02")
    assert parse_job("7=n:1").end == math.inf and parse_job("7=n:1").kind == "train"


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("48213", "expected ID[/KIND]=NODE:GPUS"),
        ("job=node-01:0", "expected ID[/KIND]=NODE:GPUS"),
        ("1/sleep=node-01:0", "unknown kind 'sleep'"),
        ("1=node-01:3-1", "GPU range '3-1' runs backwards"),
        ("1=node-01:0,0", "a GPU is listed twice"),
        ("1=node-01:x", "bad GPU list 'x'"),
        ("1=0-3", "expected NODE:GPUS"),
        ("1=n:0,n:1", "a node is named twice"),
        ("1=n:0@soon", "bad time 'soon'"),
        ("1=n:0+0s", "the duration must be positive"),
    ],
)
def test_a_bad_job_spec_is_one_line_naming_the_spec_and_the_problem(spec: str, problem: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_job(spec)
    message = info.value.format_message()
    assert message.startswith(f"--sim-job {spec!r}: ") and problem in message and "\n" not in message


def test_two_jobs_on_one_gpu_at_once_and_gpus_past_the_node_are_refused() -> None:
    with pytest.raises(UsageError, match="jobs 1 and 2 both hold n:3 at the same time"):
        layout_from_specs(["1=n:0-3@0+1h", "2=n:3-7@30m"], False, 0, [], 8)
    layout_from_specs(["1=n:0-3@0+1h", "2=n:3-7@1h"], False, 0, [], 8)  # one after the other: fine
    with pytest.raises(UsageError, match="job 1: n GPU 8 out of range"):
        layout_from_specs(["1=n:0-8"], False, 0, [], 8)
    with pytest.raises(UsageError, match="job 1: given twice"):
        layout_from_specs(["1=n:0", "1=m:0"], False, 0, [], 8)


def test_the_default_layout_is_a_pure_function_of_seed_and_nodes() -> None:
    layout = default_layout(5, NODES, 8)
    assert layout == default_layout(5, NODES, 8)
    assert layout != default_layout(6, NODES, 8)
    big = max(layout.jobs, key=lambda j: j.size)
    assert len(big.nodes) == 2 and big.size == 16 and big.start == 0.0  # one multi-node job
    assert any(j.kind == "inference" for j in layout.jobs)
    assert any(j.start > 0 for j in layout.jobs) and any(math.isfinite(j.end) for j in layout.jobs)
    held = {(n, i) for j in layout.jobs for n, gpus in j.placement for i in gpus}
    assert len(held) < 8 * len(NODES)  # some GPUs stay free
    assert all(j.id.isdigit() and len(j.id) == 5 for j in layout.jobs)
    with pytest.raises(UsageError, match="--sim-nodes"):
        default_layout(5, [], 8)


def test_two_nodes_built_apart_agree_on_the_job_and_its_rhythm_but_not_on_their_gpus() -> None:
    a, b = node("node-01"), node("node-02")
    again = node.__wrapped__("node-01")  # built apart, not the cached one
    assert [g.uuid for g in a.identities] == [g.uuid for g in again.identities]
    assert not {g.uuid for g in a.identities} & {g.uuid for g in b.identities}
    for t in (0.0, 900.0, 4321.0):
        assert a.sample(t) == again.sample(t)
    assert a.job(0, 100.0) == b.job(7, 100.0) and a.job(0, 100.0) is not None


def _readings(t: float, faults: tuple[str, ...]) -> dict[tuple[str, int], dict[str, float]]:
    return {(name, r.index): dict(r.values) for name in ("node-01", "node-02")
            for r in node(name, faults).sample(t)}


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return (ordered[len(ordered) // 2] + ordered[(len(ordered) - 1) // 2]) / 2


def _steady_times(fleet: Fleet, start: float, end: float) -> list[float]:
    """Times at which the job trains steadily (no checkpoint, stall or evaluation) and the readings move."""
    times = []
    for k in range(int(start), int(end), 97):
        if all(r.values["gpu_util"] > 85 for r in fleet.sample(float(k))):
            times.append(float(k))
    return times


def test_a_straggler_is_slower_and_busier_than_the_median_and_its_peers_on_any_node_wait() -> None:
    faults = ("node-02/5=straggler:30@20m",)
    clean = node("node-01")
    times = _steady_times(clean, 1500, 3000)
    assert len(times) >= 5
    for t in times:
        now = _readings(t, faults)
        before = _readings(t, ())
        straggler = now[("node-02", 5)]
        peers = [v for k, v in now.items() if k != ("node-02", 5)]
        assert straggler["sm_clock"] < 0.9 * _median([p["sm_clock"] for p in peers])
        assert straggler["sm_active"] > _median([p["sm_active"] for p in peers]) + 0.2
        for where, reading in now.items():
            if where == ("node-02", 5):
                continue
            assert reading["gpu_util"] > 85  # waiting in collectives still counts as busy
            assert reading["sm_active"] < before[where]["sm_active"] - 0.15  # ... but computes less
            assert reading["tensor_active"] < before[where]["tensor_active"]
            assert reading["power"] < before[where]["power"]
    # before the fault starts, node-01 cannot tell
    assert _readings(600.0, faults)[("node-01", 0)] == _readings(600.0, ())[("node-01", 0)]


def test_the_straggler_slows_only_its_own_job() -> None:
    jobs = ("48213=node-01:0-3,node-02:0-3@0", "48214=node-01:4-7@0")
    before = node("node-01", (), jobs).sample(1700.0)
    after = node("node-01", ("node-02/1=straggler:30@20m",), jobs).sample(1700.0)
    assert [r.values for r in after[4:]] == [r.values for r in before[4:]]
    assert all(a.values["sm_active"] < b.values["sm_active"] for a, b in zip(after[:4], before[:4], strict=True))


def test_job_wide_dips_are_simultaneous_across_nodes() -> None:
    a, b = node("node-01"), node("node-02")
    dips_a = {t for t in range(200, 2 * 3600, 15) if all(r.values["gpu_util"] < 70 for r in a.sample(float(t)))}
    dips_b = {t for t in range(200, 2 * 3600, 15) if all(r.values["gpu_util"] < 70 for r in b.sample(float(t)))}
    assert len(dips_a) > 10  # checkpoints, evaluations and stalls
    assert dips_a == dips_b


def test_a_starved_node_runs_low_and_the_job_waits_elsewhere_less_visibly() -> None:
    t = next(iter(_steady_times(node("node-01"), 1500, 3000)))
    now, before = _readings(t, ("node-02/0=starved@20m",)), _readings(t, ())
    for i in range(8):
        starved, there = now[("node-02", i)], before[("node-02", i)]
        assert starved["gpu_util"] < 0.5 * there["gpu_util"] and starved["sm_active"] < 0.5 * there["sm_active"]
        waiting, here = now[("node-01", i)], before[("node-01", i)]
        assert waiting["gpu_util"] > 0.8 * here["gpu_util"]
        assert waiting["sm_active"] < 0.6 * here["sm_active"]


def test_an_idle_holder_holds_memory_and_a_process_at_zero_utilization() -> None:
    fleet = node("node-01", ("3=idle-holder@20m",))
    reading = fleet.sample_gpu(3, 2000.0)
    assert reading.values["gpu_util"] == 0 and reading.values["sm_active"] == 0
    assert 1000 < reading.values["fb_used"] < 6000
    assert len(reading.processes) == 1
    kind_idle = node("node-01", (), ("48230/idle=node-01:0-3@0",)).sample_gpu(2, 600.0)
    assert kind_idle.values["gpu_util"] == 0 and len(kind_idle.processes) == 1


def test_a_foreign_process_is_labelled_with_the_other_job_and_slows_its_host_job() -> None:
    jobs = ("48213=node-01:0-3@0", "48299=node-02:0-7@0")
    fleet = node("node-01", ("2=foreign@20m",), jobs)
    attributor = SimulatedAttributor(fleet)
    attributor.refresh(fleet.identities, 2000.0)
    reading = fleet.sample_gpu(2, 2000.0)
    own, foreign = reading.processes
    assert attributor.process_labels(own.pid) == (("hpc_job", "48213"),)
    assert attributor.process_labels(foreign.pid) == (("hpc_job", "48299"),)
    assert foreign.fb_used_mib > 5000
    assert attributor.gpu_copies(fleet.identities[2]) == ((("hpc_job", "48213"),),)
    assert attributor.gpu_copies(fleet.identities[5]) == ()  # a free GPU: its series unchanged
    given = node("node-01", ("2=foreign:51234@20m",), jobs)
    assert given.process_jobs(2, 2000.0)[given.sample_gpu(2, 2000.0).processes[1].pid] == "51234"


def test_the_attributor_labels_a_job_only_while_it_runs() -> None:
    fleet = node("node-01", (), ("48213=node-01:0-3@10m+1h",))
    attributor = SimulatedAttributor(fleet)
    for t, expected in ((300.0, ()), (1200.0, ((("hpc_job", "48213"),),)), (4300.0, ())):
        attributor.refresh(fleet.identities, t)
        assert attributor.gpu_copies(fleet.identities[0]) == expected


def test_the_poller_publishes_hpc_job_on_the_gpu_and_process_series() -> None:
    fleet, attributor = cluster_node(8, 3, (), node="node-02", nodes=NODES, default_jobs=False,
                                     job_specs=(JOB,), epoch=0.0)
    poller = Poller(SimulatedSource(fleet), ["gpu_util", "process_fb_used"], clock=lambda: 900.0,
                    attributor=attributor, hostname="node-02")
    poller.sweep("fast")
    body = poller.exposition.body.decode()
    assert 'DCGM_FI_DEV_GPU_UTIL{gpu="7"' in body and 'hpc_job="48213"' in body
    assert body.count('hpc_job="48213"') == 16  # 8 GPUs, one utilization and one process series each


def test_without_job_options_a_straggler_slows_the_nodes_training_gpus() -> None:
    plain = Fleet(8, 7)
    slowed = fleet_from_specs(8, 7, (), ("5=straggler:30@0",), epoch=0.0)
    t = 700.0
    assert slowed.sample_gpu(5, t).values["sm_clock"] < 0.75 * plain.sample_gpu(5, t).values["sm_clock"]
    assert slowed.sample_gpu(0, t).values["sm_active"] < plain.sample_gpu(0, t).values["sm_active"] - 0.15


def test_default_epoch_is_the_start_of_the_hour() -> None:
    assert default_epoch(7200.0 + 1799.5) == 7200.0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sim-job", "1=n:0"], "--sim-job, --sim-jobs, --sim-nodes and --sim-epoch need --simulate N"),
        (["--simulate", "8", "--sim-job", "1=n:0-9", "--hostname", "n"], "job 1: n GPU 8 out of range"),
        (["--simulate", "8", "--sim-jobs", "default", "--hostname", "n"], "needs the cluster's node names"),
        (["--simulate", "8", "--sim-jobs", "default", "--sim-nodes", "a,b", "--hostname", "c"],
         "--hostname 'c' is not one of --sim-nodes a,b"),
        (["--simulate", "8", "--fault", "n/1=straggler"], "a fault on a named node needs simulated jobs"),
        (["--simulate", "8", "--sim-job", "1=n:0", "--hostname", "n", "--fault", "m/9=starved"],
         "GPU index 9 out of range"),
        (["--simulate", "8", "--fault", "1=straggler:95"], "between 0 and 90 % slower"),
        (["--simulate", "8", "--sim-nodes", "a,b"], "give --sim-job or --sim-jobs too"),
        (["--simulate", "8", "--fault", "1=foreign:x"], "bad number or time 'x'"),
        # A fullwidth or superscript digit is not an index (str.isdigit takes both; int() refuses the second).
        (["--simulate", "8", "--sim-job", "1=n:\uff10-3", "--hostname", "n"], "bad GPU list"),
        (["--simulate", "8", "--sim-job", "1=n:\u00b2", "--hostname", "n"], "bad GPU list"),
    ],
)
def test_bad_job_options_exit_2_with_one_line(root: Path, args: list[str], message: str) -> None:
    done = gpudash("exporter", *args, cwd=root)
    assert done.code == 2, done.err
    assert done.err.startswith("gpudash: ") and message in done.err and done.err.count("\n") == 1, done.err


def test_a_job_file_lists_specs_and_a_bad_one_is_one_line(tmp_path: Path) -> None:
    good = tmp_path / "jobs.yaml"
    good.write_text("jobs:\n  - 48213=node-01:0-7,node-02:0-7@10m+4h\n  - 48231/idle=node-03:0-3@1h\n")
    assert read_job_file(good) == ["48213=node-01:0-7,node-02:0-7@10m+4h", "48231/idle=node-03:0-3@1h"]
    for text, problem in (("jobs: [1, [2]]\n", "expected 'jobs:' and a list"),
                          ("jobs: [a\n", ": line 2, column 1: invalid YAML"),
                          ("jobs:" + " [" * 3000 + "\n", "nested more than 64 levels deep"),
                          ("jobs:\n  - 1=n:0\n" + "#" * (1 << 20), "a config file is at most 1,048,576 bytes"),
                          ("- 1=n:0\n", "expected 'jobs:' and a list")):
        bad = tmp_path / "bad.yaml"
        bad.write_text(text)
        with pytest.raises(UsageError) as info:
            read_job_file(bad)
        assert info.value.format_message().startswith(f"--sim-jobs {bad}") and problem in info.value.format_message()
    with pytest.raises(UsageError, match="cannot read it"):
        read_job_file(tmp_path / "missing.yaml")


def test_the_exporter_reads_jobs_from_a_file(root: Path, tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text("jobs:\n  - 1=n:0-9\n")
    done = gpudash("exporter", "--simulate", "8", "--hostname", "n", "--sim-jobs", str(jobs), cwd=root)
    assert done.code == 2 and "job 1: n GPU 8 out of range" in done.err  # the file's spec was read and checked
