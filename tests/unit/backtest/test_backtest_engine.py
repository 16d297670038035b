"""The replay engine against a scripted server: chunking, splitting a refused chunk, parse errors."""

from __future__ import annotations

from typing import Any

import pytest

from gpudash.backtest.engine import MAX_POINTS, chunks, evaluation_times, replay
from gpudash.backtest.rule_set import AlertSpec
from gpudash.check.prometheus_api import QueryError, TimeRange
from gpudash.errors import ConfigError


class Scripted:
    """Answers every range query with one series present at the timestamps in `present`."""

    def __init__(self, present: set[int], max_steps: int = MAX_POINTS, error: str = "") -> None:
        self.present, self.max_steps, self.error = present, max_steps, error
        self.windows: list[tuple[float, float]] = []

    def range(self, expr: str, window: TimeRange) -> list[dict[str, Any]]:
        if self.error:
            raise QueryError(self.error)
        if window.range_s // window.step_s + 1 > self.max_steps:
            raise QueryError("exceeded maximum resolution of 11,000 points per timeseries")
        self.windows.append((window.start, window.end))
        stamps = range(int(window.start), int(window.end) + 1, window.step_s)
        values = [[t, "1"] for t in stamps if t in self.present]
        return [{"metric": {"gpu": "0"}, "values": values}] if values else []


RULE = AlertSpec("Hot", "x > 1", for_s=30, labels={"severity": "warning"})


def test_evaluations_are_multiples_of_the_interval_and_chunks_cover_them_once() -> None:
    assert evaluation_times(7, 100, 15) == (15, 90)
    spans = list(chunks(0, 150, 15, 4))
    assert spans == [(0, 45), (60, 105), (120, 150)]


def test_replay_across_chunks_keeps_the_state() -> None:
    server = Scripted(set(range(30, 200, 15)))
    incidents, stats = replay(server, [RULE], 0, 300, 15, chunk_steps=3, workers=1)
    assert [(i.start, i.end) for i in incidents] == [(60, 195)]  # pending from 30, firing from 60
    assert stats.queries == 7


def test_a_chunk_the_server_refuses_as_too_large_is_split() -> None:
    server = Scripted(set(range(0, 3000, 15)), max_steps=50)
    incidents, stats = replay(server, [RULE], 0, 2985, 15, chunk_steps=200, workers=1)
    assert [(i.start, i.end) for i in incidents] == [(30, 2985)]
    assert stats.splits >= 1 and all((hi - lo) / 15 + 1 <= 50 for lo, hi in server.windows)


def test_a_chunk_the_server_times_out_on_is_split() -> None:
    class Slow(Scripted):
        def range(self, expr: str, window: TimeRange) -> list[dict[str, Any]]:
            if window.range_s > 600:
                raise QueryError("query timed out in expression evaluation")
            return super().range(expr, window)

    server = Slow(set(range(0, 3000, 15)))
    incidents, stats = replay(server, [RULE], 0, 2985, 15, chunk_steps=200, workers=2)
    assert [(i.start, i.end) for i in incidents] == [(30, 2985)] and stats.splits >= 2


def test_a_rule_that_does_not_parse_names_itself() -> None:
    with pytest.raises(ConfigError, match=r"alert rule Hot \(warning\) does not parse"):
        replay(Scripted(set(), error="bad_data: 1:3: parse error: unexpected"), [RULE], 0, 100, 15)
