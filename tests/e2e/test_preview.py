"""`gpudash preview` against a real Prometheus holding the last 20 minutes of a simulated 8-GPU node.

The history and its recording rules are written as TSDB blocks before Prometheus starts, so the data is
there at once and the same on every run: the pictures' sizes come from the grid, and a stat panel's colour
at its place is the colour its thresholds give the value Prometheus answers for its query.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cli import gpudash
from support.e2e import gpudash_rules, site_yaml
from support.paths import ROOT
from support.pictures import dominant_color, read_png
from support.slack import budget

from gpudash.preview.colors import threshold_color
from gpudash.preview.panel_queries import builtins, choose_variables, panel_queries
from gpudash.preview.pixels import box_of, canvas_size
from gpudash.repository import RECORDING_FILE
from gpudash.stack.history import SeededPrometheus, moments, simulated_openmetrics, yesterday_blocks
from gpudash.stack.process import PrometheusProcess
from gpudash.stack.servers import rule_files

GPUS, SEED = 8, 5
ADDRESS = "127.0.0.1:9400"
WORKLOADS = ("3=idle", "7=inference")
FAULTS = ("5=thermal:93",)  # GPU 5 runs hot: the hottest-GPU stat turns a threshold colour
JSON_DIR = ROOT / "dashboards" / "json"


def _dashboard(uid: str) -> dict[str, Any]:
    data = json.loads((JSON_DIR / f"{uid}.json").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusProcess]:
    tmp = tmp_path_factory.mktemp("preview-e2e")
    files = gpudash_rules(tmp / "generated", site_yaml(tmp / "site.yml", "e2e", [ADDRESS]))
    rules = rule_files(files)
    times = moments(time.time() - 600, 600, 540, 15.0)  # 20 minutes, ending a minute ago
    target = {"job": "gpu-exporter", "instance": ADDRESS, "cluster": "e2e", "rack": "rack-1"}
    history = simulated_openmetrics(GPUS, SEED, times, target, faults=FAULTS, workloads=WORKLOADS)
    with yesterday_blocks(history, rules[Path(RECORDING_FILE).name], times[0], times[-1]) as blocks, \
            SeededPrometheus("global: {}\n", blocks=blocks) as server:
        server.wait_for("cluster:gpu_count:count", timeout=budget(30))
        yield server


def test_preview_draws_each_dashboard_at_its_grid_size_and_stats_in_threshold_colours(
        prometheus: PrometheusProcess, tmp_path: Path) -> None:
    out = tmp_path / "previews"
    done = gpudash("preview", "--prometheus", prometheus.url, "--out", str(out), "--range", "15m",
                   "--dashboard", "gpudash-fleet", "--dashboard", "gpudash-node", cwd=ROOT)
    assert done.code == 0, done.err
    assert done.out.splitlines() == [str(out / "gpudash-fleet.png"), str(out / "gpudash-node.png")]
    for uid in ("gpudash-fleet", "gpudash-node"):
        pixels = read_png(out / f"{uid}.png")
        width, height = canvas_size(_dashboard(uid))
        assert pixels.shape[:2] == (height, width), uid
    seconds = [float(s) for s in re.findall(r"^drew \S+ \(([\d.]+) s\)$", done.err, re.M)]
    # a few seconds each on an idle machine; the limit is a safety net (bench/preview figures are the measure)
    assert len(seconds) == 2 and max(seconds) < budget(60), done.err

    fleet = _dashboard("gpudash-fleet")
    pixels = read_png(out / "gpudash-fleet.png")
    for title in ("Hottest GPU", "Idle GPUs", "Mean utilization"):
        panel = next(p for p in fleet["panels"] if p.get("title") == title)
        values = {**choose_variables(fleet, lambda label, selector: []), **builtins(900, 15)}
        (query,) = panel_queries(panel, values)
        answer = prometheus.query(query.expr)
        assert answer, f"{title}: no data for {query.expr}"
        value = float(answer[0]["value"][1])
        assert dominant_color(pixels, box_of(panel)) == threshold_color(panel, value), (title, value)


def test_compare_draws_before_and_after_side_by_side(prometheus: PrometheusProcess, tmp_path: Path) -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout")
    out = tmp_path / "compare"
    done = gpudash("preview", "--prometheus", prometheus.url, "--out", str(out), "--range", "15m",
                   "--dashboard", "gpudash-job", "--compare", "HEAD", cwd=ROOT)
    assert done.code == 0, done.err
    assert done.out.splitlines() == [str(out / "gpudash-job.compare.png")]
    width, _ = canvas_size(_dashboard("gpudash-job"))
    assert read_png(out / "gpudash-job.compare.png").shape[1] == 2 * width


def test_an_unreachable_prometheus_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "none"
    done = gpudash("preview", "--prometheus", "http://127.0.0.1:9", "--out", str(out), cwd=ROOT)
    assert done.code == 4
    assert done.err.startswith("gpudash: cannot reach Prometheus at http://127.0.0.1:9") and done.err.count("\n") == 1
    assert not out.exists()


def test_an_unknown_dashboard_is_named(prometheus: PrometheusProcess, tmp_path: Path) -> None:
    done = gpudash("preview", "--prometheus", prometheus.url, "--out", str(tmp_path / "x"), "--dashboard", "nope",
                   cwd=ROOT)
    assert done.code == 2
    assert done.err.startswith("gpudash: --dashboard nope: no such dashboard uid (known: gpudash-fabric, gpudash-fleet")
