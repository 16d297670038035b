"""A simulated node's past, for a local stack: written as TSDB blocks before Prometheus starts.

The dashboards compare now with the same time yesterday (`offset 1d`), and the alert rules look minutes to
an hour back, so a Prometheus started a minute ago has little to show. This renders the bundled exporter's
own /metrics output for a simulated node at past moments (the simulation is a pure function of time), turns
it into blocks with `promtool tsdb create-blocks-from openmetrics`, evaluates the recording rules over each
span of that past with `promtool tsdb create-blocks-from rules` against a Prometheus holding only those
blocks (so each recorded series a rule reads is inlined first, gpudash.promql.inline: nothing recorded it there;
and, when asked, derives more series from that Prometheus: the alerts' state, gpudash.stack.alert_history),
and gives a Prometheus that starts with all of them in its data directory. Only for simulated fleets: real
GPUs have a past of their own.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from gpudash.config.durations import parse_duration
from gpudash.errors import RemoteError
from gpudash.escape import label_value
from gpudash.exporter.attribution import Attributor
from gpudash.exporter.collectors import all_signals
from gpudash.exporter.poller import Poller
from gpudash.exporter.sim.fleet import Fleet, fleet_from_specs
from gpudash.exporter.sim.simulated import SimulatedSource
from gpudash.promql.inline import inlined_rule_file
from gpudash.stack.process import PrometheusProcess

DAY = 86400


def node_poller(fleet: Fleet, hostname: str = "gpu-node", attributor: Attributor | None = None) -> Poller:
    """A poller over a simulated node, publishing every field, as `gpudash exporter --simulate` runs it."""
    source = SimulatedSource(fleet)
    return Poller(source, all_signals().keys, slow_keys=source.costly_keys(), hostname=hostname,
                  attributor=attributor)


class OpenMetricsHistory:
    """Samples gathered as OpenMetrics text: each metric's samples together and in time order.

    Add moments in increasing time; `text()` gives the file promtool reads. No TYPE line: each metric is
    "unknown", so counters keep their `_total` names as scraped.
    """

    def __init__(self) -> None:
        self._by_name: dict[str, list[str]] = {}

    def add(self, name: str, labels: str, value: float, moment: float) -> None:
        """One sample; `labels` the text between the braces (already escaped), '' for none."""
        self._by_name.setdefault(name, []).append(f"{name}{{{labels}}} {value!r} {moment:.3f}")

    def add_exposition(self, body: str, target: Mapping[str, str], moment: float) -> None:
        """Every sample of one /metrics body (the bundled exporter's, no timestamps) with the labels a
        scrape adds (`target`), at `moment`."""
        extra = ",".join(f'{k}="{label_value(v)}"' for k, v in sorted(target.items()))
        for line in body.splitlines():
            if not line or line.startswith("#"):
                continue
            series, _, value = line.rpartition(" ")
            brace = series.find("{")
            name, inner = (series, "") if brace < 0 else (series[:brace], series[brace + 1:-1])
            self.add(name, ",".join(part for part in (inner, extra) if part), float(value), moment)

    def __len__(self) -> int:
        return sum(len(lines) for lines in self._by_name.values())

    def text(self) -> str:
        lines = [line for name in sorted(self._by_name) for line in self._by_name[name]]
        return "\n".join([*lines, "# EOF"]) + "\n"


def poller_history(poller: Poller, times: Sequence[float], target: Mapping[str, str],
                   into: OpenMetricsHistory | None = None) -> OpenMetricsHistory:
    """The poller's output at each of `times` (every loop swept at each), with the labels a scrape adds."""
    history = OpenMetricsHistory() if into is None else into
    for moment in times:
        for loop in ("static", "fast", "slow"):
            poller.sweep(loop, moment)
        history.add_exposition(poller.exposition.body.decode("utf-8"), target, moment)
    return history


def simulated_openmetrics(gpus: int, seed: int, times: Sequence[float], target: Mapping[str, str],
                          faults: Sequence[str] = (), workloads: Sequence[str] = (),
                          hostname: str = "gpu-node") -> str:
    """The exporter's output at each of `times`, with the labels a scrape adds (`target`), as OpenMetrics.

    The fleet's job starts an hour before the first moment, so the past shows a node at work.
    """
    fleet = fleet_from_specs(gpus, seed, workloads, faults, epoch=times[0] - 3600.0)
    return poller_history(node_poller(fleet, hostname), times, target).text()


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


@dataclass(frozen=True)
class Span:
    """A stretch of the past whose recording rules are evaluated every `eval_interval` (a duration)."""

    start: float
    end: float
    eval_interval: str = "15s"


def _blocks(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []


@contextmanager
def history_blocks(openmetrics: str, recording_rules: str, spans: Sequence[Span],
                   derive: Callable[[str], OpenMetricsHistory] | None = None) -> Iterator[list[Path]]:
    """Blocks of the raw samples, of the recording rules over each span, and of what `derive` gives (given the
    URL of a Prometheus holding the raw samples); removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="gpudash-history-") as tmp:
        root = Path(tmp)
        (root / "history.om").write_text(openmetrics, encoding="utf-8")
        _promtool("openmetrics", str(root / "history.om"), str(root / "raw"))
        raw = _blocks(root / "raw")
        derived = OpenMetricsHistory()
        with SeededPrometheus("global: {}\n", blocks=raw) as past:
            for n, span in enumerate(spans):
                rule_file = root / f"recording-{n}.rules.yml"
                rule_file.write_text(inlined_rule_file(recording_rules, parse_duration(span.eval_interval).seconds),
                                     encoding="utf-8")
                _promtool("rules", f"--url={past.url}", f"--start={int(span.start)}", f"--end={int(span.end)}",
                          f"--eval-interval={span.eval_interval}", f"--output-dir={root / f'recorded-{n}'}",
                          str(rule_file))
            if derive is not None:
                derived = derive(past.url)
        if derived:
            (root / "derived.om").write_text(derived.text(), encoding="utf-8")
            _promtool("openmetrics", str(root / "derived.om"), str(root / "derived"))
        yield raw + [b for n in range(len(spans)) for b in _blocks(root / f"recorded-{n}")] + _blocks(root / "derived")


@contextmanager
def yesterday_blocks(openmetrics: str, recording_rules: str, start: float, end: float,
                     eval_interval: str = "15s") -> Iterator[list[Path]]:
    """Blocks of the raw samples and of the recording rules over [start, end], removed afterwards."""
    with history_blocks(openmetrics, recording_rules, [Span(start, end, eval_interval)]) as blocks:
        yield blocks


def moments(center: float, before: float, after: float, step: float) -> list[float]:
    """Evenly spaced times from center - before to center + after."""
    count = int((before + after) // step) + 1
    return [center - before + i * step for i in range(count)]
