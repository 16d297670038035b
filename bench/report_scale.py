"""`gpudash report` at fleet scale: a backfilled week of 1,024 GPUs (jobs of six teams, idle stretches, outages,
health faults), the report timed on the recorded series, and its figures against the known answers.

    python bench/report_scale.py --gpus 1024 --days 7          # make bench-report; writes bench/results/report_scale.md

Raw samples every --sample seconds (300: a week of 1,024 GPUs is then 2 M samples per signal, which this
machine can write and import in minutes); the recording rules the report reads evaluated every --rule-interval
seconds over them (60), as the rules manager would, with a lookback of one raw sample. The report runs at its
default step (5 minutes) in chunks of a day, like `gpudash report --since 7d`.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.report_history import Fault, Fleet, Job, backfilled, openmetrics, truth
from gpudash.check.prometheus_api import PrometheusClient
from gpudash.config.loading import load_settings
from gpudash.promql.for_settings import recording_rules
from gpudash.report.cli import make_report
from gpudash.report.figures import Report
from gpudash.report.range_queries import GPU_COUNT, HELD, IDLE, SM, TENSOR, UTILIZATION_SUM

ROOT = Path(__file__).resolve().parent.parent
TEAMS = ("ml", "vision", "nlp", "speech", "robotics", "infra")
ACTIONS = (("GPUXidError", "reset_gpu", "48"), ("GPUXidError", "reboot_node", "79"), ("GPUEccUncorrectable",
           "reset_gpu", ""), ("GPURowRemapFailure", "rma", ""), ("GPUFellOffBus", "reboot_node", ""),
           ("GPUNVLinkErrors", "none", ""))


def random_fleet(gpus: int, days: float, sample_s: int, seed: int = 7) -> Fleet:
    """Each node runs jobs one after another (whole node or half), with gaps, idle stretches, outages, faults."""
    rng = random.Random(seed)
    per_node, samples = 8, int(days * 86400 // sample_s)
    hour = 3600 // sample_s
    jobs: list[Job] = []
    for node in range(gpus // per_node):
        for half in (0, 1):
            at = rng.randrange(0, 3 * hour)
            while at < samples:
                length = rng.randrange(2 * hour, 30 * hour)
                ids = tuple(range(node * per_node + half * 4, node * per_node + half * 4 + 4))
                idle = ()
                if rng.random() < 0.3:
                    a = at + rng.randrange(0, max(1, length - 3 * hour))
                    idle = ((ids, a, a + rng.randrange(hour, 3 * hour)),)
                team = TEAMS[rng.randrange(len(TEAMS))]
                jobs.append(Job(f"{node}{half}{len(jobs)}", team, f"u{rng.randrange(40)}", ids, at, at + length,
                                util=rng.choice((60.0, 85.0, 97.0)), tensor=rng.choice((0.2, 0.45, 0.7)), idle=idle,
                                published=rng.random() > 0.02))
                at += length + rng.randrange(0, 4 * hour)
    outages = tuple(((rng.randrange(gpus),), s, s + rng.randrange(2 * hour, 6 * hour))
                    for s in (rng.randrange(samples) for _ in range(gpus // 64)))
    faults = []
    for _ in range(gpus // 32):
        name, action, xid = ACTIONS[rng.randrange(len(ACTIONS))]
        start = rng.randrange(samples)
        faults.append(Fault(rng.randrange(gpus), name, action, start, start + rng.randrange(1, 2 * hour), xid))
    return Fleet(gpus // per_node, per_node, samples, sample_s, tuple(jobs), outages, tuple(faults))


def _errors(report: Report, fleet: Fleet) -> tuple[float, str, bool]:
    """The largest relative error of a team's busy or idle, or of down or unallocated, which figure it is, and
    whether the interruption counts by class are exact."""
    known = truth(fleet)
    figures = [(f"{row.team} busy", row.busy_h, known.busy.get(row.team, 0.0)) for row in report.teams]
    figures += [(f"{row.team} idle", row.idle_h, known.idle.get(row.team, 0.0)) for row in report.teams]
    figures += [("down", report.down_h, known.not_reporting + known.alert_unheld),
                ("unallocated", report.unallocated_h, known.unallocated)]
    worst, name = max((abs(found - expected / 3600) / max(expected / 3600, 1.0), name)
                      for name, found, expected in figures)
    return worst, name, dict(report.interruptions) == known.interruptions


def _prometheus_version() -> str:
    done = subprocess.run(["prometheus", "--version"], capture_output=True, text=True)
    return " ".join((done.stdout or done.stderr).split()[:3])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=1024)
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--sample", type=int, default=300, help="seconds between raw samples")
    parser.add_argument("--rule-interval", type=int, default=60, help="seconds between recording rule evaluations")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "report_scale.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpudash-report-bench-") as tmp:
        work = Path(tmp)
        site = work / "gpudash.yaml"
        site.write_text(f"scrape:\n  interval: {args.rule_interval}s\n  timeout: 10s\njobs:\n  team: account\n")
        settings = load_settings(ROOT / "thresholds.yaml", site)
        read = (GPU_COUNT, UTILIZATION_SUM, TENSOR, SM, HELD, IDLE)
        every = {r.record: e for r, e in recording_rules(settings)}
        rules = [(record, e) for record, e in every.items() if record in read]
        began = time.monotonic()
        fleet = random_fleet(args.gpus, args.days, args.sample)
        base = (int(time.time()) - int(args.days * 86400) - 2 * 86400) // 3600 * 3600
        end = base + fleet.samples * fleet.sample_s
        text = openmetrics(fleet, base)
        generated = time.monotonic() - began
        lookback = (f"--query.lookback-delta={args.sample - 1}s",)
        began = time.monotonic()
        with backfilled(text, rules, base, end + 2 * args.sample, args.rule_interval, work, lookback,
                        recordings=every) as prometheus:
            del text
            backfill = time.monotonic() - began
            client = PrometheusClient(prometheus.url, timeout=600)
            report, queries, seconds = make_report(client, settings, 300, base, end)
        worst, which, exact = _errors(report, fleet)
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else ["?"]
    lines = [
        f"# gpudash report at {args.gpus:,} GPUs x {args.days:g} days", "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, load average "
        f"{' '.join(load)} at the end (a machine shared with other work); {platform.python_version()}, "
        f"{_prometheus_version()}.", "",
        f"Raw samples every {args.sample} s, recording rules every {args.rule_interval} s, report step 300 s in "
        f"chunks of a day; {len(fleet.jobs):,} jobs, {len(fleet.faults)} faults, {len(fleet.outages)} outages.", "",
        "| figure | value |", "|---|---|",
        f"| report wall time (range queries on the recorded series) | {seconds:.1f} s |",
        f"| range queries | {queries} |",
        f"| history written and imported (not part of the report) | {generated:.0f} s + {backfill:.0f} s |",
        f"| largest error of a team's busy / idle, down, unallocated | {100 * worst:.2f} % ({which}) |",
        f"| interruption counts by class exact | {'yes' if exact else 'no'} ({report.interruption_count}) |",
        f"| fleet GPUs found | {report.fleet_gpus:,} |",
    ]
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
