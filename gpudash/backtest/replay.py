"""One backtest from start to end: check the history is there, replay every rule, estimate notifications.

The edge: `gpudash.check.prometheus_api.PrometheusClient` is the only door to Prometheus; everything it answers
goes to the pure parts (engine's state machine, notify, summary).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpudash.backtest.engine import DEFAULT_CHUNK_STEPS, Incident, RangeQueries, Stats, replay
from gpudash.backtest.notify import estimate
from gpudash.backtest.rule_set import AlertSpec, RuleSet
from gpudash.backtest.summary import Summary, summarize
from gpudash.catalog import profile
from gpudash.check.prometheus_api import PrometheusClient, QueryError, TimeRange
from gpudash.config.durations import duration_text
from gpudash.errors import RemoteError, UsageError
from gpudash.promql.inline import reads_recorded
from gpudash.rules.expressions import PRESENCE_SIGNAL

RECORDING_MODES = ("auto", "inline", "recorded")
HISTORY_SLACK_S = 600  # history may start this much after the asked start (scrapes begin on their own clock)


@dataclass(frozen=True)
class Result:
    summary: Summary
    incidents: tuple[Incident, ...]
    stats: Stats
    inlined: tuple[str, ...]  # the recorded series that were inlined (read from raw samples)


def history_start(client: PrometheusClient, metric: str, start: float, end: float) -> float | None:
    """The first moment in [start, end] at which `metric` has series, at a coarse step; None: never."""
    step = max(60, math.ceil((end - start) / 10_000))
    try:
        result = client.range(f"count({metric})", TimeRange(end, int(end - start), step))
    except QueryError as exc:
        raise RemoteError(f"Prometheus at {client.url}: cannot read the history of {metric}: {exc}") from None
    stamps = [float(ts) for series in result for ts, _ in series.get("values", [])]
    return min(stamps) if stamps else None


def check_history(client: PrometheusClient, metric: str, start: float, end: float) -> None:
    first = history_start(client, metric, start, end)
    asked = duration_text(int(end - start))
    if first is None:
        raise UsageError(f"Prometheus at {client.url} holds no {metric} between the start and end asked "
                         f"({asked}): nothing to backtest")
    if first > start + HISTORY_SLACK_S:
        held = duration_text(max(1, int(end - first)))
        raise UsageError(f"Prometheus at {client.url} holds {held} of history ({metric} from "
                         f"{first:.0f}), {asked} asked: pass --since {held} or a later --start")


def recorded_present(client: PrometheusClient, name: str, start: float, end: float, step: int) -> bool:
    """Whether the recorded series exists at both ends of the range."""
    for at in (start + 4 * step, end):
        try:
            if not client.instant(f"count(last_over_time({name}[{4 * step}s]))", at):
                return False
        except QueryError:
            return False
    return True


def plan_rules(client: PrometheusClient, rules: RuleSet, mode: str, start: float,
               end: float) -> tuple[list[AlertSpec], tuple[str, ...]]:
    """The rules to evaluate: recorded series read as they are stored, or inlined where missing (or always)."""
    if mode not in RECORDING_MODES:
        raise UsageError(f"--recording-rules {mode!r}: expected one of {', '.join(RECORDING_MODES)}")
    needed = sorted({n for a in rules.alerts for n in reads_recorded(a.expr, rules.recordings)})
    if mode == "recorded":
        return list(rules.alerts), ()
    missing = needed if mode == "inline" else [
        n for n in needed if not recorded_present(client, n, start, end, rules.interval_s)]
    subset = {n: rules.recordings[n] for n in missing}
    inlined = RuleSet(rules.alerts, subset, rules.alertmanager, rules.interval_s)
    return [inlined.inlined(a) for a in rules.alerts], tuple(missing)


def backtest(client: RangeQueries, rules: RuleSet, alerts: Sequence[AlertSpec], start: float, end: float, *,
             warmup_s: int | None = None, chunk_steps: int = DEFAULT_CHUNK_STEPS, workers: int = 4,
             inlined: tuple[str, ...] = (), tick: Callable[[], None] = lambda: None) -> Result:
    """Replay `alerts` over [start, end] and estimate what Alertmanager would have sent."""
    step = rules.interval_s
    warm = max((a.for_s for a in alerts), default=0) if warmup_s is None else warmup_s
    incidents, stats = replay(client, alerts, start, end, step, warmup_s=warm, chunk_steps=chunk_steps,
                              workers=workers, tick=tick)
    sent = estimate(incidents, rules.alertmanager, step, end)
    keys = list(dict.fromkeys((a.alert, a.severity) for a in alerts))
    return Result(summarize(incidents, sent, start, end, step, keys), tuple(incidents), stats, inlined)


def presence_metric(profile_name: str) -> str:
    return profile(profile_name).ref(PRESENCE_SIGNAL).name
