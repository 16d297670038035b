"""Dashboard load time against fleet size, on a real Prometheus TSDB.

    python bench/fleet_scale.py --sizes 256,1024,4096,8192 --out bench/results/

On 2 cores the first run takes about an hour and writes ~280 GB of OpenMetrics through /dev/shm (8,192
GPUs alone: ~25 min and ~170 GB); the TSDBs it keeps (~2.5 GB) make later runs take ~10 minutes.

For each fleet size: a synthetic fleet (bench/fleetgen.py) is backfilled into a Prometheus TSDB with
promtool, gpudash's recording rules are backfilled on top, and Prometheus compacts the blocks
(bench/fleet_tsdb.py); the TSDB is cached under --cache and reused by later runs. Then Prometheus serves it
and each dashboard is opened the way Grafana opens it (bench/grafana_load.py): gpudash's fleet dashboard
reading its recording rules, the same dashboard with the rules' expressions inlined (`recorded=False`),
gpudash's node dashboard, gpudash's job dashboard (opened on the fleet's largest job: the 1,024-GPU job
from 2,048 GPUs up) and dcgm-exporter's dashboard 12239. Prints a table; writes fleet-scale.md and
fleet-scale.png to --out.

    python bench/fleet_scale.py --sizes 2048 --jobs-section

measures the fleet and job dashboards only and writes (or replaces) the section "The job dashboard" of
the existing fleet-scale.md, leaving the rest of it as it was.

    python bench/fleet_scale.py --sizes 1024 --skip 'gpudash fleet (raw expressions)' --health-baseline main

also opens the health dashboard as committed at a git revision (its JSON), in the same run on the same TSDB:
the health dashboard before and after a change.

    python bench/fleet_scale.py --sizes 1024,8192 --rule-cost

times every rule, recording and alerting, on a TSDB that holds only the rules' history (bench/rule_cost.py:
about 15 minutes at 8,192 GPUs the first time, seconds later) and writes (or replaces) the section "What every
rule costs Prometheus" of the existing fleet-scale.md.

    python bench/fleet_scale.py --fabric-section

builds (or reuses) a TSDB of 1,024 nodes x 8 InfiniBand ports (bench/fabric_scale.py), opens the fabric dashboard
with its recording rules and with their expressions inlined, and writes (or replaces) the section "The fabric
dashboard at 1,024 nodes × 8 ports" of the existing fleet-scale.md.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

if not __package__:  # run as `python bench/fleet_scale.py`: the sibling modules come through the bench package
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench import fabric_scale, fleet_report, fleet_tsdb, grafana_load, rule_cost
from bench import fleetgen as fg
from gpudash.catalog import DCGM
from gpudash.config.loading import Settings, load_settings
from gpudash.panels.build import build_all
from gpudash.promql.for_settings import recording_rules
from gpudash.repository import DASHBOARDS_JSON_DIR, DEFINITIONS_DIR, FLEET_UID, HEALTH_UID, JOB_UID, NODE_UID
from gpudash.review import git

ROOT = Path(__file__).resolve().parent.parent
DCGM_12239 = ROOT / "tests" / "fixtures" / "dcgm-exporter" / "dashboard-12239.json"
FLEET = "gpudash fleet (recording rules)"
JOB = "gpudash job (largest job)"
FORMAT = 4  # bump when what is generated changes, so cached TSDBs are rebuilt


def dashboards(settings: Settings) -> dict[str, dict[str, Any]]:
    recorded = build_all(settings, ROOT / DEFINITIONS_DIR, recorded=True, profile_name="dcgm")
    raw = build_all(settings, ROOT / DEFINITIONS_DIR, recorded=False, profile_name="dcgm")
    return {
        FLEET: recorded[f"{FLEET_UID}.json"],
        "gpudash fleet (raw expressions)": raw[f"{FLEET_UID}.json"],
        "gpudash node": recorded[f"{NODE_UID}.json"],
        JOB: recorded[f"{JOB_UID}.json"],
        "gpudash health": recorded[f"{HEALTH_UID}.json"],
        "dcgm-exporter 12239": json.loads(DCGM_12239.read_text()),
    }


def committed_health(revision: str) -> dict[str, Any]:
    """The health dashboard's JSON as committed at `revision`: what it was before a change, timed beside it."""
    path = PurePosixPath(DASHBOARDS_JSON_DIR.as_posix(), f"{HEALTH_UID}.json")
    board = git.dashboard_at(git.resolve(revision, ROOT), path, ROOT)
    if board is None:
        raise SystemExit(f"--health-baseline {revision}: no {HEALTH_UID}.json at that revision")
    return board


