"""What job attribution costs the exporter: sweep time and /metrics size, with and without it.

    python bench/attribution_bench.py            # 8 and 64 simulated GPUs, 300 sweeps each
    python bench/attribution_bench.py --quick    # fewer sweeps

In-process, on simulated GPUs (the simulated read is the same in every row, so the difference between rows
is what attribution adds): a fast sweep with its render, and the rendered exposition's size, for

- no attribution;
- a mapping directory (``--hpc-job-mapping-dir``) with one job per GPU, then two jobs sharing every GPU
  (every series written twice: the cost dcgm-exporter's contract implies);
- the same with per-process attribution, on a /proc tree laid out like Slurm's cgroup v2;

and the mapping directory's refresh alone: unchanged (stats only) against a first read (every file parsed).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpudash.exporter.attribution import Attributor, combined  # noqa: E402
from gpudash.exporter.attribution.hpc import HpcJobMapping  # noqa: E402
from gpudash.exporter.attribution.procs import ProcessAttribution  # noqa: E402
from gpudash.exporter.collectors import all_signals  # noqa: E402
from gpudash.exporter.poller import Poller  # noqa: E402
from gpudash.exporter.sim.fleet import fleet_from_specs  # noqa: E402
from gpudash.exporter.sim.simulated import SimulatedSource  # noqa: E402

SETTLED = 10**18  # file times far in the past: the mapping reader trusts them and only stats


def _mapping_dir(folder: Path, gpus: int, jobs_per_gpu: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(gpus):
        path = folder / str(i)
        path.write_text("".join(f"{480000 + 10 * i + j}\n" for j in range(jobs_per_gpu)))
        os.utime(path, ns=(SETTLED, SETTLED))
    os.utime(folder, ns=(SETTLED, SETTLED))
    return folder


def _proc_tree(folder: Path, source: SimulatedSource, now: float) -> Path:
    for gpu in source.gpus():
        reading = source.read(gpu.index, frozenset({"process_fb_used"}), now)
        for proc in reading.processes or ():
            pid_dir = folder / str(proc.pid)
            pid_dir.mkdir(parents=True, exist_ok=True)
            (pid_dir / "stat").write_text(f"{proc.pid} (python3) S " + " ".join(["0"] * 18 + ["4242"] + ["0"] * 30))
            (pid_dir / "cgroup").write_text(
                f"0::/system.slice/slurmstepd.scope/job_{480000 + 10 * gpu.index}/step_0/user/task_0\n")
    return folder


def _median_ms(run: Callable[[], object], times: int) -> float:
    samples = []
    for _ in range(times):
        started = time.perf_counter()
        run()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


class _Case:
    """One poller and its sweep times; cases are swept in turn, so a busy machine slows them all alike."""

    def __init__(self, name: str, gpus: int, attributor: Attributor | None) -> None:
        self.name, self.attributor = name, attributor
        self.poller = Poller(SimulatedSource(fleet_from_specs(gpus, 7)), all_signals().keys, slow_keys=(),
                             hostname="node1", attributor=attributor)
        self.now = time.time()
        self.samples: list[float] = []
        self.sweep()

    def sweep(self) -> None:
        self.now += 1.0
        started = time.perf_counter()
        self.poller.sweep("fast", self.now)
        self.samples.append((time.perf_counter() - started) * 1000)


def bench(gpus: int, sweeps: int, scratch: Path) -> None:
    one = _mapping_dir(scratch / f"one-{gpus}", gpus, 1)
    two = _mapping_dir(scratch / f"two-{gpus}", gpus, 2)
    source = SimulatedSource(fleet_from_specs(gpus, 7))
    proc = _proc_tree(scratch / f"proc-{gpus}", source, time.time())
    cases = [
        _Case("no attribution", gpus, None),
        _Case("mapping dir, 1 job per GPU", gpus, HpcJobMapping(one)),
        _Case("mapping dir, 2 jobs per GPU", gpus, HpcJobMapping(two)),
        _Case("mapping dir + per-process, 1 job", gpus, combined([HpcJobMapping(one), ProcessAttribution(proc)])),
    ]
    for case in cases:
        case.samples.clear()
    for _ in range(sweeps):
        for case in cases:
            case.sweep()
    base_ms, base_size = statistics.median(cases[0].samples), len(cases[0].poller.exposition.body)
    for case in cases:
        ms, size = statistics.median(case.samples), len(case.poller.exposition.body)
        extra = f"  {ms - base_ms:+.3f} ms, x{size / base_size:.2f} size" if case.attributor is not None else ""
        print(f"  {gpus:3d} GPUs  {case.name:34} sweep {ms:7.3f} ms  /metrics {size:8d} B{extra}")

    mapping = HpcJobMapping(one)
    identities = source.gpus()
    mapping.refresh(identities, 0.0)
    unchanged = _median_ms(lambda: mapping.refresh(identities, 0.0), sweeps)
    cold = _median_ms(lambda: HpcJobMapping(one).refresh(identities, 0.0), 50)
    print(f"  {gpus:3d} GPUs  mapping refresh alone: unchanged {unchanged * 1000:6.1f} us (stats only), "
          f"first read {cold * 1000:6.1f} us (list, read and parse every file)")
    procs = ProcessAttribution(proc)
    pids = [int(p.name) for p in proc.iterdir()]
    per_render = _median_ms(lambda: [procs.process_labels(pid) for pid in pids], sweeps)
    print(f"  {gpus:3d} GPUs  per-process labels of {len(pids)} processes, cached: {per_render * 1000:6.1f} us "
          f"a render ({per_render * 1000 / max(1, len(pids)):.1f} us each: the start-time check; "
          f"{procs.reads} cgroup reads)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer sweeps")
    args = parser.parse_args()
    sweeps = 60 if args.quick else 300
    print(f"job attribution: median of {sweeps} fast sweeps (simulated read + attribution + render), every signal")
    with tempfile.TemporaryDirectory(prefix="gpudash-attribution-") as scratch:
        for gpus in (8, 64):
            bench(gpus, sweeps, Path(scratch))


if __name__ == "__main__":
    main()
