"""Job attribution on a real GPU node: what it costs an NVML sweep, and what /metrics then says.

    python bench/attribution_real.py        # on a node with NVIDIA GPUs (make bench-attribution-real)

1. A CUDA process (PyTorch, when installed) holds memory on GPU 0. When this runs as root on cgroup v2, the
   process is first moved into a cgroup laid out like Slurm's (``.../slurmstepd.scope/job_4242/step_0``), so
   per-process attribution has a job to find; otherwise its series rightly carries no job.
2. A mapping directory says GPU 0 runs jobs 4242 and 4243 (two copies of its series), other GPUs none.
3. Median fast-sweep time (NVML read + render) without attribution, then with the mapping directory and
   per-process attribution, in the same run; then the series of GPU 0 as rendered.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpudash.exporter.attribution import combined  # noqa: E402
from gpudash.exporter.attribution.hpc import HpcJobMapping  # noqa: E402
from gpudash.exporter.attribution.procs import ProcessAttribution  # noqa: E402
from gpudash.exporter.collectors import all_signals  # noqa: E402
from gpudash.exporter.nvml import NvmlSource  # noqa: E402
from gpudash.exporter.poller import Poller  # noqa: E402

HOLDER = ("import sys, time, torch\n"
          "x = torch.ones(1 << 28, device='cuda:0')\n"
          "print('ready', flush=True)\n"
          "time.sleep(float(sys.argv[1]))\n")
CGROUP = Path("/sys/fs/cgroup/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0")


def _holder() -> subprocess.Popen[str] | None:
    try:
        import torch  # noqa: F401
    except ImportError:
        print("no PyTorch: no CUDA process is started")
        return None
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, "120"], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    proc.stdout.readline()
    try:
        CGROUP.mkdir(parents=True, exist_ok=True)
        (CGROUP / "cgroup.procs").write_text(str(proc.pid))
        print(f"CUDA process {proc.pid} moved into {CGROUP}")
    except OSError as exc:
        print(f"CUDA process {proc.pid} stays in its cgroup ({exc.strerror}): no job to find for it")
    print(f"/proc/{proc.pid}/cgroup: {Path(f'/proc/{proc.pid}/cgroup').read_text().strip()}")
    return proc


def _median_sweep(poller: Poller, sweeps: int) -> float:
    times = []
    for _ in range(sweeps):
        started = time.perf_counter()
        poller.sweep("fast")
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    holder = _holder()
    time.sleep(2.0)  # NVML lists a new process on its next sample
    with tempfile.TemporaryDirectory() as tmp:
        mapping = Path(tmp)
        (mapping / "0").write_text("4242\n4243\n")
        source = NvmlSource()
        keys = all_signals().keys
        plain = Poller(source, keys, slow_keys=source.costly_keys(), hostname="h200")
        hpc = HpcJobMapping(mapping)
        attributed = Poller(source, keys, slow_keys=source.costly_keys(), hostname="h200",
                            attributor=combined([hpc, ProcessAttribution(Path("/proc"),
                                                                         sluid_lookup=hpc.job_for_sluid)]))
        for poller in (plain, attributed):
            for loop in ("static", "slow", "fast"):
                poller.sweep(loop)
        base, with_jobs = [], []
        for _ in range(5):  # interleaved, so drift on the machine hits both alike
            base.append(_median_sweep(plain, 40))
            with_jobs.append(_median_sweep(attributed, 40))
        gpus = len(plain.gpus)
        b, w = statistics.median(base), statistics.median(with_jobs)
        print(f"{gpus} GPUs, median fast sweep (NVML read + render): {b * 1e3:.3f} ms without attribution, "
              f"{w * 1e3:.3f} ms with the mapping dir + per-process ({(w - b) * 1e3:+.3f} ms, x{w / b:.3f})")
        print(f"/metrics size: {len(plain.exposition.body)} B without, {len(attributed.exposition.body)} B with")
        text = attributed.exposition.body.decode()
        print("GPU 0's utilization and process series, with attribution:")
        for line in text.splitlines():
            if line.startswith(("DCGM_FI_DEV_GPU_UTIL{", "gpudash_process_fb_used_mib{")) and 'gpu="0"' in line:
                print("  " + line)
        source.close()
    if holder is not None:
        holder.kill()
        holder.wait()
        if CGROUP.exists():
            for level in (CGROUP, *list(CGROUP.parents)[:4]):
                try:
                    level.rmdir()
                except OSError:
                    break
    print(f"(pid {os.getpid()}, python {sys.version.split()[0]})")


if __name__ == "__main__":
    main()