@dataclass(frozen=True)
class Built:
    gpus: int
    end: int
    samples: int
    series: int
    blocks: list[dict[str, int]]
    seconds: dict[str, float]
    openmetrics_gb: float


def build_tsdb(gpus: int, settings: Settings, keys: list[str], cache: Path, end: int, workers: int,
               seed: int) -> tuple[Path, Built]:
    """The size's TSDB: raw series from the cache or generated now, plus any recording rule it lacks."""
    home = cache / f"{gpus}-gpus"
    data, log, manifest = home / "data", home / "prometheus.log", home / "manifest.json"
    rules = [[rec.record, expr] for rec, expr in recording_rules(settings, profile=DCGM)]
    wanted = {"format": FORMAT, "seed": seed, "keys": keys}
    saved = json.loads(manifest.read_text()) if manifest.exists() else {}
    changed = {name for name, expr in saved.get("rules", []) if [name, expr] not in rules and name in dict(rules)}
    if {k: saved.get(k) for k in wanted} != wanted or changed:  # a rule no longer defined is harmless
        shutil.rmtree(home, ignore_errors=True)
        data.mkdir(parents=True)
        saved = {**wanted, "end": end, "rules": [], "seconds": {}}
        saved["openmetrics_gb"] = backfill_raw(gpus, settings, keys, cache, end, workers, seed, data, saved["seconds"])
    timeline = fleet_timeline(settings, saved["end"])
    missing = [r for r in rules if r not in saved["rules"]]
    if missing:
        began = time.monotonic()
        windows = [fg.Window(w.start, min(w.end, timeline.end - 1)) for w in timeline.detail]
        fleet_tsdb.backfill_rules_in_passes(data, log, rule_cost.passes([(name, expr) for name, expr in missing]),
                                            timeline.scrape_s, windows, home)
        saved["seconds"]["rules"] = saved["seconds"].get("rules", 0) + time.monotonic() - began
        saved["rules"] += missing
    if missing or fleet_tsdb.overlapping(fleet_tsdb.blocks(data)):
        began = time.monotonic()
        fleet_tsdb.compact(data, log)
        saved["seconds"]["compaction"] = saved["seconds"].get("compaction", 0) + time.monotonic() - began
        manifest.write_text(json.dumps(saved, indent=1))
    blocks = fleet_tsdb.blocks(data)
    built = Built(gpus, saved["end"], sum(b["samples"] for b in blocks), max(b["series"] for b in blocks), blocks,
                  saved["seconds"], saved["openmetrics_gb"])
    return data, built


def fleet_timeline(settings: Settings, end: int) -> fg.Timeline:
    """Full detail over the fleet dashboard's default range, now and one comparison offset earlier."""
    knobs = settings.thresholds.dashboards
    return fg.dashboard_timeline(end, knobs.default_range.seconds, knobs.comparison_offset.seconds)


def backfill_raw(gpus: int, settings: Settings, keys: list[str], cache: Path, end: int, workers: int, seed: int,
                 data: Path, took: dict[str, float]) -> float:
    """Simulate the pool (cached per end time), write and backfill the fleet; returns GB of OpenMetrics."""
    timeline = fleet_timeline(settings, end)
    began = time.monotonic()
    pool_file = cache / f"pool-{seed}-{end}-{FORMAT}.pickle"
    if pool_file.exists():
        pool = pickle.loads(pool_file.read_bytes())
    else:
        pool = fleet_tsdb.simulate_pool(seed, timeline, keys, workers)
        pool_file.write_bytes(pickle.dumps(pool))
    took["simulate"] = time.monotonic() - began
    raw = fleet_tsdb.backfill_raw(fg.FleetShape(gpus, seed), timeline, keys, pool, data, workers, say=print)
    took["openmetrics+promtool"] = raw["wall_s"]
    return raw["bytes"] / 1e9


def wait_for_quiet(limit: float, timeout_s: float = 300) -> float:
    """Wait until the 1-minute load average is at most `limit` (others' work skews timings); return it."""
    deadline = time.monotonic() + timeout_s
    while os.getloadavg()[0] > limit and time.monotonic() < deadline:
        time.sleep(5)
    return os.getloadavg()[0]


@dataclass
class Measured:
    opens: dict[str, grafana_load.OpenResult]
    loads: list[float]  # 1-minute load average before each dashboard
    topk: list[tuple[str, int, int]]  # fleet top-k panels: (title, series as sent, series as a range query)
    job: tuple[str, int] = ("", 0)  # the job the job dashboard opened on, and its GPUs
    rules: dict[str, float] = field(default_factory=dict)  # recording rule -> seconds one evaluation takes


