"""What `make demo` prints, and how it decides between the GPUs of this node and a simulated one.

The demo itself, servers and all, runs in tests/e2e/test_demo_process.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from support.paths import ROOT

from gpudash.check.judge import GroupResult, Result, Status
from gpudash.check.queries import PANEL, CheckQuery, Group
from gpudash.stack.demo import FAULTS, GPUS, not_yet, nvml_gpu_count
from gpudash.stack.demo_report import notification_line, render_brief

# ------------------------------------------------------------------------ what it prints


def test_a_real_node_is_told_which_queries_need_more_history_and_how_far_back() -> None:
    rows = (
        Result(CheckQuery("GPU node", "Utilization", PANEL, "x"), 1, Status.OK),
        Result(CheckQuery("GPU node", "Power: now and 1d ago", PANEL, "y", ref="B"), 0, Status.NEEDS_HISTORY,
               "returns data without offset 1d; Prometheus holds less history than that"),
        Result(CheckQuery("rules", "GPUMemoryPressure", PANEL, "z"), 0, Status.NEEDS_HISTORY,
               "returns data without offset 10m, 5m; Prometheus holds less history than that"),
    )
    text = not_yet([GroupResult(Group("GPU node", "node.json", tuple(r.query for r in rows)), rows)], 41.6)
    assert text.startswith("not on this node yet: 2 queries look further back than the 42 s of history")
    assert "(offsets up to 1d)" in text
    assert not_yet([GroupResult(Group("GPU node", "node.json", rows[:1]), rows[:1])], 41.6) == ""


def test_brief_report_lists_only_what_is_not_plainly_ok() -> None:
    rows = (
        Result(CheckQuery("GPU node", "Utilization", PANEL, "x"), 8, Status.OK),
        Result(CheckQuery("GPU node", "Power per GPU", PANEL, "y", ref="L"), 0, Status.OPTIONAL, "no LIMIT: optional"),
        Result(CheckQuery("GPU node", "Typo", PANEL, "z"), 0, Status.EMPTY, "no series z"),
    )
    text = render_brief([GroupResult(Group("GPU node", "node.json", tuple(r.query for r in rows)), rows)])
    assert text.splitlines() == [
        "GPU node (3 queries): 1 ok, 1 optional, 1 no data",
        "    optional: Power per GPU: no LIMIT: optional",
        "    NO DATA: Typo: no series z",
    ]


def test_notification_line() -> None:
    body = {"status": "firing", "groupLabels": {"alertname": "GPUXidError", "cluster": "demo"},
            "commonLabels": {"severity": "warning"}, "alerts": [{}, {}]}
    assert notification_line(body) == ("  alertmanager -> webhook: FIRING alertname=GPUXidError, cluster=demo "
                                       "(warning), 2 alerts")


def test_every_injected_fault_names_a_gpu_of_the_simulated_node() -> None:
    assert FAULTS and all(0 <= int(f.split("=")[0]) < GPUS for f in FAULTS)


class FakeNvml:
    """pynvml as the probe sees it: a driver that starts or not, and a GPU count that reads or not."""

    def __init__(self, starts: bool, count: int | None) -> None:
        self.starts, self.count, self.shut_down = starts, count, False

    def nvmlInit(self) -> None:
        if not self.starts:
            raise RuntimeError("NVML Shared Library Not Found")

    def nvmlDeviceGetCount(self) -> int:
        if self.count is None:
            raise RuntimeError("Unknown Error")
        return self.count

    def nvmlShutdown(self) -> None:
        self.shut_down = True


@pytest.mark.parametrize(("starts", "count", "expected"), [(True, 2, 2), (False, None, 0), (True, None, 0)],
                         ids=["two GPUs", "no driver", "count fails"])
def test_the_nvml_probe_counts_gpus_or_says_0_and_shuts_nvml_down(
        monkeypatch: pytest.MonkeyPatch, starts: bool, count: int | None, expected: int) -> None:
    nvml = FakeNvml(starts, count)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    assert nvml_gpu_count() == expected
    assert nvml.shut_down == starts  # started, then shut down whatever the count did


# ------------------------------------------------------------------------ the real thing


def test_without_matplotlib_the_demo_says_so_and_carries_on(monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:
    from gpudash.stack.demo import preview_demo

    for name in [m for m in sys.modules if m.startswith(("gpudash.preview.draw", "gpudash.preview.canvas",
                                                          "gpudash.preview.forms"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.chdir(ROOT)
    said: list[str] = []
    # No Prometheus at this address: the missing extra is found before any server is asked.
    assert preview_demo("http://127.0.0.1:9", tmp_path / "previews", said.append) == []
    assert said == ["previews: not drawn (previews need matplotlib, which is not installed: "
                    "pip install 'gpudash[preview]')"]
    assert not (tmp_path / "previews").exists()
