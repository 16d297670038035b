"""Evaluate alerting rules over stored history: range queries at the rule interval, chunked, in bounded memory.

A range query evaluates its expression at start, start + step, ... exactly as an instant query at each of
those times would, so one query per (rule, chunk) gives what the rules manager would have seen at each
evaluation. Evaluation timestamps are multiples of the interval (promtool's unit tests evaluate at 0, I, 2I,
...; a live Prometheus shifts each group by a fixed offset within the interval). A chunk holds at most
`chunk_steps` evaluations, well under the 11,000 points per series Prometheus accepts in one answer, and a
chunk the server still refuses as too large, or does not answer in time, is split in two until it passes.
Only a few chunks' answers (read ahead of the state machines) and the alerts active at the end of a chunk
are held at a time, whatever the length of the history.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from gpudash.backtest.alert_state import AlertMachine, Labels, alert_labels
from gpudash.backtest.rule_set import AlertSpec
from gpudash.check.prometheus_api import QueryError, TimeRange
from gpudash.errors import ConfigError, RemoteError

MAX_POINTS = 11_000  # Prometheus refuses a range query answering more points than this per series
DEFAULT_CHUNK_STEPS = 720  # three hours at 15 s
# Answers that mean "this chunk is too much for the server": split it. A query that outlives the server's
# --query.timeout (2 m by default) or the client's deadline is one, too.
_TOO_LARGE = ("exceeded maximum resolution", "too many samples", "would load too many samples", "timed out")


class RangeQueries(Protocol):
    def range(self, expr: str, window: TimeRange) -> list[dict[str, Any]]: ...


@dataclass(frozen=True)
class Incident:
    """One firing episode of one alert: the first and last evaluation at which it was firing."""

    alert: str
    severity: str
    labels: Labels
    start: float
    end: float

    def label(self, name: str) -> str:
        return dict(self.labels).get(name, "")


@dataclass
class Stats:
    queries: int = 0
    splits: int = 0
    seconds: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def count(self, splits: int = 0) -> None:
        with self.lock:
            self.queries += 1
            self.splits += splits


def evaluation_times(start: float, end: float, step: int) -> tuple[int, int]:
    """The first and last evaluation timestamps in [start, end]: multiples of the step."""
    first = math.ceil(start / step) * step
    last = math.floor(end / step) * step
    return first, last


def chunks(first: int, last: int, step: int, chunk_steps: int) -> Iterator[tuple[int, int]]:
    """[from, to] evaluation timestamps of each chunk, in order."""
    size = min(chunk_steps, MAX_POINTS - 1) * step
    at = first
    while at <= last:
        yield at, min(at + size - step, last)
        at += size


def _too_large(message: str) -> bool:
    return any(marker in message for marker in _TOO_LARGE)


def query_chunk(client: RangeQueries, rule: AlertSpec, lo: int, hi: int, step: int,
                stats: Stats) -> Iterator[tuple[int, list[dict[str, str]]]]:
    """(timestamp, series labels returned there) for each evaluation of [lo, hi] that returned something."""
    try:
        result = client.range(rule.expr, TimeRange(float(hi), hi - lo, step))
    except QueryError as exc:
        text = str(exc)
        if "parse error" in text:
            raise ConfigError(f"alert rule {rule.alert} ({rule.severity}) does not parse: {text}") from None
        if _too_large(text) and hi > lo:
            mid = lo + ((hi - lo) // step // 2) * step
            stats.count(splits=1)
            yield from query_chunk(client, rule, lo, mid, step, stats)
            yield from query_chunk(client, rule, mid + step, hi, step, stats)
            return
        raise RemoteError(f"backtest of {rule.alert} ({rule.severity}) from {lo} to {hi}: {text}") from None
    stats.count()
    by_ts: dict[int, list[dict[str, str]]] = {}
    for series in result:
        metric = series.get("metric", {})
        for ts, _value in series.get("values", []):
            by_ts.setdefault(round(float(ts)), []).append(metric)
    yield from sorted(by_ts.items())


def _answers(client: RangeQueries, rule: AlertSpec, lo: int, hi: int, step: int,
             stats: Stats) -> dict[int, list[dict[str, str]]]:
    return dict(query_chunk(client, rule, lo, hi, step, stats))


def replay_rule(pool: Executor, client: RangeQueries, rule: AlertSpec, first: int, last: int, step: int,
                chunk_steps: int, stats: Stats, ahead: int,
                tick: Callable[[], None] = lambda: None) -> list[Incident]:
    """Every firing episode of one rule over [first, last]; up to `ahead` chunks are queried in advance."""
    machine = AlertMachine(rule.for_s, rule.keep_firing_for_s)
    spans = list(chunks(first, last, step, chunk_steps))
    pending: deque[Future[dict[int, list[dict[str, str]]]]] = deque()
    for lo, hi in spans[:ahead]:
        pending.append(pool.submit(_answers, client, rule, lo, hi, step, stats))
    for n, (lo, hi) in enumerate(spans):
        answers = pending.popleft().result()
        if n + ahead < len(spans):
            nlo, nhi = spans[n + ahead]
            pending.append(pool.submit(_answers, client, rule, nlo, nhi, step, stats))
        for ts in range(lo, hi + step, step):
            returned = [alert_labels(m, rule.labels, rule.alert) for m in answers.get(ts, ())]
            machine.evaluate(ts, returned)
        tick()
    return [Incident(rule.alert, rule.severity, labels, span[0], span[1])
            for labels, spans_ in machine.intervals.items() for span in spans_]


def replay(client: RangeQueries, rules: Sequence[AlertSpec], start: float, end: float, step: int, *,
           warmup_s: int = 0, chunk_steps: int = DEFAULT_CHUNK_STEPS, workers: int = 4,
           tick: Callable[[], None] = lambda: None) -> tuple[list[Incident], Stats]:
    """Replay every rule over [start, end] (evaluated from `warmup_s` earlier, so a `for` can be under way).

    `workers` range queries are in flight at once: the chunks of several rules, each rule's read ahead of
    its state machine, so at most about 2 x `workers` chunks' answers are held. Incidents that ended before
    `start` are left out.
    """
    stats = Stats()
    began = time.monotonic()
    first, last = evaluation_times(start - warmup_s, end, step)
    workers = max(1, workers)
    with ThreadPoolExecutor(max_workers=workers) as queries, ThreadPoolExecutor(max_workers=workers) as machines:
        per_rule = list(machines.map(
            lambda r: replay_rule(queries, client, r, first, last, step, chunk_steps, stats, 2, tick), rules))
    stats.seconds = time.monotonic() - began
    incidents = [i for found in per_rule for i in found if i.end >= start]
    return sorted(incidents, key=lambda i: (i.start, i.alert, i.labels)), stats


def chunk_count(start: float, end: float, step: int, warmup_s: int, chunk_steps: int) -> int:
    first, last = evaluation_times(start - warmup_s, end, step)
    return sum(1 for _ in chunks(first, last, step, chunk_steps))
