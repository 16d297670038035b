"""Where the exporter's memory goes: RSS after each stage of `gpudash exporter`'s start, in one fresh process.

    python bench/exporter_memory.py               # simulated node (8 GPUs): no NVML stage
    python bench/exporter_memory.py --real        # this node's GPUs through NVML
    python bench/exporter_memory.py --gpus 64     # a bigger simulated node

Stages, in the order the exporter goes through them: the interpreter alone; the command's imports (the CLI,
click, PyYAML, the HTTP server and TLS of the standard library, gpudash's exporter modules, each group's own
share shown); pynvml imported; nvmlInit; the source and the poller built; the first full sweep (static, slow,
fast) rendered; 60 more fast sweeps. prometheus_client is measured last, apart: the exporter renders its own
text and never imports it. RSS is read from /proc/self/statm (resident pages, shared libraries included, as
a container's memory limit sees them).
"""

from __future__ import annotations

import os
import sys
import time


def rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


BASELINE = rss_mib()  # before anything of this script's own imports

import argparse  # noqa: E402
import importlib  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# What `gpudash exporter` imports, in groups, each measured as it is added (a later group only pays for
# what the earlier ones did not bring).
IMPORT_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("click, PyYAML", ("click", "yaml")),
    ("stdlib: TLS, HTTP server, urllib", ("ssl", "http.server", "urllib.request", "gzip", "json")),
    ("gpudash: catalog, errors, config", ("gpudash.catalog", "gpudash.errors", "gpudash.config.options")),
    ("gpudash: exposition, poller, server", ("gpudash.exporter.exposition", "gpudash.exporter.poller",
                                             "gpudash.exporter.server", "gpudash.exporter.service")),
    ("gpudash: attribution", ("gpudash.exporter.attribution.hpc", "gpudash.exporter.attribution.procs",
                              "gpudash.exporter.attribution.kubernetes_cli")),
    ("gpudash: exporter command", ("gpudash.cli", "gpudash.exporter.cli")),
)


class Stages:
    def __init__(self) -> None:
        self.rows: list[tuple[str, float, int]] = [("interpreter (python, site)", BASELINE, 0)]
        self._last = BASELINE
        self._modules = len(sys.modules)

    def mark(self, stage: str) -> None:
        now = rss_mib()
        self.rows.append((stage, now, len(sys.modules) - self._modules))
        self._last, self._modules = now, len(sys.modules)

    def print(self) -> None:
        print(f"{'stage':44} {'RSS MiB':>8} {'+MiB':>7} {'+modules':>9}")
        before = 0.0
        for stage, rss, modules in self.rows:
            print(f"{stage:44} {rss:8.1f} {rss - before:+7.1f} {modules:9d}")
            before = rss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--real", action="store_true", help="NVML on this node's GPUs (default: simulated)")
    parser.add_argument("--gpus", type=int, default=8, help="simulated GPUs (default 8)")
    parser.add_argument("--sweeps", type=int, default=60, help="fast sweeps after the first (default 60)")
    args = parser.parse_args()
    stages = Stages()
    for name, modules in IMPORT_GROUPS:
        for module in modules:
            importlib.import_module(module)
        stages.mark(f"import {name}")
    from gpudash.exporter.collectors import all_signals
    from gpudash.exporter.poller import Poller
    from gpudash.exporter.source import Source

    source: Source
    if args.real:
        nv = importlib.import_module("pynvml")
        stages.mark("import pynvml")
        try:
            nv.nvmlInit()
        except nv.NVMLError as exc:
            raise SystemExit(f"--real: cannot start NVML: {exc} (run it on a GPU node, or leave out --real)") from None
        stages.mark("nvmlInit")
        from gpudash.exporter.nvml import NvmlSource

        source = NvmlSource()
        nv.nvmlShutdown()  # NvmlSource holds its own initialisation
    else:
        from gpudash.exporter.sim.fleet import fleet_from_specs
        from gpudash.exporter.sim.simulated import SimulatedSource

        stages.mark("import the simulator (--simulate only)")
        source = SimulatedSource(fleet_from_specs(args.gpus, 7))
    poller = Poller(source, all_signals().keys, slow_keys=source.costly_keys(), hostname="bench")
    stages.mark(f"source and poller ({len(poller.gpus)} GPUs)")
    for loop in ("static", "slow", "fast"):
        poller.sweep(loop)
    body = len(poller.exposition.body)
    stages.mark(f"first full sweep rendered ({body / 1024:.0f} KiB)")
    for _ in range(args.sweeps):
        poller.sweep("fast", time.time())
    stages.mark(f"{args.sweeps} more fast sweeps")
    source.close()
    before = rss_mib()
    importlib.import_module("prometheus_client")
    print(f"(prometheus_client, which the exporter never imports, would add {rss_mib() - before:.1f} MiB)")
    stages.print()
    gpudash_modules = sorted(m for m in sys.modules if m.startswith("gpudash"))
    print(f"gpudash modules loaded: {len(gpudash_modules)}; "
          f"simulator modules: {sum(m.startswith('gpudash.exporter.sim') for m in gpudash_modules)}")


if __name__ == "__main__":
    main()
