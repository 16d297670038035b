"""The fabric dashboard at fleet scale: 1,024 nodes x 8 InfiniBand ports in a Prometheus TSDB, opened as Grafana
opens it (`python bench/fleet_scale.py --fabric-section`).

The TSDB (cached under --cache as `fabric-<nodes>-nodes`, apart from the GPU fleets' TSDBs): the ports and GPUs of
bench/fabricgen.py at a 15 s scrape over the fabric dashboard's default range (and 15 min before it, for the 5m
rates), written as OpenMetrics per (2 h block, group of nodes) and backfilled with promtool on every core; then the
fabric's recording rules backfilled on top (bench/fleet_tsdb.py), then the fabric alerts as Prometheus would have
written them into `ALERTS` over the last `ALERTS_MIN` minutes (the panels that read `ALERTS` are instant queries):
each alert's expression recorded as `ALERTS{alertname, alertstate="firing", severity, action}`, without its `for:`
(every fault began longer before the end than any of the alerts' `for:`). Prometheus then compacts the blocks.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from bench import fabricgen as fb
from bench import fleet_report, fleet_tsdb, grafana_load, rule_cost
from bench import fleetgen as fg
from gpudash.catalog import DCGM
from gpudash.config.loading import Settings
from gpudash.panels.build import build_all
from gpudash.promql.fabric_recordings import FABRIC_RECORDINGS
from gpudash.promql.for_settings import recording_rules
from gpudash.repository import DEFINITIONS_DIR, FABRIC_UID
from gpudash.rules.alerts import alert_rules
from gpudash.rules.fabric_alerts import FABRIC_ALERTS

ROOT = Path(__file__).resolve().parent.parent
NODES = 1024
SECTION = f"## The fabric dashboard at {NODES:,} nodes × {fb.PORTS_PER_NODE} ports"
RECORDED, RAW = "gpudash fabric (recording rules)", "gpudash fabric (raw expressions)"
ALERTS_MIN = 30
MARGIN_S = 15 * 60
FORMAT = 1  # bump when what is generated changes, so a cached TSDB is rebuilt


def dashboards(settings: Settings) -> dict[str, dict[str, Any]]:
    return {name: build_all(settings, ROOT / DEFINITIONS_DIR, recorded=recorded, profile_name="dcgm")
            [f"{FABRIC_UID}.json"] for name, recorded in ((RECORDED, True), (RAW, False))}


def timeline(settings: Settings, end: int) -> fg.Timeline:
    """Every 15 s over the dashboard's default range before `end`, and `MARGIN_S` before it."""
    start = end - settings.thresholds.dashboards.default_range.seconds - MARGIN_S
    return fg.Timeline(start, end, (fg.Window(start, end),))


def fabric_rules(settings: Settings) -> list[tuple[str, str]]:
    names = {rec.record for rec in FABRIC_RECORDINGS}
    return [(rec.record, expr) for rec, expr in recording_rules(settings, profile=DCGM) if rec.record in names]


def alerts_as_recordings(settings: Settings) -> list[dict[str, Any]]:
    """Each fabric alert as the recording of the `ALERTS` series Prometheus writes while it fires."""
    names = {spec.name for spec in FABRIC_ALERTS}
    return [{"record": "ALERTS", "expr": f"(\n{rule.expr}\n) * 0 + 1",
             "labels": {"alertname": rule.alert, "alertstate": "firing", "severity": rule.severity,
                        "action": rule.action, **rule.labels}}
            for rule in alert_rules(settings) if rule.alert in names]


# ------------------------------------------------------------------------------------------ raw series

_TRACES: dict[fb.Template, dict[str, np.ndarray]] = {}  # shared with the forked workers


@dataclass(frozen=True)
class Piece:
    shape: fg.FleetShape
    timeline: fg.Timeline
    piece: fleet_tsdb.Piece
    scratch: Path
    data_dir: Path


def _run_piece(job: Piece) -> int:
    """Write one piece as OpenMetrics and backfill it with promtool; its size in bytes."""
    p, shape, instants = job.piece, job.shape, job.timeline.instants()
    chosen = np.flatnonzero((instants >= p.lo) & (instants < p.hi))
    sl = slice(int(chosen[0]), int(chosen[-1]) + 1)
    troubled = fb.troubled_ports(shape)
    failing = {t.node for t in fb.troubles_in(shape) if t.kind == "fabric-failure"}
    healthy = [str(int(fb.fabric_status(shape, job.timeline, -1)[0]))] * (sl.stop - sl.start)
    keys = {fb.template_of(shape, n, port, troubled) for n in range(p.first_node, p.last_node)
            for port in range(fb.PORTS_PER_NODE)}
    ports = fb.formatted(_TRACES, sorted(keys), sl, instants)
    fd, name = tempfile.mkstemp(prefix=f"fabric-{p.lo}-{p.first_node}-", suffix=".om", dir=job.scratch)
    path = Path(name)
    try:
        with os.fdopen(fd, "w", buffering=1 << 22) as out:
            for node in range(p.first_node, p.last_node):
                stamps = [str(t) for t in (instants[sl] + fb.phase_s(node)).tolist()]
                status = healthy if node not in failing else [
                    str(int(v)) for v in fb.fabric_status(shape, job.timeline, node)[sl].tolist()]
                for text in fb.node_text(shape, node, ports, troubled, stamps, status):
                    out.write(text)
            out.write("# EOF\n")
        size = path.stat().st_size
        fleet_tsdb.promtool("tsdb", "create-blocks-from", "openmetrics", "--quiet", str(path), str(job.data_dir))
        return size
    finally:
        path.unlink(missing_ok=True)


