"""Requests and seconds for `gpudash push` and a no-op `gpudash sync` of 200 dashboards.

Runs against the in-repo Grafana stand-in (tests/grafana_standin) in a process of its own, optionally with
a fixed latency added to every answer to look like a Grafana across a network. The dashboards are clones
of the committed ones (dashboards/json), so each request carries a real-sized body. Request and write
counts are gpudash's own (the sync tests check they match the server's log).

    .venv/bin/python bench/sync_bench.py                # 200 dashboards, stand-ins 12.1.0 (/api) and 13.2.0 (/apis)
    .venv/bin/python bench/sync_bench.py --latency-ms 20 --grafana-version 9.5.21

On /api a no-op sync searches for the dashboards and GETs each one; on /apis it reads them from the list,
a page of specs per request. `cpu s` is gpudash's own CPU time: the wall-clock seconds also hold the
stand-in's (Python) time to answer, and whatever else the machine is running.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from grafana_standin.testkit import Result, run_gpudash, write_set  # noqa: E402

from gpudash.repository import DASHBOARDS_JSON_DIR  # noqa: E402
from gpudash.sync.local import load_local  # noqa: E402


def clones(count: int) -> list[dict[str, Any]]:
    templates = load_local(ROOT / DASHBOARDS_JSON_DIR)
    out = []
    for n in range(count):
        item = copy.deepcopy(templates[n % len(templates)])
        item["uid"] = f"bench-{n:04d}"
        item["title"] = f"{item['title']} {n:04d}"
        out.append(item)
    return out


@contextlib.contextmanager
def standin(version: str, latency_ms: float) -> Iterator[tuple[str, str]]:
    token = "glsa_bench_0123456789abcdef"
    process = subprocess.Popen(
        [sys.executable, "-m", "grafana_standin", "--grafana-version", version, "--token", token,
         "--latency-ms", str(latency_ms)], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT / "tests")},
        stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        yield process.stdout.readline().split(" at ")[-1].strip(), token
    finally:
        process.terminate()
        process.wait(timeout=10)


def run(url: str, token: str, workdir: Path, *args: str) -> tuple[Result, float, float]:
    """The run's result, its wall-clock seconds, and gpudash's own CPU seconds (the stand-in runs elsewhere)."""
    started, cpu = time.perf_counter(), time.process_time()
    result = run_gpudash([*args, "--dir", workdir / "json", "--site", workdir / "site.yaml",
                          "--thresholds", ROOT / "thresholds.yaml"],
                         {"GRAFANA_URL": url, "GRAFANA_TOKEN": token, "GPUDASH_SITE": None})
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    if result.code != 0:
        raise SystemExit(f"gpudash {' '.join(args)} failed:\n{result.text}")
    return result, seconds, cpu


def requests(result: Result) -> int:
    return int(re.findall(r"(\d+) requests", result.out)[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dashboards", type=int, default=200)
    parser.add_argument("--grafana-version", nargs="*", default=["12.1.0", "13.2.0"],
                        help="stand-in versions to run against (one run each)")
    parser.add_argument("--latency-ms", type=float, nargs="*", default=[0.0, 20.0],
                        help="latency added to every request (one run each)")
    args = parser.parse_args()
    local = clones(args.dashboards)
    size = sum(len(json.dumps(d)) for d in local) / len(local) / 1024
    print(f"gpudash sync benchmark: {len(local)} dashboards (clones of dashboards/json, {size:.0f} KiB each), "
          f"Grafana stand-in {', '.join(args.grafana_version)}")
    print(f"{'grafana':<8}{'api':<6}{'latency':>8}  {'step':<28}{'requests':>9}{'writes':>8}{'seconds':>9}"
          f"{'cpu s':>7}")
    for version, latency in ((v, ms) for v in args.grafana_version for ms in args.latency_ms):
        with tempfile.TemporaryDirectory() as tmp, standin(version, latency) as (url, token):
            workdir = Path(tmp)
            (workdir / "site.yaml").write_text("grafana:\n  folder: GPU bench\n  folder_uid: gpu-bench\n")
            write_set(workdir / "json", local)
            steps: list[tuple[str, str, dict[str, Any] | None]] = [
                ("push (empty Grafana)", "push", None), ("no-op sync", "sync", None),
                ("sync, 1 dashboard changed", "sync", {"description": "changed"})]
            for label, command, change in steps:
                if change:
                    write_set(workdir / "json", [{**local[0], **change}, *local[1:]])
                result, seconds, cpu = run(url, token, workdir, command)
                api = "/apis" if "(/apis" in result.out else "/api"
                print(f"{version:<8}{api:<6}{latency:>6.0f}ms  {label:<28}{requests(result):>9}{result.writes:>8}"
                      f"{seconds:>9.2f}{cpu:>7.2f}")

if __name__ == "__main__":
    main()
