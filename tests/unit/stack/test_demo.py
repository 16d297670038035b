"""`make demo`, the README's main command: once as CI runs it, and until Ctrl-C with a Grafana to push to.

The end-to-end cases start the real servers through the real command; the unit cases cover what the demo
prints.
"""

from __future__ import annotations

from gpudash.check.run import GroupResult, Result, Status
from gpudash.check.targets import PANEL, Group, Query
from gpudash.stack.demo import FAULTS, GPUS, not_yet, nvml_gpu_count
from gpudash.stack.demo_report import notification_line, render_brief

# ------------------------------------------------------------------------ what it prints


def test_a_real_node_is_told_which_queries_need_more_history_and_how_far_back() -> None:
    rows = (
        Result(Query("GPU node", "Utilization", PANEL, "x"), 1, Status.OK),
        Result(Query("GPU node", "Power: now and 1d ago", PANEL, "y", ref="B"), 0, Status.NEEDS_HISTORY,
               "returns data without offset 1d; Prometheus holds less history than that"),
        Result(Query("rules", "GPUMemoryPressure", PANEL, "z"), 0, Status.NEEDS_HISTORY,
               "returns data without offset 10m, 5m; Prometheus holds less history than that"),
    )
    text = not_yet([GroupResult(Group("GPU node", "node.json", tuple(r.query for r in rows)), rows)], 41.6)
    assert text.startswith("not on this node yet: 2 queries look further back than the 42 s of history")
    assert "(offsets up to 1d)" in text
    assert not_yet([GroupResult(Group("GPU node", "node.json", rows[:1]), rows[:1])], 41.6) == ""


def test_brief_report_lists_only_what_is_not_plainly_ok() -> None:
    rows = (
        Result(Query("GPU node", "Utilization", PANEL, "x"), 8, Status.OK),
        Result(Query("GPU node", "Power per GPU", PANEL, "y", ref="L"), 0, Status.OPTIONAL, "no LIMIT: optional"),
        Result(Query("GPU node", "Typo", PANEL, "z"), 0, Status.EMPTY, "no series z"),
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


def test_simulated_node_and_nvml_probe() -> None:
    assert GPUS == 8 and all(int(f.split("=")[0]) < GPUS for f in FAULTS)
    assert nvml_gpu_count() >= 0  # 0 here without a driver; the GPU count on a GPU node


# ------------------------------------------------------------------------ the real thing
