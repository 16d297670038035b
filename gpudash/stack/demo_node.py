"""The simulated node `gpudash demo` runs: its jobs, the faults injected into them, and its past.

The node's clock starts `LEAD` before the demo does: its jobs have been training for 50 minutes when the demo
starts, and two faults began at points of that past (a memory leak, a cooling failure). Prometheus starts on
that past, written as TSDB blocks (gpudash.stack.history): the last 50 minutes of the very fleet the exporter
then serves (same seed, jobs, faults and epoch, so the live samples continue the written ones), the same
time yesterday (for the "now against yesterday" panels), the recording rules over both, and the alerts'
`for:` state at its end (gpudash.stack.alert_for_state), which Prometheus restores on start: an alert that
had been firing fires again at its first evaluations, one still pending carries on. A third fault happens
live, seconds after the start, and pages.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from gpudash.backtest.rule_set import rule_set
from gpudash.check.prometheus_api import PrometheusClient
from gpudash.config.durations import parse_seconds
from gpudash.config.loading import Settings
from gpudash.exporter.sim.cluster_node import SimulatedAttributor, cluster_from_options
from gpudash.exporter.sim.fleet import Fleet, fleet_from_specs
from gpudash.exporter.sim.spec import parse_fault
from gpudash.repository import RECORDING_FILE
from gpudash.stack.alert_for_state import for_state_at_end, replayed_alerts
from gpudash.stack.history import (
    DAY,
    OpenMetricsHistory,
    SeededPrometheus,
    Span,
    history_blocks,
    moments,
    node_poller,
    poller_history,
)
from gpudash.stack.servers import rule_files

GPUS = 8
SEED = 7
NODE = "gpu-node"
# How long the node's jobs have run when the demo starts: well past their ~3 min warm-up, and between job 4242's
# input stalls at 47.6 and 63.8 min, so its GPUs are busy while the demo runs.
LEAD = "50m"
LEAD_S = parse_seconds(LEAD)
HISTORY_STEP_S = 15  # the written past's sample step (the live scrape is faster; 15 s is production's)
WORKLOADS = ("3=idle", "7=inference")  # yesterday's node, before today's jobs
# Today the node's GPUs are held by jobs (hpc_job, as the Slurm job-mapping files would give them): training on
# six GPUs, inference on GPU 7, GPU 3 free.
JOBS = (f"4242={NODE}:0-2,4-6", f"4300/inference={NODE}:7")
# Prometheus evaluates the restored alerts at once; a `for:` still under way waits no longer than it has left.
RESTORE_ARGS = ("--rules.alert.for-grace-period=0s",)


@dataclass(frozen=True)
class Injected:
    """One injected fault: the exporter's --fault (its time on the node's clock), what it is, what it raises."""

    spec: str
    what: str
    alerts: tuple[str, ...]

    @property
    def gpu(self) -> int:
        return parse_fault(self.spec)[0]

    @property
    def when(self) -> str:
        """When it began, against the demo's start."""
        at = parse_fault(self.spec)[1].start - LEAD_S
        return f"{-at / 60:.0f} min before the start" if at < 0 else f"{at:.0f} s after the start"


# Two faults of the past (their alerts fire when the demo starts, restored), one live: it pages while the demo
# waits. Each starts where job 4242's rhythm leaves its GPUs busy (its checkpoint at 35.7 min would cool GPU 5).
INJECTED = (
    Injected("2=leak:3h@3m", "leaks memory, out of memory in ~3 h", ("GPUMemoryLeakPredicted",)),
    Injected("5=thermal@38m", "cooling failed, at its 87 C limit and throttled",
             ("GPUHighTemperature", "GPUThermalThrottling")),
    Injected("6=dbe-burst@50m20s", "double-bit ECC errors (XID 48)", ("GPUXidError", "GPUEccUncorrectable")),
)
FAULTS = tuple(fault.spec for fault in INJECTED)
LIVE_PAGE = "GPUXidError"  # the page the live fault sends: the demo waits for it to reach the webhook


def story() -> str:
    """The injected faults, one line each, for the demo to print."""
    return "\n".join(f"  GPU {f.gpu}, {f.when}: {f.what} ({', '.join(f.alerts)})" for f in INJECTED)


def _flags(flag: str, values: tuple[str, ...]) -> list[str]:
    return [part for value in values for part in (flag, value)]


def exporter_args(epoch: float) -> list[str]:
    """`gpudash exporter` options serving this node, its clock's t = 0 at `epoch` (Unix time)."""
    return ["--simulate", str(GPUS), "--seed", str(SEED), "--hostname", NODE, "--sim-nodes", NODE,
            "--sim-epoch", repr(epoch), *_flags("--sim-job", JOBS), *_flags("--fault", FAULTS)]


def node_fleet(epoch: float) -> tuple[Fleet, SimulatedAttributor]:
    """The fleet and attributor `gpudash exporter` builds from `exporter_args(epoch)`: the same function builds them."""
    built = cluster_from_options(GPUS, SEED, (), FAULTS, hostname=NODE, job_specs=JOBS, jobs=None, nodes=NODE,
                                 epoch=epoch)
    assert built is not None  # JOBS is never empty
    return built


def past_openmetrics(started: float, target: Mapping[str, str]) -> tuple[str, list[Span]]:
    """The node's past as OpenMetrics (yesterday around this time, then the last LEAD), and its spans."""
    history = OpenMetricsHistory()
    yesterday = moments(started - DAY, 10 * 60, 30 * 60, 30.0)
    old = fleet_from_specs(GPUS, SEED, WORKLOADS, (), epoch=yesterday[0] - 3600.0)
    poller_history(node_poller(old, NODE), yesterday, target, history)
    epoch = started - LEAD_S
    today = [epoch + k * HISTORY_STEP_S for k in range(int(LEAD_S // HISTORY_STEP_S) + 1)]
    fleet, jobs = node_fleet(epoch)
    poller_history(node_poller(fleet, NODE, jobs), today, target, history)
    return history.text(), [Span(yesterday[0], yesterday[-1], "30s"), Span(today[0], today[-1])]


@contextmanager
def prometheus_with_past(config: str, files: dict[str, str], settings: Settings, started: float,
                         target: Mapping[str, str], eval_interval: str) -> Iterator[SeededPrometheus]:
    """A Prometheus (config, the rendered rule files) starting on the node's past up to `started`; the recording
    rules of the last LEAD evaluated every `eval_interval`, as the live Prometheus does (the rules that add up
    GPU-seconds per evaluation count on it)."""
    text, (yesterday, today) = past_openmetrics(started, target)
    alerts = replayed_alerts(rule_set(settings), HISTORY_STEP_S)

    def alert_state(url: str) -> OpenMetricsHistory:
        client = PrometheusClient(url)
        try:
            return for_state_at_end(client, alerts, today.start, today.end, HISTORY_STEP_S)
        finally:
            client.close()

    spans = [yesterday, Span(today.start, today.end, eval_interval)]
    recording = rule_files(files)[Path(RECORDING_FILE).name]
    with history_blocks(text, recording, spans, alert_state) as blocks, \
            SeededPrometheus(config, rule_files(files), blocks=blocks, extra_args=RESTORE_ARGS) as prometheus:
        yield prometheus