def measure(data: Path, built: Built, boards: dict[str, dict[str, Any]], repeat: int, log: Path,
            quiet: float) -> Measured:
    out, loads = {}, []
    job = ("", 0)
    with fleet_tsdb.running_prometheus(data, log) as url:
        topk = topk_as_range(url, boards[FLEET], built.end)
        if JOB in boards:
            job = opened_job(url, boards[JOB], built.end)
        for name, board in boards.items():
            loads.append(wait_for_quiet(quiet))
            out[name] = grafana_load.median_open(url, board, built.end, repeat)
            r = out[name]
            slowest = max(r.panels, key=lambda p: p.seconds)
            print(f"  {built.gpus:>5} GPUs  {name:<34} open {r.seconds:6.3f} s  slowest {slowest.seconds:6.3f} s "
                  f"({slowest.title})  max series {max(p.series for p in r.panels)}  load {loads[-1]:.2f}")
        rules = rule_costs(url, built.end)
    return Measured(out, loads, topk, job, rules)


def rule_costs(url: str, end: int, repeat: int = 3) -> dict[str, float]:
    """What one evaluation of each recording rule costs Prometheus (its expression as an instant query at the
    end of the data, best of `repeat`): the price, paid every rule interval (every hour for the hourly ones), of
    what the dashboards read."""
    settings = load_settings(ROOT / "thresholds.yaml")
    costs = {}
    for rec, expr in recording_rules(settings, profile=DCGM):
        best = float("inf")
        for _ in range(repeat):
            began = time.perf_counter()
            grafana_load.post(url, "/api/v1/query", {"query": expr, "time": str(end)})
            best = min(best, time.perf_counter() - began)
        costs[rec.record] = best
    return costs


def opened_job(url: str, board: dict[str, Any], end: int) -> tuple[str, int]:
    """The job Grafana opens the job dashboard on (the first of $job), and how many GPUs it holds."""
    job = (grafana_load.resolve_variables(url, board, end).options.get("job") or [""])[0]
    query = {"query": f'sum(cluster_job:gpu_count:count{{hpc_job="{job}"}})', "time": str(end)}
    result = json.loads(grafana_load.post(url, "/api/v1/query", query))["data"]["result"]
    return job, int(float(result[0]["value"][1])) if result else 0


