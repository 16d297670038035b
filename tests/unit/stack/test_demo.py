"""What `make demo` prints, and how it decides between the GPUs of this node and a simulated one.

The demo itself, servers and all, runs in tests/e2e/test_demo_process.py.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from support.paths import ROOT

from gpudash.check.judge import GroupResult, Result, Status
from gpudash.check.queries import PANEL, CheckQuery, Group
from gpudash.config.loading import load_settings
from gpudash.stack.demo import not_yet, nvml_gpu_count
from gpudash.stack.demo_node import INJECTED
from gpudash.stack.demo_report import (
    alert_places,
    by_severity,
    is_page,
    notification_line,
    pages_and_faults,
    render_brief,
)
from gpudash.stack.servers import WebhookReceiver

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


PAGE = {"status": "firing", "groupLabels": {"alertname": "GPUXidError", "cluster": "demo", "instance": "h:1"},
        "commonLabels": {"severity": "critical", "alertname": "GPUXidError"},
        "alerts": [{"labels": {"alertname": "GPUXidError", "severity": "critical", "action": "reset_gpu",
                               "cluster": "demo", "instance": "h:1", "gpu": "6", "xid": "48"},
                    "annotations": {"summary": "XID 48 on GPU 6 on h:1 (demo)"}}]}
DIGEST = {"status": "firing", "commonLabels": {"severity": "warning", "cluster": "demo"},
          "alerts": [{"labels": {"alertname": "GPUMemoryLeakPredicted", "severity": "warning", "gpu": "2"}}]}


class Answers:
    """Prometheus's instant queries, answered from a table: the first expression fragment the query contains."""

    def __init__(self, table: dict[str, list[dict[str, Any]]]) -> None:
        self.table = table
        self.asked: list[str] = []

    def query(self, expr: str) -> list[dict[str, Any]]:
        self.asked.append(expr)
        return next((found for fragment, found in self.table.items() if fragment in expr), [])


def _alert(name: str, severity: str, gpu: str, state: str = "firing") -> dict[str, Any]:
    return {"metric": {"__name__": "ALERTS", "alertname": name, "severity": severity, "gpu": gpu,
                       "alertstate": state}, "value": [0, "1"]}


def test_a_page_names_its_alert_gpu_host_job_and_action() -> None:
    gpu_6 = [{"metric": {"hostname": "gpu-node", "hpc_job": "4242"}, "value": [0, "1"]}]
    prometheus = Answers({'DCGM_FI_DEV_GPU_UTIL{cluster="demo",instance="h:1",gpu="6"}': gpu_6})
    text = pages_and_faults(prometheus, load_settings(ROOT / "thresholds.yaml"), [DIGEST, PAGE])
    assert text.splitlines() == [
        "pages delivered to the webhook:",
        "  GPUXidError (critical): GPU 6 of gpu-node (h:1), job 4242; action: reset_gpu",
        "    XID 48 on GPU 6 on h:1 (demo)",
    ]
    assert pages_and_faults(Answers({}), load_settings(ROOT / "thresholds.yaml"), [DIGEST]) == (
        "pages delivered to the webhook: none")


def test_a_page_is_a_critical_notification_of_firing_alerts() -> None:
    assert is_page(PAGE) and is_page(PAGE, "GPUXidError") and not is_page(PAGE, "GPUEccUncorrectable")
    assert not is_page(DIGEST)
    assert not is_page({**PAGE, "status": "resolved"})


def test_each_injected_fault_says_whether_its_alerts_fire_on_its_gpu() -> None:
    firing = [_alert("GPUHighTemperature", "critical", "5"), _alert("GPUHighTemperature", "warning", "5"),
              _alert("GPUXidError", "critical", "6"), _alert("GPUMemoryLeakPredicted", "warning", "3")]
    pending = [_alert("GPUThermalThrottling", "warning", "5", "pending")]
    prometheus = Answers({'alertstate="firing"': firing, 'alertstate="pending"': pending})
    text = pages_and_faults(prometheus, load_settings(ROOT / "thresholds.yaml"), [], INJECTED)
    faults = text.splitlines()[text.splitlines().index("injected faults:") + 1:]
    assert [line.split(": ", 1)[1] for line in faults] == [
        "GPUMemoryLeakPredicted not yet",  # firing on GPU 3 is not the injected leak on GPU 2
        "GPUHighTemperature firing (critical, warning); GPUThermalThrottling pending",
        "GPUXidError firing (critical); GPUEccUncorrectable not yet",
    ]
    assert by_severity(firing + pending) == "2 critical, 3 warning"


def test_an_alert_firing_twice_on_one_gpu_names_the_gpu_once() -> None:
    firing = [_alert("GPUHighTemperature", "warning", "5"), _alert("GPUHighTemperature", "warning", "5"),
              _alert("GPUHighTemperature", "warning", "10"), _alert("GPUXidError", "critical", "6")]
    assert alert_places(firing, "gpu") == ["GPUHighTemperature (warning) on GPU 5, GPU 10",
                                           "GPUXidError (critical) on GPU 6"]


def test_the_webhook_receiver_waits_for_the_notification_asked_for() -> None:
    receiver = WebhookReceiver()
    assert receiver.wait_for(is_page, timeout=0) is None
    receiver._record(DIGEST)
    arrives = threading.Thread(target=receiver._record, args=(PAGE,))
    arrives.start()
    assert receiver.wait_for(is_page, timeout=60) == PAGE  # the condition, not the timeout, ends the wait
    arrives.join()
    assert receiver.received() == [DIGEST, PAGE]


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


def test_the_demo_waits_on_every_recording_a_dashboard_reads_through_a_subquery() -> None:
    # a node without a simulated past starts with none of them: a panel that reads one through a subquery (the
    # fleet's goodput) answers nothing until the recording is older than one subquery step
    from gpudash.stack.demo import subqueried_recordings

    found = subqueried_recordings()
    assert "cluster:gpu_utilization:sum" not in found  # read plainly, never through a subquery
    assert "cluster:gpu_count:count" in found  # the fleet's goodput and interruption rate sample it by one