def backfill_raw(shape: fg.FleetShape, tl: fg.Timeline, data_dir: Path, workers: int) -> float:
    """The fabric's raw series into `data_dir`; GB of OpenMetrics written."""
    global _TRACES
    _TRACES = fb.port_traces(shape, tl)
    todo = fleet_tsdb.pieces(shape, tl, fb.SERIES_PER_PORT)
    scratch = fleet_tsdb.scratch_dir(data_dir.parent, workers)
    total, began = 0, time.monotonic()
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        jobs = [Piece(shape, tl, p, scratch, data_dir) for p in todo]
        for i, size in enumerate(pool.imap_unordered(_run_piece, jobs), 1):
            total += size
            if i % max(1, len(jobs) // 10) == 0 or i == len(jobs):
                print(f"  fabric: {i}/{len(jobs)} pieces, {total / 1e9:.1f} GB OpenMetrics, "
                      f"{time.monotonic() - began:.0f} s")
    return total / 1e9


def backfill_alerts(data_dir: Path, log: Path, rules: list[dict[str, Any]], window: fg.Window, home: Path) -> None:
    out_dir, rule_file = home / "alert-blocks", home / "alerts-as-recordings.yml"
    shutil.rmtree(out_dir, ignore_errors=True)
    rule_file.write_text(yaml.safe_dump({"groups": [{"name": "fabric-alerts", "interval": "15s", "rules": rules}]},
                                        sort_keys=False))
    with fleet_tsdb.running_prometheus(data_dir, log, query_timeout="30m") as url:
        fleet_tsdb.promtool("tsdb", "create-blocks-from", "rules", "--quiet", f"--url={url}",
                            f"--start={window.start}", f"--end={window.end}", f"--output-dir={out_dir}",
                            str(rule_file))
    for block in out_dir.iterdir() if out_dir.exists() else ():
        block.rename(data_dir / block.name)
    shutil.rmtree(out_dir, ignore_errors=True)


@dataclass(frozen=True)
class Built:
    end: int
    ports: int
    samples: int
    series: int
    blocks: list[dict[str, int]]
    seconds: dict[str, float]
    openmetrics_gb: float


def build_tsdb(settings: Settings, cache: Path, end: int, workers: int, seed: int,
               nodes: int = NODES) -> tuple[Path, Built]:
    """The fabric's TSDB: from the cache when it holds the same data and rules, else built now."""
    home = cache / f"fabric-{nodes}-nodes"
    data, log, manifest = home / "data", home / "prometheus.log", home / "manifest.json"
    shape = fg.FleetShape(nodes * fg.GPUS_PER_NODE, seed)
    rules, alerts = fabric_rules(settings), alerts_as_recordings(settings)
    wanted = {"format": FORMAT, "seed": seed, "nodes": nodes, "trouble": repr(fb.troubles_in(shape)),
              "rules": rules, "alerts": alerts}
    saved = json.loads(manifest.read_text()) if manifest.exists() else {}
    if {k: saved.get(k) for k in wanted} != json.loads(json.dumps(wanted)):
        shutil.rmtree(home, ignore_errors=True)
        data.mkdir(parents=True)
        tl = timeline(settings, end)
        seconds: dict[str, float] = {}
        began = time.monotonic()
        gb = backfill_raw(shape, tl, data, workers)
        seconds["openmetrics+promtool"] = time.monotonic() - began
        began = time.monotonic()
        window = fg.Window(tl.start, tl.end - 1)
        fleet_tsdb.backfill_rules_in_passes(data, log, rule_cost.passes(rules), tl.scrape_s, [window],
                                            home)
        seconds["rules"] = time.monotonic() - began
        began = time.monotonic()
        backfill_alerts(data, log, alerts, fg.Window(end - ALERTS_MIN * 60, end - 1), home)
        seconds["alerts"] = time.monotonic() - began
        began = time.monotonic()
        fleet_tsdb.compact(data, log)
        seconds["compaction"] = time.monotonic() - began
        saved = {**wanted, "end": end, "seconds": seconds, "openmetrics_gb": gb}
        manifest.write_text(json.dumps(saved, indent=1))
    blocks = fleet_tsdb.blocks(data)
    return data, Built(saved["end"], nodes * fb.PORTS_PER_NODE, sum(b["samples"] for b in blocks),
                       max(b["series"] for b in blocks), blocks, saved["seconds"], saved["openmetrics_gb"])


# ------------------------------------------------------------------------------------------ measuring


def measure(data: Path, built: Built, boards: Mapping[str, dict[str, Any]], repeat: int,
            quiet: Callable[[], float]) -> tuple[dict[str, grafana_load.OpenResult], list[float]]:
    opens, loads = {}, []
    with fleet_tsdb.running_prometheus(data, data.parent / "prometheus.log") as url:
        for name, board in boards.items():
            loads.append(quiet())
            # The raw expressions take minutes at this size: one open, no warm-up, says how far apart they are.
            once = name == RAW
            r = opens[name] = grafana_load.median_open(url, board, built.end, 1 if once else repeat, 0 if once else 1)
            slowest = max(r.panels, key=lambda p: p.seconds)
            print(f"  {name:<34} open {r.seconds:6.3f} s  slowest {slowest.seconds:6.3f} s ({slowest.title})  "
                  f"max series {max(p.series for p in r.panels)}  load {loads[-1]:.2f}")
    return opens, loads


def section(built: Built, opens: Mapping[str, grafana_load.OpenResult], loads: list[float], repeat: int,
            command: str) -> list[str]:
    machine = fleet_report.machine()
    shape = fg.FleetShape(built.ports, 0)  # a GPU per port
    kinds = ", ".join(f"{t.kind}{'' if t.arg is None else f':{t.arg:g}'} on node {t.node} port {t.port} since "
                      f"{t.since_min} min" + (f" for {t.for_min} min" if t.for_min else "")
                      for t in fb.troubles_in(shape))
    lines = [
        SECTION, "",
        f"Generated by `{command}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {machine}. "
        f"{built.ports // fb.PORTS_PER_NODE:,} nodes × {fb.PORTS_PER_NODE} InfiniBand "
        f"ports ({built.ports:,} ports, {shape.clusters} clusters, the GPU fleet's `cluster` labels) at a 15 s scrape "
        "over the dashboard's default range (bench/fabricgen.py, bench/fabric_scale.py): node_exporter's port series, "
        "`gpudash_gpu_nic_info` and the fabric manager status per GPU, the fabric recordings backfilled on top, and "
        f"the fabric alerts written into `ALERTS` over the last {ALERTS_MIN} min as Prometheus would have. "
        f"Ports in trouble: {kinds}. open = variables, then every panel with {grafana_load.CONNECTIONS} in flight, "
        f"median of {repeat} opens after one warm-up (bench/grafana_load.py; the raw expressions: one open, no "
        "warm-up). 1-minute load average before each "
        f"dashboard: {', '.join(f'{v:.2f}' for v in loads)}.", ""]
    rows = []
    for name, r in opens.items():
        slowest = max(r.panels, key=lambda p: p.seconds)
        worst = max(r.panels, key=lambda p: p.series)
        rows.append([name, f"{r.seconds:.3f}", f"{r.variables_s:.3f}", f"{slowest.seconds:.3f} ({slowest.title})",
                     f"{worst.series:,} ({worst.title})", f"{sum(p.series for p in r.panels):,}", str(len(r.panels))])
    lines += fleet_report.table(["dashboard", "open (s)", "variables (s)", "slowest panel (s)",
                                 "most series in a panel", "series", "panels"], rows)
    lines += ["", "Every panel (s / series):", ""]
    names = list(opens)
    panels = [[p.title, *[f"{opens[n].panels[i].seconds:.3f} / {opens[n].panels[i].series:,}" for n in names]]
              for i, p in enumerate(opens[names[0]].panels)]
    lines += fleet_report.table(["panel", *names], panels)
    lines += ["", f"The data: {built.samples / 1e6:,.0f}M samples, {built.series:,} series in the largest block, "
                  f"blocks {fleet_report._layout(built.blocks)}; built in "
                  + ", ".join(f"{k} {v:.0f} s" for k, v in built.seconds.items())
                  + f"; {built.openmetrics_gb:.1f} GB of OpenMetrics.", ""]
    return lines


def run(settings: Settings, cache: Path, out: Path, workers: int, seed: int, repeat: int,
        quiet: Callable[[], float]) -> int:
    """--fabric-section: build (or reuse) the fabric's TSDB, open the fabric dashboard, write its section."""
    cache.mkdir(parents=True, exist_ok=True)
    end = int(time.time()) // fleet_tsdb.BLOCK_S * fleet_tsdb.BLOCK_S
    print(f"fabric: {NODES:,} nodes × {fb.PORTS_PER_NODE} ports: TSDB")
    data, built = build_tsdb(settings, cache, end, workers, seed)
    print(f"  {built.samples / 1e6:.0f}M samples, {built.series} series, {len(built.blocks)} blocks; "
          + ", ".join(f"{k} {v:.0f} s" for k, v in built.seconds.items()))
    opens, loads = measure(data, built, dashboards(settings), repeat, quiet)
    path = out / "fleet-scale.md"
    lines = section(built, opens, loads, repeat, "python bench/fleet_scale.py --fabric-section")
    fleet_report.write_section(path, lines, SECTION)
    print(f"wrote the fabric section of {path}")
    return 0
