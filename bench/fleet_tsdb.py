"""Backfill a synthetic fleet into a real Prometheus TSDB, and run Prometheus on it.

1. Raw series: the fleet is cut into (2 h block, group of nodes) pieces; each piece is written as an
   OpenMetrics file (to /dev/shm when it has room) and turned into a block by
   `promtool tsdb create-blocks-from openmetrics`, on every core at once. A piece holds one block's
   time range only, so promtool reads its file twice (bounds, then samples) instead of once per block.
2. Recording rules: `promtool tsdb create-blocks-from rules` evaluates gpudash's recording rules
   (gpudash.promql.for_settings.recording_rules) against a Prometheus serving the raw blocks, over the detail
   windows only (a recorded series is read nowhere else), in passes: a recording that reads another comes after it.
   Each at its group's interval, as the generated file has it: the hourly ones (the health ledger's) every hour.
3. Compaction: Prometheus itself merges the overlapping pieces and compacts 2 h blocks into 6 h and 18 h
   ones, as it would have done to data it scraped; `compact` waits until it has.
"""

from __future__ import annotations

import itertools
import json
import multiprocessing
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from bench import fleetgen as fg
from gpudash.promql.query import HOURLY
from gpudash.promql.recordings import RECORDING_BY_NAME
from gpudash.rules.recording import GROUP_NAME, LEDGER_GROUP_NAME

BLOCK_S = 2 * fg.HOUR
LINES_PER_FILE = 5_000_000  # ~1.5 GB of OpenMetrics text per piece
# $PROMETHEUS times the queries on another Prometheus than the one on PATH (the promtool on PATH builds the TSDB)
PROMETHEUS = os.environ.get("PROMETHEUS") or shutil.which("prometheus") or "/usr/bin/prometheus"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"


