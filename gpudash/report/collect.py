"""Run the report's range queries over a long range in chunks, and add the steps up (bounded memory).

A chunk holds at most `chunk_steps` steps; queries of a chunk run a few at a time. Only totals per job, per
cluster and per interruption series are kept, whatever the length of the range.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

from gpudash.backtest.engine import MAX_POINTS
from gpudash.check.prometheus_api import QueryError, TimeRange
from gpudash.errors import RemoteError
from gpudash.report.range_queries import ReportQueries

DEFAULT_CHUNK_STEPS = 288  # one day at 5 minutes
Key = tuple[tuple[str, str], ...]  # a series' labels, sorted


class RangeQueries(Protocol):
    def range(self, expr: str, window: TimeRange) -> list[dict[str, Any]]: ...


@dataclass
class Totals:
    """The range's figures, added up step by step (seconds are GPU-seconds)."""

    held: dict[tuple[str, str], float] = field(default_factory=dict)  # (cluster, job) -> GPU-seconds held
    idle: dict[tuple[str, str], float] = field(default_factory=dict)
    info: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)  # (cluster, job) -> latest labels
    reporting: float = 0.0
    fleet_gpus: dict[str, float] = field(default_factory=dict)  # cluster -> most GPUs reporting at once
    alert_unheld: float = 0.0
    utilization: float = 0.0
    goodput: float = 0.0
    episodes: dict[Key, int] = field(default_factory=dict)  # interruption series -> firing episodes started
    last_firing: dict[Key, int] = field(default_factory=dict)  # interruption series -> last step it fired
    steps: int = 0
    queries: int = 0


def step_times(start: float, end: float, step_s: int) -> tuple[int, int, int]:
    """(first step, last step, count): steps at start + k x step for k = 1..n, each covering the step before it."""
    base = int(start)
    count = int((end - base) // step_s)
    return base + step_s, base + count * step_s, count


def chunks(first: int, last: int, step_s: int, chunk_steps: int) -> Iterator[tuple[int, int]]:
    size = min(chunk_steps, MAX_POINTS - 1) * step_s
    at = first
    while at <= last:
        yield at, min(at + size - step_s, last)
        at += size


def _points(answer: list[dict[str, Any]]) -> Iterator[tuple[dict[str, str], int, float]]:
    for series in answer:
        metric = series.get("metric", {})
        for ts, value in series.get("values", []):
            yield metric, round(float(ts)), float(value)


class Collector:
    def __init__(self, client: RangeQueries, queries: ReportQueries, *, workers: int = 4,
                 tick: Callable[[], None] = lambda: None) -> None:
        self.client, self.q, self.workers, self.tick = client, queries, workers, tick
        self.totals = Totals()

    @property
    def names(self) -> tuple[str, ...]:
        """The queries asked of each chunk (ReportQueries' string fields)."""
        return tuple(f.name for f in fields(self.q) if f.name not in ("job_label", "team_label", "gpu_label",
                                                                      "step_s", "rule_interval_s"))

    def run(self, start: float, end: float, chunk_steps: int = DEFAULT_CHUNK_STEPS) -> Totals:
        first, last, count = step_times(start, end, self.q.step_s)
        self.totals.steps = count
        with ThreadPoolExecutor(self.workers) as pool:
            for lo, hi in chunks(first, last, self.q.step_s, chunk_steps):
                windows = [TimeRange(float(hi), hi - lo, self.q.step_s)] * len(self.names)
                self._add(dict(zip(self.names, pool.map(self._ask, self.names, windows), strict=True)))
        return self.totals

    def _ask(self, name: str, window: TimeRange) -> list[dict[str, Any]]:
        try:
            answer = self.client.range(getattr(self.q, name), window)
        except QueryError as exc:
            raise RemoteError(f"report query {name} from {window.start:.0f} to {window.end:.0f}: {exc}") from None
        self.tick()
        return answer

    def _add(self, answers: dict[str, list[dict[str, Any]]]) -> None:
        t, job = self.totals, self.q.job_label
        t.queries += len(answers)
        for name, into in (("held_by_job", t.held), ("idle_by_job", t.idle)):
            for metric, _, value in _points(answers[name]):
                key = (metric.get("cluster", ""), metric.get(job, ""))
                into[key] = into.get(key, 0.0) + value
        for metric, _, _ in sorted(_points(answers["job_info"]), key=lambda point: point[1]):
            t.info[(metric.get("cluster", ""), metric.get(job, ""))] = metric
        for metric, _, value in _points(answers["fleet_gpus"]):
            cluster = metric.get("cluster", "")
            t.fleet_gpus[cluster] = max(t.fleet_gpus.get(cluster, 0.0), value)
        for name in ("reporting", "alert_unheld", "utilization", "goodput"):
            setattr(t, name, getattr(t, name) + sum(value for _, _, value in _points(answers[name])))
        step = self.q.step_s
        firing = sorted(((tuple(sorted(m.items())), ts) for m, ts, _ in _points(answers["interruptions"])),
                        key=lambda pair: pair[1])
        for series, ts in firing:
            if t.last_firing.get(series) != ts - step:
                t.episodes[series] = t.episodes.get(series, 0) + 1
            t.last_firing[series] = ts
