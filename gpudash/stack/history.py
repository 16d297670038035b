"""Yesterday, for a local stack: a simulated fleet's past written as TSDB blocks before Prometheus starts.

The dashboards compare now with the same time yesterday (`offset 1d`), so a Prometheus started a minute
ago has nothing to show there. This renders the bundled exporter's own /metrics output for a simulated
node at past moments (the simulation is a pure function of time), turns it into blocks with
`promtool tsdb create-blocks-from openmetrics`, evaluates the recording rules over that span with
`promtool tsdb create-blocks-from rules` against a Prometheus holding only those blocks, and gives a
Prometheus that starts with both in its data directory. Only for simulated fleets: real GPUs have a past
of their own.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from gpudash.errors import RemoteError
from gpudash.escape import label_value
from gpudash.exporter.collectors import all_signals
from gpudash.exporter.poller import Poller
from gpudash.exporter.sim.fleet import fleet_from_specs
from gpudash.exporter.sim.simulated import SimulatedSource
from gpudash.stack.process import PrometheusProcess

DAY = 86400


def simulated_openmetrics(gpus: int, seed: int, times: Sequence[float], target: Mapping[str, str],
                          faults: Sequence[str] = (), workloads: Sequence[str] = (),
                          hostname: str = "gpu-node") -> str:
    """The exporter's output at each of `times`, with the labels a scrape adds (`target`), as OpenMetrics.

    The fleet's job starts an hour before the first moment, so the past shows a node at work.
    """
    fleet = fleet_from_specs(gpus, seed, workloads, faults, epoch=times[0] - 3600.0)
    source = SimulatedSource(fleet)
    poller = Poller(source, all_signals().keys, slow_keys=source.costly_keys(), hostname=hostname)
    by_name: dict[str, list[str]] = {}
    extra = ",".join(f'{k}="{label_value(v)}"' for k, v in sorted(target.items()))
    for moment in times:
        for loop in ("static", "fast", "slow"):
            poller.sweep(loop, moment)
        text = poller.exposition.body.decode("utf-8")
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                labels = ",".join(f'{k}="{label_value(v)}"' for k, v in sample.labels.items() if k not in target)
                joined = ",".join(part for part in (labels, extra) if part)
                by_name.setdefault(sample.name, []).append(f"{sample.name}{{{joined}}} {sample.value!r} {moment:.3f}")
    # OpenMetrics wants each metric's samples together and in time order; no TYPE line makes each "unknown".
    lines = [line for name in sorted(by_name) for line in by_name[name]]
    return "\n".join([*lines, "# EOF"]) + "\n"


def _promtool(*args: str, cwd: Path | None = None) -> None:
    binary = shutil.which("promtool")
    if binary is None:
        raise RemoteError("promtool not found on PATH (Debian/Ubuntu: apt install prometheus)")
    done = subprocess.run([binary, "tsdb", "create-blocks-from", "--quiet", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise RemoteError(f"promtool tsdb create-blocks-from {args[0]} failed: {tail}")


class SeededPrometheus(PrometheusProcess):
    """A Prometheus whose data directory holds the given TSDB blocks when it starts."""

    def __init__(self, config_yaml: str, rule_files: Mapping[str, str] | None = None, *,
                 blocks: Sequence[Path] = (), extra_args: Sequence[str] = ()) -> None:
        super().__init__(config_yaml, rule_files, extra_args=extra_args)
        self.blocks = list(blocks)

    def __enter__(self) -> SeededPrometheus:
        self.start()
        return self

    def _args(self) -> list[str]:
        # Called just before the process starts, after the data directory exists.
        for block in self.blocks:
            shutil.copytree(block, self.dir / "data" / block.name, dirs_exist_ok=True)
        return super()._args()


@contextmanager
def yesterday_blocks(openmetrics: str, recording_rules: str, start: float, end: float,
                     eval_interval: str = "15s") -> Iterator[list[Path]]:
    """Blocks of the raw samples and of the recording rules over [start, end], removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="gpudash-history-") as tmp:
        root = Path(tmp)
        (root / "history.om").write_text(openmetrics, encoding="utf-8")
        _promtool("openmetrics", str(root / "history.om"), str(root / "raw"))
        (root / "recording.rules.yml").write_text(recording_rules, encoding="utf-8")
        raw = sorted(p for p in (root / "raw").iterdir() if p.is_dir())
        with SeededPrometheus("global: {}\n", blocks=raw) as past:
            _promtool("rules", f"--url={past.url}", f"--start={int(start)}", f"--end={int(end)}",
                      f"--eval-interval={eval_interval}", f"--output-dir={root / 'recorded'}",
                      str(root / "recording.rules.yml"))
        recorded = sorted(p for p in (root / "recorded").iterdir() if p.is_dir())
        yield raw + recorded


def moments(center: float, before: float, after: float, step: float) -> list[float]:
    """Evenly spaced times from center - before to center + after."""
    count = int((before + after) // step) + 1
    return [center - before + i * step for i in range(count)]
