"""Two simulated nodes of one cluster as two `gpudash exporter` processes: one job across both, a straggler on one.

Nothing passes between the processes: each evaluates the same job and fault options for its own --hostname,
and their /metrics agree on the job and show the straggler's peers on the other node waiting for it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from statistics import median

import pytest
from support.exposition import parse_exposition
from support.slack import budget
from support.waiting import eventually

from gpudash.stack.process import free_port

JOB = "48213"
# The job starts at the epoch; 650 s in, it has ramped up and no job-wide dip can fall before 800 s (stalls
# start at least 200 s into a 10-minute slot and last at most 40 s; the first checkpoint is 20 minutes in).
AGE_S = 650


@pytest.fixture
def cluster(root: Path) -> Iterator[dict[str, str]]:
    epoch = time.time() - AGE_S
    common = ["--simulate", "8", "--seed", "11", "--sim-nodes", "node-01,node-02",
              "--sim-job", f"{JOB}=node-01:0-7,node-02:0-7", "--fault", "node-02/5=straggler:30@5m",
              "--sim-epoch", str(epoch), "--interval", "200ms", "--slow-interval", "200ms"]
    procs: dict[str, tuple[subprocess.Popen[str], int]] = {}
    try:
        for name in ("node-01", "node-02"):
            port = free_port()
            proc = subprocess.Popen(
                [sys.executable, "-m", "gpudash", "exporter", "--listen", f"127.0.0.1:{port}", "--hostname", name,
                 *common],
                cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                env={**os.environ, "PYTHONPATH": str(root)},
            )
            procs[name] = (proc, port)
        bodies = {name: eventually(lambda p=proc, n=port: _metrics(p, n), timeout=30, what=f"{name}'s /metrics",
                                   ignoring=(OSError,))
                  for name, (proc, port) in procs.items()}
        yield bodies
    finally:
        for proc, _ in procs.values():
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=budget(15))


def _metrics(proc: subprocess.Popen[str], port: int) -> str:
    if proc.poll() is not None:
        raise AssertionError(f"the exporter exited: {proc.communicate()[1]}")
    body: str = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=budget(2)).read().decode()
    return body if "DCGM_FI_PROF_SM_ACTIVE" in body else ""


def _by_gpu(body: str, metric: str) -> dict[str, tuple[dict[str, str], float]]:
    return {labels["gpu"]: (labels, value) for labels, value in parse_exposition(body)[metric]}


def test_both_nodes_carry_the_job_and_the_stragglers_peers_wait(cluster: dict[str, str]) -> None:
    util = {name: _by_gpu(body, "DCGM_FI_DEV_GPU_UTIL") for name, body in cluster.items()}
    sm = {name: _by_gpu(body, "DCGM_FI_PROF_SM_ACTIVE") for name, body in cluster.items()}
    clock = {name: _by_gpu(body, "DCGM_FI_DEV_SM_CLOCK") for name, body in cluster.items()}
    for name in cluster:
        assert sorted(util[name]) == [str(i) for i in range(8)]
        for labels, _ in util[name].values():
            assert labels["hpc_job"] == JOB and labels["hostname"] == name
    uuids = {name: {labels["UUID"] for labels, _ in util[name].values()} for name in cluster}
    assert not uuids["node-01"] & uuids["node-02"]  # two nodes, not one node twice

    straggler_clock = clock["node-02"]["5"][1]
    others = [v for name in cluster for gpu, (_, v) in clock[name].items() if (name, gpu) != ("node-02", "5")]
    assert straggler_clock < 0.9 * median(others)
    straggler_sm = sm["node-02"]["5"][1]
    for gpu in map(str, range(8)):  # node-01 knows nothing of node-02, yet its GPUs wait for GPU 5 there
        assert util["node-01"][gpu][1] > 85
        assert sm["node-01"][gpu][1] < straggler_sm - 0.2
    processes = parse_exposition(cluster["node-01"])["gpudash_process_fb_used_mib"]
    assert len(processes) == 8 and all(labels["hpc_job"] == JOB for labels, _ in processes)


def test_the_straggler_scenario_through_promtool_naive_side_and_on_target_only(tmp_path: Path) -> None:
    from bench import alert_corpus as corpus
    from bench import alert_quality as quality

    scenario = corpus.BY_NAME["straggler"]
    ours, naive = quality.evaluate([scenario], "bundled", None, tmp_path, jobs=2)
    window = scenario.fault_window
    assert window is not None
    caught = naive[0].catches()
    assert [(f.alertname, f.gpu) for f in caught] == [("NaiveSlowClock", "5")]
    assert caught[0].first_after_onset == window[0]  # no for: it fires at the first evaluation
    # the naive rule also fires while every GPU ramps up at the job's start: what the job rule must not do
    assert {f.gpu for f in naive[0].fired if f.alertname == "NaiveSlowClock"} == {str(i) for i in range(8)}
    # gpudash's rules: nothing but the straggler alert, on the straggler GPU
    assert all((f.alertname, f.gpu) == ("GPUJobStraggler", "5") for f in ours[0].fired), ours[0].fired
    assert not ours[0].false_alerts()
