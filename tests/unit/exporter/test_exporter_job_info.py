"""gpudash_job_info: who holds each job the mapping directory names, read from the Prolog's .jobinfo files."""

from __future__ import annotations

import time
from pathlib import Path

from support.exposition import parse_exposition

from gpudash.catalog import JOB_INFO
from gpudash.exporter.attribution import combined
from gpudash.exporter.attribution.hpc import HpcJobMapping
from gpudash.exporter.attribution.mapping_file import MAX_INFO_CHARS, MAX_JOBS_PER_GPU, parse_job_info
from gpudash.exporter.collectors import all_signals
from gpudash.exporter.poller import Poller
from gpudash.exporter.sim.fleet import fleet_from_specs
from gpudash.exporter.sim.simulated import SimulatedSource

LATER = 60 * 10**9  # every file counts as settled


def _info(directory: Path, job: str, text: str) -> None:
    (directory / ".jobinfo").mkdir(exist_ok=True)
    (directory / ".jobinfo" / job).write_text(text)


def _published(directory: Path) -> list[dict[str, str]]:
    source = SimulatedSource(fleet_from_specs(2, 3, workloads=[], faults=[], epoch=0.0))
    mapping = HpcJobMapping(directory, clock_ns=lambda: time.time_ns() + LATER)
    poller = Poller(source, all_signals().keys, hostname="n1", attributor=combined([mapping]))
    poller.sweep("fast", 600.0)
    series = parse_exposition(poller.exposition.body.decode()).get(JOB_INFO, [])
    assert all(value == 1 for _, value in series)
    return sorted((labels for labels, _ in series), key=lambda labels: labels["hpc_job"])


def test_each_mapped_job_has_one_info_series_with_who_holds_it(tmp_path: Path) -> None:
    (tmp_path / "0").write_text("41\n42\n")
    (tmp_path / "1").write_text("42\n")  # one job on two GPUs: still one series
    _info(tmp_path, "41", "user=alice\naccount=ml-team\npartition=gpu\njob_name=train llama\n")
    _info(tmp_path, "42", "user=bob\naccount=vision\npartition=debug\njob_name=eval\n")
    assert _published(tmp_path) == [
        {"hostname": "n1", "hpc_job": "41", "user": "alice", "account": "ml-team", "partition": "gpu",
         "job_name": "train llama"},
        {"hostname": "n1", "hpc_job": "42", "user": "bob", "account": "vision", "partition": "debug",
         "job_name": "eval"},
    ]


def test_the_info_goes_with_the_job_and_a_job_without_its_file_gets_empty_values(tmp_path: Path) -> None:
    _info(tmp_path, "77", "user=carol\naccount=ops\npartition=gpu\njob_name=x\n")  # no GPU file names job 77
    (tmp_path / "0").write_text("78\n")
    assert _published(tmp_path) == [{"hostname": "n1", "hpc_job": "78"}]  # empty values: labels absent


def test_values_are_one_printable_line_cut_short_and_odd_keys_ignored() -> None:
    text = f"user=a\x1bb\naccount={'x' * 500}\nshell=/bin/sh\npartition=p\"q\\\njob_name=\n".encode()
    info = dict(parse_job_info(text, ("user", "account", "partition", "job_name")))
    assert info == {"user": "a b", "account": "x" * MAX_INFO_CHARS, "partition": 'p"q\\', "job_name": ""}


def test_the_series_count_is_bounded_by_the_jobs_the_files_may_name(tmp_path: Path) -> None:
    (tmp_path / "0").write_text("".join(f"{job}\n" for job in range(100)))
    (tmp_path / ".jobinfo").mkdir()
    for job in range(200):  # stale info files of ended jobs publish nothing
        _info(tmp_path, str(job), f"user=u{job}\n")
    published = _published(tmp_path)
    assert len(published) == MAX_JOBS_PER_GPU
    assert {labels["user"] for labels in published} == {f"u{job}" for job in range(MAX_JOBS_PER_GPU)}