def prometheus_version() -> str:
    """The Prometheus that answers the benches' queries, as its --version names it ("Prometheus 2.42.0+ds")."""
    try:
        done = subprocess.run([PROMETHEUS, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return version_named("")
    return version_named(done.stdout or done.stderr)


def version_named(printed: str) -> str:
    """"Prometheus 3.5.3+ds1" from what `prometheus --version` printed ("prometheus, version 3.5.3+ds1 (...)")."""
    words = printed.split()
    if len(words) > 2 and words[1] == "version":
        return f"Prometheus {words[2].rstrip(',')}"
    return "Prometheus (its version unknown)"


def promtool(*args: str) -> None:
    """Run promtool; a failure raises with the end of what it printed."""
    done = subprocess.run([PROMTOOL, *args], capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"promtool {' '.join(args[:3])} failed: {(done.stderr or done.stdout)[-2000:]}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_get(url: str, timeout: float = 10.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return bytes(response.read())


@contextmanager
def running_prometheus(data_dir: Path, log: Path | None = None, query_timeout: str | None = None) -> Iterator[str]:
    """A Prometheus on 127.0.0.1 serving `data_dir` (no scrapes, no rules); yields its base URL. `query_timeout`
    replaces Prometheus's 2 minutes (a backfill's range query over thousands of GPUs on a busy machine)."""
    port = free_port()
    config = data_dir.parent / f".prometheus-{port}.yml"
    config.write_text("global:\n  scrape_interval: 15s\n")
    out = open(log or os.devnull, "ab")  # noqa: SIM115 (closed below, after the process)
    proc = subprocess.Popen(
        [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={data_dir}",
         f"--web.listen-address=127.0.0.1:{port}", "--log.level=info",
         *([f"--query.timeout={query_timeout}"] if query_timeout else [])],
        stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"prometheus exited with {proc.returncode} (log: {log})")
            try:
                http_get(f"{url}/-/ready", 2)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"prometheus on {data_dir} not ready after 300 s") from None
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        out.close()
        config.unlink(missing_ok=True)


def metric_value(url: str, name: str) -> float:
    """A sample of Prometheus's own /metrics (0 when absent)."""
    for line in http_get(f"{url}/metrics").decode().splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


# ------------------------------------------------------------------------------------------ raw series


@dataclass(frozen=True)
class Piece:
    lo: int  # unix seconds, block start
    hi: int
    first_node: int
    last_node: int  # exclusive


def pieces(shape: fg.FleetShape, timeline: fg.Timeline, series_per_gpu: int) -> list[Piece]:
    out: list[Piece] = []
    for lo in range(timeline.start // BLOCK_S * BLOCK_S, timeline.end, BLOCK_S):
        n = len(timeline.instants(lo, lo + BLOCK_S))
        if not n:
            continue
        per_node = n * series_per_gpu * fg.GPUS_PER_NODE
        step = max(1, LINES_PER_FILE // per_node)
        out += [Piece(lo, lo + BLOCK_S, a, min(a + step, shape.nodes)) for a in range(0, shape.nodes, step)]
    return out


_POOL: list[fg.NodeTrace] = []  # the simulated pool, shared with forked workers


@dataclass(frozen=True)
class Job:
    shape: fg.FleetShape
    timeline: fg.Timeline
    keys: tuple[str, ...]
    piece: Piece
    scratch: Path
    data_dir: Path


def _run_piece(job: Job) -> tuple[int, float, float]:
    """Write one piece as OpenMetrics, backfill it with promtool; (bytes, write s, promtool s)."""
    p, instants = job.piece, job.timeline.instants()
    chosen = np.flatnonzero((instants >= p.lo) & (instants < p.hi))
    sl = slice(int(chosen[0]), int(chosen[-1]) + 1)
    started = time.monotonic()
    used = sorted({n % len(_POOL) for n in range(p.first_node, p.last_node)})
    formatted = {t: [fg.pool_series(_POOL[t], g, job.keys, sl, instants) for g in range(fg.GPUS_PER_NODE)]
                 for t in used}
    fd, name = tempfile.mkstemp(prefix=f"fleet-{p.lo}-{p.first_node}-", suffix=".om", dir=job.scratch)
    path = Path(name)
    try:
        with os.fdopen(fd, "w", buffering=1 << 22) as out:
            for node in range(p.first_node, p.last_node):
                for text in fg.node_text(job.shape, node, formatted[node % len(_POOL)]):
                    out.write(text)
            out.write("# EOF\n")
        size = path.stat().st_size
        written = time.monotonic()
        promtool("tsdb", "create-blocks-from", "openmetrics", "--quiet", str(path), str(job.data_dir))
        return size, written - started, time.monotonic() - written
    finally:
        path.unlink(missing_ok=True)


def scratch_dir(fallback: Path, workers: int) -> Path:
    shm = Path("/dev/shm")
    need = workers * LINES_PER_FILE * 400
    if shm.is_dir() and shutil.disk_usage(shm).free > need:
        return shm
    return fallback


def backfill_raw(shape: fg.FleetShape, timeline: fg.Timeline, keys: Sequence[str], pool: list[fg.NodeTrace],
                 data_dir: Path, workers: int, say: object = print) -> dict[str, float]:
    global _POOL
    _POOL = pool
    series_per_gpu = len(fg.pool_series(pool[0], 0, keys, slice(0, 1), timeline.instants())) + 1  # + a process
    todo = pieces(shape, timeline, series_per_gpu)
    scratch = scratch_dir(data_dir.parent, workers)
    jobs = [Job(shape, timeline, tuple(keys), p, scratch, data_dir) for p in todo]
    total = {"bytes": 0.0, "write_s": 0.0, "promtool_s": 0.0, "pieces": float(len(jobs))}
    started = time.monotonic()
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(workers) as workers_pool:
        for i, (size, write_s, tool_s) in enumerate(workers_pool.imap_unordered(_run_piece, jobs), 1):
            total["bytes"] += size
            total["write_s"] += write_s
            total["promtool_s"] += tool_s
            if callable(say) and (i % max(1, len(jobs) // 10) == 0 or i == len(jobs)):
                say(f"  {shape.gpus} GPUs: {i}/{len(jobs)} pieces, {total['bytes'] / 1e9:.1f} GB OpenMetrics, "
                    f"{time.monotonic() - started:.0f} s")
    total["wall_s"] = time.monotonic() - started
    return total


def simulate_pool(seed: int, timeline: fg.Timeline, keys: Sequence[str], workers: int,
                  nodes: int = fg.TEMPLATE_NODES) -> list[fg.NodeTrace]:
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(workers) as p:
        return p.starmap(fg.simulate_node, [(seed, n, timeline, keys) for n in range(nodes)])


# ------------------------------------------------------------------------------------------ rules


def rules_file(path: Path, rules: Sequence[tuple[str, str]], interval_s: int) -> None:
    """(record, expression) pairs as the generated file groups them: the hourly recordings (the health ledger's)
    in a group evaluated every hour, the others in one evaluated every `interval_s`."""
    hourly = {record for record, _ in rules if record in RECORDING_BY_NAME and RECORDING_BY_NAME[record].hourly}
    groups = [(GROUP_NAME, interval_s, [r for r in rules if r[0] not in hourly]),
              (LEDGER_GROUP_NAME, HOURLY.seconds, [r for r in rules if r[0] in hourly])]
    doc = {"groups": [{"name": name, "interval": f"{every}s",
                       "rules": [{"record": record, "expr": expr} for record, expr in chosen]}
                      for name, every, chosen in groups if chosen]}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


def backfill_rules_in_passes(data_dir: Path, log: Path | None, passes: Sequence[Sequence[tuple[str, str]]],
                             interval_s: int, windows: Sequence[fg.Window], scratch: Path) -> None:
    """Backfill (record, expression) pairs pass by pass into `data_dir`: each pass is evaluated against a
    Prometheus serving what the passes before it wrote, so a recording that reads another one finds it."""
    for i, batch in enumerate(passes):
        out_dir, rule_file = scratch / f"rule-blocks-{i}", scratch / f"recording-{i}.rules.yml"
        shutil.rmtree(out_dir, ignore_errors=True)
        rules_file(rule_file, batch, interval_s)
        with running_prometheus(data_dir, log, query_timeout="30m") as url:
            for window in windows:
                promtool("tsdb", "create-blocks-from", "rules", "--quiet", f"--url={url}", f"--start={window.start}",
                         f"--end={window.end}", f"--output-dir={out_dir}", str(rule_file))
        for block in out_dir.iterdir() if out_dir.exists() else ():
            block.rename(data_dir / block.name)
        shutil.rmtree(out_dir, ignore_errors=True)


# ------------------------------------------------------------------------------------------ blocks


def blocks(data_dir: Path) -> list[dict[str, int]]:
    """Each block's time range and size, oldest first."""
    out = []
    for meta_path in data_dir.glob("*/meta.json"):
        meta = json.loads(meta_path.read_text())
        stats = meta.get("stats", {})
        out.append({"mint": meta["minTime"], "maxt": meta["maxTime"], "series": stats.get("numSeries", 0),
                    "samples": stats.get("numSamples", 0)})
    return sorted(out, key=lambda b: (b["mint"], b["maxt"]))


def overlapping(bs: list[dict[str, int]]) -> bool:
    return any(a["maxt"] > b["mint"] for a, b in itertools.pairwise(bs))


def compact(data_dir: Path, log: Path | None, timeout_s: float = 3600) -> None:
    """Let Prometheus compact the blocks: wait for its second compaction run, which starts after the first ends."""
    with running_prometheus(data_dir, log) as url:
        deadline = time.monotonic() + timeout_s
        while metric_value(url, "prometheus_tsdb_compactions_triggered_total") < 2:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{data_dir}: compaction did not settle within {timeout_s:.0f} s")
            time.sleep(2)
    if overlapping(blocks(data_dir)):
        raise RuntimeError(f"{data_dir}: blocks still overlap after compaction")
