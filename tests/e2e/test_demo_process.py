"""`make demo ONCE=1` as the README says, and `gpudash demo` pushing to Grafana until Ctrl-C stops it."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from grafana_standin import StandIn
from support.paths import ROOT
from support.slack import budget
from support.waiting import eventually

from gpudash.stack.demo import GPUS, nvml_gpu_count

# Fleet panels that may be empty in the demo's first minute: nobody stopped reporting, no GPU is over 90 % and
# growing yet (growth is against 15 minutes ago), none throttled yet; and the simulated exporter is not
# dcgm-exporter.
DEMO_EMPTY = {("nothing matches now", "Exporters and GPUs that stopped reporting"),
              ("nothing matches now", "Memory pressure: over 90% and growing (top 10)"),
              ("needs history", "Memory pressure: over 90% and growing (top 10)"),
              ("nothing matches now", "Throttled GPUs now (top 10)"),
              ("optional", "Throttled GPUs now (top 10)")}


def _make_demo_once() -> list[str]:
    """`make demo ONCE=1`; when the virtualenv was made by other means, tell make not to reinstall it."""
    up_to_date = subprocess.run(["make", "-q", ".venv/.installed"], cwd=ROOT, capture_output=True).returncode == 0
    return ["make", "--no-print-directory", "demo", "ONCE=1", *([] if up_to_date else ["-o", ".venv/.installed"])]


def test_make_demo_once_as_the_readme_says(tmp_path: Path) -> None:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    env.pop("GRAFANA_URL", None)
    done = subprocess.run(_make_demo_once(), cwd=ROOT, capture_output=True, text=True, timeout=budget(240), env=env)
    out = done.stdout
    assert done.returncode == 0, out[-4000:] + done.stderr[-2000:]
    assert re.search(r"checked \d+ queries against http://127\.0\.0\.1:\d+: .*; 0 failed", out)
    assert "GPU fleet (" in out and "GPU node (" in out
    if nvml_gpu_count() == 0:
        assert "NVML: no GPUs here, simulating a node" in out
        # yesterday backfilled and the XID seen arriving: every query of both dashboards has data, but for the
        # lists of GPUs that pass a test a healthy minute may leave empty, and dcgm-exporter's optional counter
        assert re.search(r"^GPU node \((\d+) queries\): \1 ok$", out, re.M)
        fleet = re.search(r"^GPU fleet \(\d+ queries\): .*\n((?:    .*\n)*)", out, re.M)
        assert fleet, out[-4000:]
        for line in fleet.group(1).splitlines():
            status, rest = line.strip().split(": ", 1)
            assert any(status == s and rest.startswith(f"{item}: ") for s, item in DEMO_EMPTY), line
        assert f"  GPUs           {GPUS} reporting" in out
        assert "GPUXidError (warning) on GPU 6" in out  # the injected XID, firing already
    else:
        assert f"NVML: {nvml_gpu_count()} GPUs, reading them" in out
    assert "Grafana: not pushed (GRAFANA_URL is not set)" in out
    # a picture of every dashboard, drawn from the demo's Prometheus, still there after it stopped
    shown = re.findall(r"^  (\.demo/previews/\S+\.png)$", out, re.M)
    assert "previews (each dashboard drawn from this Prometheus, no Grafana needed):" in out
    uids = sorted(p.stem for p in (ROOT / "dashboards" / "json").glob("*.json"))
    assert sorted(shown) == [f".demo/previews/{uid}.png" for uid in uids]
    assert all((ROOT / path).stat().st_size > 10_000 for path in shown)
    assert list(tmp_path.iterdir()) == []  # every temporary directory removed


def test_demo_pushes_to_grafana_and_ctrl_c_stops_everything(tmp_path: Path) -> None:
    with StandIn("11.6.0") as grafana:
        env = {**os.environ, "TMPDIR": str(tmp_path), "GRAFANA_URL": grafana.url, "GRAFANA_TOKEN": grafana.token,
               "PYTHONUNBUFFERED": "1"}
        # its own process group, as a terminal's foreground job: Ctrl-C reaches every process in it
        proc = subprocess.Popen([sys.executable, "-m", "gpudash", "demo"], cwd=ROOT, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        stdout = proc.stdout
        assert stdout is not None
        lines: list[str] = []

        def read() -> None:
            for line in stdout:
                lines.append(line)

        reading = threading.Thread(target=read, daemon=True)
        reading.start()

        def running() -> bool:
            if proc.poll() is not None and not reading.is_alive():
                raise AssertionError("the demo exited: " + "".join(lines))
            return any(line.startswith("running;") for line in lines)

        eventually(running, timeout=180, what="the demo to say it is running")
        out = "".join(lines)
        urls = re.findall(r"http://127\.0\.0\.1:\d+", out)
        prometheus = re.search(r"prometheus: +(http://127\.0\.0\.1:\d+)", out)
        assert prometheus is not None
        assert urllib.request.urlopen(f"{prometheus.group(1)}/-/ready", timeout=budget(5)).status == 200

        # pushed: the data source points at the demo's Prometheus, and both dashboards are there
        assert {"gpudash-fleet", "gpudash-node"} <= set(grafana.store.dashboards)
        assert [d.url for d in grafana.store.datasources.values()] == [prometheus.group(1)]

        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does
        proc.wait(timeout=budget(60))
        reading.join(10)
        rest = "".join(lines)
    assert proc.returncode == 0, rest
    assert "stopped; every process the demo started is gone and its data removed" in rest
    for url in set(urls):
        with pytest.raises((urllib.error.URLError, OSError)):
            urllib.request.urlopen(url, timeout=2)
    assert list(tmp_path.iterdir()) == []
