"""Backtest at fleet scale: the alert rules replayed over hours of a 1,024-GPU fleet at 15 s, timed.

The fleet is bench/fleetgen.py's synthetic fleet (the fleet-scale benchmark's), backfilled by
bench/fleet_tsdb.py with every sample at the scrape interval over the whole span (the fleet-scale TSDB
keeps full detail only around its dashboards' ranges; a backtest reads every evaluation), only the
signals the alert rules read, then compacted by Prometheus. The TSDB is cached under --cache.

Measured: wall time, range queries (and chunks split), this process's peak Python allocation
(tracemalloc) and peak RSS, Prometheus's RSS afterwards; then the same per hour of history, and what
7 days would take at that rate (linear in the span: one query per rule and chunk, each chunk the same size).

    python bench/backtest_bench.py --gpus 1024 --hours 6
    python bench/backtest_bench.py --gpus 256 --hours 2 --chunk 480 --workers 2
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import time
import tracemalloc
from pathlib import Path

if not __package__:  # run as `python bench/backtest_bench.py`
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench import fleet_tsdb
from bench import fleetgen as fg
from gpudash.backtest.engine import DEFAULT_CHUNK_STEPS, replay
from gpudash.backtest.rule_set import RuleSet, rule_set
from gpudash.catalog import DCGM
from gpudash.check.prometheus_api import PrometheusClient
from gpudash.config.loading import load_settings
from gpudash.promql.recordings import signals_in

FORMAT = 1  # bump when what is generated changes


def alert_keys(rules: RuleSet) -> list[str]:
    """The catalog keys the alert rules read, recording rules inlined."""
    found = {s.key for a in rules.alerts for s in signals_in(rules.inlined(a).expr, DCGM)}
    return fg.published_keys(found)


def build(gpus: int, hours: int, keys: list[str], cache: Path, workers: int, seed: int) -> tuple[Path, dict]:
    home = cache / f"backtest-{gpus}-gpus-{hours}h"
    data, manifest = home / "data", home / "manifest.json"
    wanted = {"format": FORMAT, "gpus": gpus, "hours": hours, "keys": keys, "seed": seed}
    saved = json.loads(manifest.read_text()) if manifest.exists() else {}
    if {k: saved.get(k) for k in wanted} == wanted:
        return data, saved
    shutil.rmtree(home, ignore_errors=True)
    data.mkdir(parents=True)
    end = int(time.time()) // 7200 * 7200
    start = end - hours * 3600
    timeline = fg.Timeline(start, end, (fg.Window(start, end),))
    began = time.monotonic()
    pool = fleet_tsdb.simulate_pool(seed, timeline, keys, workers)
    simulated = time.monotonic() - began
    raw = fleet_tsdb.backfill_raw(fg.FleetShape(gpus, seed), timeline, keys, pool, data, workers)
    began = time.monotonic()
    fleet_tsdb.compact(data, home / "prometheus.log")
    blocks = fleet_tsdb.blocks(data)
    saved = {**wanted, "start": start, "end": end, "samples": sum(b["samples"] for b in blocks),
             "seconds": {"simulate": simulated, "openmetrics+promtool": raw["wall_s"],
                         "compaction": time.monotonic() - began}}
    manifest.write_text(json.dumps(saved, indent=1))
    return data, saved


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=1024)
    parser.add_argument("--hours", type=int, default=6, help="history to backfill and replay")
    parser.add_argument("--chunk", type=int, default=DEFAULT_CHUNK_STEPS, help="evaluations per range query")
    parser.add_argument("--workers", type=int, default=4, help="range queries in flight")
    parser.add_argument("--cache", type=Path, default=Path(".bench"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    settings = load_settings()
    rules = rule_set(settings)
    keys = alert_keys(rules)
    data, built = build(args.gpus, args.hours, keys, args.cache, os.cpu_count() or 2, args.seed)
    print(f"TSDB: {args.gpus} GPUs, {args.hours} h at 15 s, {built['samples']:,} samples of {', '.join(keys)}; "
          f"built in " + ", ".join(f"{k} {v:.0f} s" for k, v in built["seconds"].items()))
    alerts = [rules.inlined(a) for a in rules.alerts]
    with fleet_tsdb.running_prometheus(data, data.parent / "prometheus.log") as url:
        client = PrometheusClient(url, timeout=600)
        cpu_before = fleet_tsdb.metric_value(url, "process_cpu_seconds_total")
        tracemalloc.start()
        incidents, stats = replay(client, alerts, built["start"], built["end"], rules.interval_s,
                                  warmup_s=max(a.for_s for a in alerts), chunk_steps=args.chunk,
                                  workers=args.workers)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        prometheus_rss = fleet_tsdb.metric_value(url, "process_resident_memory_bytes")
        prometheus_cpu = fleet_tsdb.metric_value(url, "process_cpu_seconds_total") - cpu_before
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    per_hour = stats.seconds / args.hours
    print(f"backtest: {len(alerts)} rules, {stats.queries} range queries ({stats.splits} split), "
          f"{args.chunk} evaluations each, {args.workers} in flight: {stats.seconds:.1f} s wall, "
          f"{len(incidents)} incidents")
    print(f"memory: peak Python allocation {peak / 2**20:.1f} MiB, peak RSS {rss / 2**20:.0f} MiB; "
          f"Prometheus RSS {prometheus_rss / 2**20:.0f} MiB")
    print(f"rate: {per_hour:.1f} s per hour of history; 7 days at this rate: {per_hour * 168 / 60:.1f} min "
          f"(extrapolated, linear in the span)")
    # Prometheus evaluates each range query on one core: the CPU it spent is the cost on any machine.
    cpu_7d = prometheus_cpu / args.hours * 168
    print(f"Prometheus CPU: {prometheus_cpu:.0f} core-s ({prometheus_cpu / args.hours:.1f} per hour of history); "
          f"7 days: {cpu_7d / 60:.0f} core-min, about {cpu_7d / 60 / 16:.1f} min with 16 queries in flight on 16 "
          f"cores (extrapolated)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
