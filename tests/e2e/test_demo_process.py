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

from gpudash.config.loading import load_site
from gpudash.stack.demo import nvml_gpu_count
from gpudash.stack.demo_node import GPUS, INJECTED, LIVE_PAGE

# Fleet panels that may be empty on the simulated node: nobody stopped reporting, and no GPU is over 90 % and
# growing (GPU 2's leak is slower).
DEMO_EMPTY = {("nothing matches now", "Exporters and GPUs that stopped reporting"),
              ("nothing matches now", "Memory pressure: over 90% and growing (top 10)")}
# The simulated node's jobs have trained for 50 minutes when the demo starts: a realistic floor for them now.
TRAINING_FLOOR = 85
FLEET_FLOOR = 60  # six GPUs training, one serving, one free


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
        # the past backfilled and the XID seen arriving: every query of both dashboards has data, but for the
        # lists of GPUs that pass a test the node leaves empty
        # (the node's MIG instance table aside: no GPU of this node is partitioned)
        node = re.search(r"^GPU node \(\d+ queries\): \d+ ok(?:, \d+ nothing matches now)?\n((?:    .*\n)*)", out, re.M)
        assert node, out[-4000:]
        assert all(line.strip().startswith("nothing matches now: MIG instances: ")
                   for line in node.group(1).splitlines()), node.group(0)
        fleet = re.search(r"^GPU fleet \(\d+ queries\): .*\n((?:    .*\n)*)", out, re.M)
        assert fleet, out[-4000:]
        for line in fleet.group(1).splitlines():
            status, rest = line.strip().split(": ", 1)
            assert any(status == s and rest.startswith(f"{item}: ") for s, item in DEMO_EMPTY), line
        _assert_a_fleet_at_work_with_its_faults_firing_and_paged(out)
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


def test_demo_pushes_to_grafana_and_ctrl_c_stops_everything(tmp_path: Path,
                                                            tmp_path_factory: pytest.TempPathFactory) -> None:
    site = tmp_path_factory.mktemp("site") / "gpudash.yaml"  # the checkout's own gpudash.yaml is left alone
    site.write_text("# no site_id yet: the demo's push writes one\n")
    with StandIn("11.6.0") as grafana:
        env = {**os.environ, "TMPDIR": str(tmp_path), "GRAFANA_URL": grafana.url, "GRAFANA_TOKEN": grafana.token,
               "PYTHONUNBUFFERED": "1", "GPUDASH_SITE": str(site)}
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

        # pushed: the data source points at the demo's Prometheus, and both dashboards are there, as a site of
        # its own whose id the push wrote into the site config
        assert {"gpudash-fleet", "gpudash-node"} <= set(grafana.store.dashboards)
        site_id = load_site(site).site_id
        assert site_id and f"site: wrote `site_id: {site_id}` into {site}" in out
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


def _assert_a_fleet_at_work_with_its_faults_firing_and_paged(out: str) -> None:
    """The summary of the simulated node: jobs busy, every injected fault's alerts firing, and the live one paged."""
    gpus = re.search(rf"^  GPUs +{GPUS} reporting, (\d+) idle", out, re.M)
    assert gpus and int(gpus.group(1)) <= 1, out[-4000:]  # GPU 3 is free; every other GPU works
    util = re.search(r"^  utilization +(\d+) % mean$", out, re.M)
    assert util and int(util.group(1)) >= FLEET_FLOOR, out[-4000:]
    job = re.search(r"^  jobs +4242: 6 GPUs, (\d+) % median utilization; 4300: 1 GPU, (\d+) %", out, re.M)
    assert job and int(job.group(1)) >= TRAINING_FLOOR and int(job.group(2)) > 0, out[-4000:]
    firing = re.search(r"^  alerts firing +(\d+) critical, (\d+) warning", out, re.M)
    assert firing and int(firing.group(1)) >= 2, out[-4000:]
    faults = out.split("injected faults:\n", 1)[1].splitlines()[:len(INJECTED)]
    for fault, line in zip(INJECTED, faults, strict=True):
        assert line.startswith(f"  GPU {fault.gpu}, {fault.what}: "), line
        for alert in fault.alerts:
            assert f"{alert} firing (" in line, line
    pages = re.findall(r"^  (\w+) \(critical\): GPU (\d) of gpu-node \(127\.0\.0\.1:\d+\), job (\d+); "
                       r"action: (\w+)\n    (.+)$", out, re.M)
    assert any(page[:4] == (LIVE_PAGE, "6", "4242", "reset_gpu") and page[4].startswith("XID 48 on GPU 6 ")
               for page in pages), out[-4000:]
    assert all(action != "none" for _, _, _, action, _ in pages)
