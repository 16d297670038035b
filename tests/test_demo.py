"""`make demo`, the README's main command: once as CI runs it, and until Ctrl-C with a Grafana to push to.

The end-to-end cases start the real servers through the real command; the unit cases cover what the demo
prints.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from grafana_standin import StandIn

from gpudash.check.run import GroupResult, Result, Status
from gpudash.check.targets import PANEL, CheckQuery, Group
from gpudash.stack.demo import FAULTS, GPUS, not_yet, nvml_gpu_count
from gpudash.stack.demo_report import notification_line, render_brief

ROOT = Path(__file__).resolve().parent.parent


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


def test_simulated_node_and_nvml_probe() -> None:
    assert GPUS == 8 and all(int(f.split("=")[0]) < GPUS for f in FAULTS)
    assert nvml_gpu_count() >= 0  # 0 here without a driver; the GPU count on a GPU node


# ------------------------------------------------------------------------ the real thing


def _make_demo_once() -> list[str]:
    """`make demo ONCE=1`; when the virtualenv was made by other means, tell make not to reinstall it."""
    up_to_date = subprocess.run(["make", "-q", ".venv/.installed"], cwd=ROOT, capture_output=True).returncode == 0
    return ["make", "--no-print-directory", "demo", "ONCE=1", *([] if up_to_date else ["-o", ".venv/.installed"])]


@pytest.mark.e2e
def test_make_demo_once_as_the_readme_says(tmp_path: Path) -> None:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    env.pop("GRAFANA_URL", None)
    started = time.monotonic()
    done = subprocess.run(_make_demo_once(), cwd=ROOT, capture_output=True, text=True, timeout=240, env=env)
    elapsed = time.monotonic() - started
    out = done.stdout
    assert done.returncode == 0, out[-4000:] + done.stderr[-2000:]
    assert re.search(r"checked \d+ queries against http://127\.0\.0\.1:\d+: .*; 0 failed", out)
    assert "GPU fleet (" in out and "GPU node (" in out
    if nvml_gpu_count() == 0:
        assert "NVML: no GPUs here, simulating a node" in out
        # yesterday backfilled and the XID seen arriving: every query of both dashboards has data
        for title in ("GPU fleet", "GPU node"):
            assert re.search(rf"^{title} \((\d+) queries\): \1 ok$", out, re.M), title
        assert f"  GPUs           {GPUS} reporting" in out
        assert "GPUXidError (warning) on GPU 6" in out  # the injected XID, firing already
    else:
        assert f"NVML: {nvml_gpu_count()} GPUs, reading them" in out
    assert "Grafana: not pushed (GRAFANA_URL is not set)" in out
    assert list(tmp_path.iterdir()) == []  # every temporary directory removed
    assert elapsed < 120


@pytest.mark.e2e
def test_demo_pushes_to_grafana_and_ctrl_c_stops_everything(tmp_path: Path) -> None:
    with StandIn("11.6.0") as grafana:
        env = {**os.environ, "TMPDIR": str(tmp_path), "GRAFANA_URL": grafana.url, "GRAFANA_TOKEN": grafana.token,
               "PYTHONUNBUFFERED": "1"}
        # its own process group, as a terminal's foreground job: Ctrl-C reaches every process in it
        proc = subprocess.Popen([sys.executable, "-m", "gpudash", "demo"], cwd=ROOT, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        assert proc.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("running;"):
                break
        out = "".join(lines)
        assert "running;" in out, out
        urls = re.findall(r"http://127\.0\.0\.1:\d+", out)
        prometheus = re.search(r"prometheus: +(http://127\.0\.0\.1:\d+)", out)
        assert prometheus is not None
        assert urllib.request.urlopen(f"{prometheus.group(1)}/-/ready", timeout=5).status == 200

        # pushed: the data source points at the demo's Prometheus, and both dashboards are there
        assert {"gpudash-fleet", "gpudash-node"} <= set(grafana.store.dashboards)
        assert [d.url for d in grafana.store.datasources.values()] == [prometheus.group(1)]

        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does
        rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, rest
    assert "stopped; every process the demo started is gone and its data removed" in rest
    for url in set(urls):
        with pytest.raises((urllib.error.URLError, OSError)):
            urllib.request.urlopen(url, timeout=2)
    assert list(tmp_path.iterdir()) == []
