"""Attribution in the rendered exposition: copies per job, labels per process, failures contained."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
from support.exposition import parse_exposition

from gpudash.exporter import exposition
from gpudash.exporter.attribution import Labels, combined
from gpudash.exporter.collectors import all_signals
from gpudash.exporter.poller import Poller
from gpudash.exporter.sim.fleet import fleet_from_specs
from gpudash.exporter.sim.simulated import SimulatedSource
from gpudash.exporter.source import GpuIdentity


class Fixed:
    def __init__(self, copies: dict[int, tuple[Labels, ...]], procs: dict[int, Labels] | None = None,
                 fail: bool = False) -> None:
        self.copies, self.procs, self.fail, self.refreshed = copies, procs or {}, fail, 0

    def refresh(self, gpus: Sequence[GpuIdentity], now: float) -> None:
        self.refreshed += 1
        if self.fail:
            raise OSError("kubelet gone")

    def gpu_copies(self, gpu: GpuIdentity) -> tuple[Labels, ...]:
        if self.fail:
            raise OSError("kubelet gone")
        return self.copies.get(gpu.index, ())

    def process_labels(self, pid: int) -> Labels:
        return self.procs.get(pid, ())

    def close(self) -> None:
        pass


def _poller(attributor: Fixed | None) -> Poller:
    source = SimulatedSource(fleet_from_specs(2, 3, workloads=[], faults=[], epoch=0.0))
    poller = Poller(source, ["gpu_util", "process_fb_used"], hostname="n1", attributor=attributor)
    poller.sweep("fast", 600.0)
    return poller


def _util(poller: Poller) -> list[dict[str, str]]:
    families = parse_exposition(poller.exposition.body.decode())
    return [labels for labels, _ in families["DCGM_FI_DEV_GPU_UTIL"]]


def test_each_job_gets_its_own_copy_and_an_unmapped_gpu_stays_single() -> None:
    attributor = Fixed({0: ((("hpc_job", "41"),), (("hpc_job", "42"),))})
    poller = _poller(attributor)
    series = _util(poller)
    assert sorted((s["gpu"], s.get("hpc_job")) for s in series) == [("0", "41"), ("0", "42"), ("1", None)]
    assert attributor.refreshed == 1


def test_process_series_carry_their_own_job_once_not_the_gpus_copies() -> None:
    poller = _poller(None)
    pids = [labels["pid"] for labels, _ in parse_exposition(
        poller.exposition.body.decode())["gpudash_process_fb_used_mib"] if labels["gpu"] == "0"]
    assert pids
    attributor = Fixed({0: ((("hpc_job", "41"),), (("hpc_job", "42"),))}, {int(pids[0]): (("hpc_job", "42"),)})
    poller = _poller(attributor)
    procs = [labels for labels, _ in parse_exposition(poller.exposition.body.decode())["gpudash_process_fb_used_mib"]
             if labels["gpu"] == "0"]
    assert len(procs) == len(pids)  # once per process, not once per job copy
    assert [p.get("hpc_job") for p in procs if p["pid"] == pids[0]] == ["42"]


def test_reserved_or_invalid_label_names_are_left_out_and_values_escaped() -> None:
    poller = _poller(Fixed({1: ((("gpu", "7"), ("bad-name", "x"), ("pod", 'a"b\\c')),)}))
    (one,) = [s for s in _util(poller) if s["gpu"] == "1"]
    assert one["pod"] == 'a"b\\c' and "bad-name" not in one


def test_a_failing_attributor_costs_its_labels_not_the_sweep() -> None:
    poller = _poller(Fixed({0: ((("hpc_job", "41"),),)}, fail=True))
    series = _util(poller)
    assert sorted(s["gpu"] for s in series) == ["0", "1"] and all("hpc_job" not in s for s in series)
    assert 'gpudash_exporter_collection_errors_total{field="attribution"}' in poller.exposition.body.decode()


def test_combined_multiplies_job_copies_by_pod_labels() -> None:
    jobs = Fixed({0: ((("hpc_job", "1"),), (("hpc_job", "2"),))})
    pods = Fixed({0: ((("pod", "p"), ("namespace", "ns")),)}, {9: (("pod", "p"),)})
    both = combined([jobs, pods])
    assert both is not None
    gpu0 = SimulatedSource(fleet_from_specs(1, 0, workloads=[], faults=[], epoch=0.0)).gpus()[0]
    assert both.gpu_copies(gpu0) == ((("hpc_job", "1"), ("pod", "p"), ("namespace", "ns")),
                                     (("hpc_job", "2"), ("pod", "p"), ("namespace", "ns")))
    assert both.process_labels(9) == (("pod", "p"),)
    assert combined([]) is None and combined([jobs]) is jobs


def test_a_refresh_that_keeps_failing_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    class RefreshFails(Fixed):
        def refresh(self, gpus: Sequence[GpuIdentity], now: float) -> None:
            raise OSError("directory gone")

    poller = _poller(RefreshFails({0: ((("hpc_job", "41"),),)}))
    with caplog.at_level("WARNING", logger="gpudash.exporter"):
        for t in range(5):
            poller.sweep("fast", 601.0 + t)
    assert sum("attribution (refresh) failed" in r.getMessage() for r in caplog.records) == 1
    # the labels it last knew still go out: a failed refresh is not a failed render
    assert {s.get("hpc_job") for s in _util(poller) if s["gpu"] == "0"} == {"41"}


def _strings_in(value: object, depth: int = 4) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif depth and isinstance(value, dict):
        for pair in value.items():
            yield from _strings_in(pair, depth - 1)
    elif depth and isinstance(value, (tuple, list)):
        for item in value:
            yield from _strings_in(item, depth - 1)


def test_no_job_label_outlives_the_render_that_drew_it() -> None:
    # the renderer's caches once kept the text of every copy: after a file of thousands of jobs went, the memory
    # its label sets took stayed
    jobs = Fixed({0: tuple((("hpc_job", f"job-{n}"),) for n in range(40))})
    source = SimulatedSource(fleet_from_specs(2, 3, workloads=[], faults=[], epoch=0.0))
    poller = Poller(source, all_signals().keys, hostname="n1", attributor=jobs)
    poller.sweep("slow", 600.0)
    poller.sweep("fast", 600.0)
    assert poller.exposition.body.count(b'hpc_job="job-39"') > 50  # every family, the links' included
    jobs.copies = {}
    poller.sweep("fast", 601.0)
    assert b"hpc_job" not in poller.exposition.body
    held = [text for name, value in vars(exposition).items() if not name.startswith("__")
            for text in _strings_in(value)]
    assert not [text for text in held if "hpc_job" in text]