def topk_as_range(url: str, board: dict[str, Any], end: int) -> list[tuple[str, int, int]]:
    """Each top-k/bottom-k panel: series it returns as Grafana sends it (instant) and as a range query would."""
    variables = grafana_load.resolve_variables(url, board, end)
    range_s = grafana_load.dashboard_range_s(board)
    out = []
    for load in grafana_load.panel_loads(board, variables.values, end):
        for request in load.requests:
            if request.instant and request.expr.startswith(("topk(", "bottomk(")):
                width = next(p["gridPos"]["w"] for p in board["panels"] if p.get("title") == load.title)
                step = grafana_load.grafana_step(range_s, width * grafana_load.SCREEN_PX // 24, 15)
                ranged = grafana_load.Request(request.expr, False, (end - range_s) // step * step, end, step)
                counts = [len(grafana_load.series(grafana_load.post(url, *r.params), load.title))
                          for r in (request, ranged)]
                out.append((load.title, counts[0], counts[1]))
    return out


def rules_only(sizes: list[int], settings: Settings, args: argparse.Namespace) -> int:
    """--rule-cost: every rule's cost at each size, printed and written into fleet-scale.md."""
    args.cache.mkdir(parents=True, exist_ok=True)
    end = int(time.time()) // fleet_tsdb.BLOCK_S * fleet_tsdb.BLOCK_S
    results = {}
    for gpus in sizes:
        print(f"{gpus} GPUs: TSDB for the rules")
        results[gpus] = rule_cost.run(gpus, settings, args.cache, end, args.workers, args.seed, args.repeat,
                                       lambda: wait_for_quiet(args.quiet_load), args.rule_baseline)
        rule_cost.print_costs(gpus, results[gpus])
    machine = fleet_report.machine()
    command = f"python bench/fleet_scale.py --sizes {','.join(str(g) for g in sizes)} --rule-cost" + (
        f" --rule-baseline {args.rule_baseline}" if args.rule_baseline else "")
    path = args.out / "fleet-scale.md"
    fleet_report.write_section(path, rule_cost.lines(results, machine, args.repeat, command, args.rule_baseline),
                               rule_cost.SECTION)
    print(f"wrote the rule-cost section of {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="256,1024,4096,8192", help="fleet sizes in GPUs, comma-separated")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--cache", type=Path, default=ROOT / ".bench" / "fleet-scale")
    parser.add_argument("--repeat", type=int, default=3, help="measured opens per dashboard (after one warm-up)")
    parser.add_argument("--workers", type=int, default=2, help="processes generating and backfilling")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quiet-load", type=float, default=1.0,
                        help="before each dashboard, wait (up to 5 min) for the 1-minute load average to fall to this")
    parser.add_argument("--skip", action="append", default=[], metavar="DASHBOARD",
                        help="leave this dashboard out (repeatable), e.g. 'gpudash fleet (raw expressions)', whose "
                             "queries pass Prometheus's 2-minute timeout at 8,192 GPUs")
    parser.add_argument("--jobs-section", action="store_true",
                        help="measure the fleet and job dashboards only; write the job section of --out's "
                             "fleet-scale.md, keeping the rest")
    parser.add_argument("--rule-cost", action="store_true",
                        help="time every recording and alerting rule on a TSDB of the rules' history only; write "
                             "the rule-cost section of --out's fleet-scale.md, keeping the rest")
    parser.add_argument("--rule-baseline", metavar="REVISION",
                        help="with --rule-cost: also time the generated rule files committed at this git revision "
                             "(or held in this folder, laid out as generated/ is), in the same run")
    parser.add_argument("--health-baseline", metavar="REVISION",
                        help="also open the health dashboard as committed at this git revision, in the same run")
    parser.add_argument("--fabric-section", action="store_true",
                        help="build a TSDB of 1,024 nodes x 8 InfiniBand ports, open the fabric dashboard on it; "
                             "write the fabric section of --out's fleet-scale.md, keeping the rest")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    settings = load_settings(ROOT / "thresholds.yaml")
    if args.fabric_section:
        return fabric_scale.run(settings, args.cache, args.out, args.workers, args.seed, args.repeat,
                                lambda: wait_for_quiet(args.quiet_load))
    if args.rule_cost:
        return rules_only(sizes, settings, args)
    boards = dashboards(settings)
    if args.health_baseline:
        boards[f"gpudash health ({args.health_baseline})"] = committed_health(args.health_baseline)
    keys = fg.keys_read(boards.values())
    if args.jobs_section:
        boards = {name: board for name, board in boards.items() if name in (FLEET, JOB)}
    unknown = [name for name in args.skip if name not in boards]
    if unknown:
        parser.error(f"--skip {unknown[0]!r}: no such dashboard (one of: {', '.join(boards)})")
    boards = {name: board for name, board in boards.items() if name not in args.skip}
    args.cache.mkdir(parents=True, exist_ok=True)
    end = int(time.time()) // fleet_tsdb.BLOCK_S * fleet_tsdb.BLOCK_S
    print(f"signals generated: {', '.join(keys)}")
    results: dict[int, tuple[Built, dict[str, grafana_load.OpenResult]]] = {}
    extra: dict[int, Measured] = {}
    for gpus in sizes:
        print(f"{gpus} GPUs: TSDB")
        data, built = build_tsdb(gpus, settings, keys, args.cache, end, args.workers, args.seed)
        print(f"  {built.samples / 1e6:.0f}M samples, {built.series} series, {len(built.blocks)} blocks; "
              + ", ".join(f"{k} {v:.0f} s" for k, v in built.seconds.items()))
        extra[gpus] = measure(data, built, boards, args.repeat, data.parent / "prometheus.log", args.quiet_load)
        results[gpus] = (built, extra[gpus].opens)
    machine = fleet_report.machine()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.jobs_section:
        fleet_report.write_job_section(args.out / "fleet-scale.md", results, {g: m.job for g, m in extra.items()},
                                       machine, args.repeat, FLEET, JOB, {g: m.loads for g, m in extra.items()})
        print(f"wrote the job section of {args.out / 'fleet-scale.md'}")
        return 0
    fleet_report.write_markdown(args.out / "fleet-scale.md", results, keys, machine, args.repeat,
                                {g: m.loads for g, m in extra.items()}, {g: m.topk for g, m in extra.items()},
                                {g: m.rules for g, m in extra.items()})
    fleet_report.write_plot(args.out / "fleet-scale.png", results)
    print(f"wrote {args.out / 'fleet-scale.md'} and {args.out / 'fleet-scale.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
