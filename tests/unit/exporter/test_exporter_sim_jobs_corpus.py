"""The alert corpus's job scenarios (bench/alert_corpus.py): what their series carry, and that the straggler data
exercises what the straggler rule looks for (a GPU far from its job's median while the job is busy) only where
it should."""

from __future__ import annotations

import functools
import re
from dataclasses import replace
from statistics import median

import pytest

from bench import alert_corpus as corpus
from bench.alert_quality import naive_rules

JOB_SCENARIOS = [s for s in corpus.SCENARIOS if s.jobs and not s.fabric]  # the fabric ones: test_rules_corpus_fabric.py
HOURS = 1.5  # 20 minutes into the faults; job-wide-dip's 8-minute stall at 1h, an evaluation and checkpoints
_GPU = re.compile(r'gpu="(\d+)"')
Series = dict[str, list[corpus.Sample]]


@functools.cache
def _series(name: str, flavour: str, hours: float) -> Series:
    """A scenario's series, cut to `hours` (the unit suite stays fast): the fault windows start at 1h10m."""
    return corpus.build_series(replace(corpus.BY_NAME[name], hours=hours), flavour)


def _metric(series: dict[str, list[corpus.Sample]], name: str) -> dict[str, list[corpus.Sample]]:
    return {k: v for k, v in series.items() if k.startswith(name + "{")}


def _per_gpu(series: dict[str, list[corpus.Sample]], name: str, index: int) -> dict[int, float]:
    out = {}
    for selector, samples in _metric(series, name).items():
        value = samples[index]
        if isinstance(value, float):
            match = _GPU.search(selector)
            assert match is not None
            out[int(match.group(1))] = value
    return out


def test_the_job_scenarios_are_in_the_corpus() -> None:
    names = {s.name for s in JOB_SCENARIOS}
    assert names == {"straggler", "idle-holder", "job-wide-dip", "small-job-straggler", "job-start-end",
                     "straggler-no-profiling", "hung-collective", "hung-collective-no-prof", "checkpoint-long"}
    assert {s.name for s in JOB_SCENARIOS if s.kind == "benign"} == {"job-wide-dip", "small-job-straggler",
                                                                      "job-start-end", "checkpoint-long"}


def test_job_series_carry_hpc_job_only_while_the_job_runs() -> None:
    series = _series("job-start-end", "bundled", 2.75)
    util = _metric(series, "DCGM_FI_DEV_GPU_UTIL")
    at = {minutes: int(minutes * 60 // corpus.STEP) for minutes in (5, 60, 140, 160)}
    labelled = {m: sorted(k for k, v in util.items() if isinstance(v[i], float) and 'hpc_job="' in k)
                for m, i in at.items()}
    assert labelled[5] == [] and len(labelled[60]) == 8 and labelled[140] == [] and len(labelled[160]) == 4
    assert all('hpc_job="48213"' in k for k in labelled[60]) and all('hpc_job="48231"' in k for k in labelled[160])


@pytest.mark.parametrize("flavour", corpus.FLAVOURS)
def test_profiling_series_come_with_job_scenarios_unless_left_out(flavour: str) -> None:
    with_prof = _series("straggler", flavour, 0.1)
    without = _series("straggler-no-profiling", flavour, 0.1)
    assert _metric(with_prof, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE")  # a dcgm-exporter default counter
    assert bool(_metric(with_prof, "DCGM_FI_PROF_SM_ACTIVE")) == (flavour == "bundled")  # not a default one
    assert not _metric(without, "DCGM_FI_PROF_SM_ACTIVE") and not _metric(without, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE")
    assert _metric(without, "DCGM_FI_DEV_SM_CLOCK")
    old = _series("xid-79", flavour, 0.1)
    assert not _metric(old, "DCGM_FI_PROF_SM_ACTIVE") and not any("hpc_job" in k for k in old)


def _departures(name: str, signal: str, limit: float, relative: bool) -> dict[int, int]:
    """How many busy samples each GPU spends more than `limit` from its job's median (as the straggler rule)."""
    series = _series(name, "bundled", HOURS)
    counts: dict[int, int] = {}
    for index in range(len(next(iter(series.values())))):
        util = _per_gpu(series, "DCGM_FI_DEV_GPU_UTIL", index)
        values = _per_gpu(series, signal, index)
        if len(values) < 4 or median(util.values()) < 50:
            continue
        middle = median(values.values())
        for gpu, value in values.items():
            off = (middle - value) / middle if relative else abs(value - middle)
            if off > limit:
                counts[gpu] = counts.get(gpu, 0) + 1
    return counts


def test_the_straggler_departs_from_its_jobs_median_and_nothing_else_does() -> None:
    clock = _departures("straggler", "DCGM_FI_DEV_SM_CLOCK", 0.10, relative=True)
    sm = _departures("straggler", "DCGM_FI_PROF_SM_ACTIVE", 0.20, relative=False)
    # most of its first 20 minutes (80 samples): all but a checkpoint and an evaluation, when the job is not busy
    assert set(clock) == {5} and clock[5] > 55
    assert set(sm) == {5} and sm[5] > 55
    assert _departures("job-wide-dip", "DCGM_FI_PROF_SM_ACTIVE", 0.20, relative=False) == {}
    assert _departures("job-wide-dip", "DCGM_FI_DEV_SM_CLOCK", 0.10, relative=True) == {}


def test_the_idle_holder_sits_under_5_percent() -> None:
    series = _series("idle-holder", "bundled", HOURS)
    start = int(70 * 60 // corpus.STEP)
    for index in range(start, len(next(iter(series.values()))), 5):
        util = _per_gpu(series, "DCGM_FI_DEV_GPU_UTIL", index)
        assert util[6] < 5 and util[7] < 5


def test_the_naive_job_rules_watch_only_gpus_a_job_holds() -> None:
    text = naive_rules()
    assert 'DCGM_FI_DEV_SM_CLOCK{hpc_job!=""} < 1584' in text
    assert 'DCGM_FI_DEV_GPU_UTIL{hpc_job!=""} < 5' in text
