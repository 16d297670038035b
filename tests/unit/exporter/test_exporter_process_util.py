"""Each process's SM share from NVML's process utilization samples, through a stand-in for pynvml's three names."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpudash.exporter.process_util import ProcessUtilization


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value


@dataclass
class Sample:
    pid: int
    timeStamp: int
    smUtil: int


class StandIn:
    """nvmlDeviceGetProcessUtilization answering from a script; records the `since` each call asked."""

    NVMLError = NVMLError
    NVML_ERROR_NOT_FOUND = 6
    NVML_ERROR_NOT_SUPPORTED = 3

    def __init__(self, answers: Sequence[Any]) -> None:
        self.answers, self.asked = list(answers), []

    def nvmlDeviceGetProcessUtilization(self, handle: Any, since: int) -> list[Sample]:
        self.asked.append(since)
        answer = self.answers.pop(0)
        if isinstance(answer, int):
            raise NVMLError(answer)
        return list(answer)


def test_the_latest_sample_of_each_process_and_the_next_read_starts_after_it() -> None:
    nv = StandIn([[Sample(10, 100, 40), Sample(11, 120, 5), Sample(10, 150, 70)], StandIn.NVML_ERROR_NOT_FOUND,
                  [Sample(11, 300, 9)]])
    util = ProcessUtilization(nv)
    assert util.sm_by_pid("h", 0) == {10: 70.0, 11: 5.0}
    assert util.sm_by_pid("h", 0) == {}  # no process had a sample since: no SM time
    assert util.sm_by_pid("h", 0) == {11: 9.0}
    assert nv.asked == [0, 150, 150]


def test_a_gpu_that_cannot_tell_gives_none_and_gpus_keep_their_own_clock() -> None:
    nv = StandIn([StandIn.NVML_ERROR_NOT_SUPPORTED, [Sample(1, 500, 3)], [Sample(2, 20, 4)]])
    util = ProcessUtilization(nv)
    assert util.sm_by_pid("a", 0) is None
    assert util.sm_by_pid("b", 1) == {1: 3.0}
    assert util.sm_by_pid("c", 2) == {2: 4.0}
    assert nv.asked == [0, 0, 0]
