"""A condition logged by episode: its start at most once per interval, its end once after a logged start."""

from __future__ import annotations

import logging

import pytest

from gpudash.exporter.episodes import Episode


def test_a_flood_of_hits_makes_two_lines_an_interval(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    episode = Episode("out of file descriptors", "accepting again", interval=60.0, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, "gpudash.exporter"):
        for _ in range(1000):
            episode.hit()
        now[0] = 2.5
        episode.clear()
        episode.clear()
        for second in range(10, 50):  # it comes and goes within the minute: not told again
            now[0] = float(second)
            episode.hit()
            episode.clear()
        now[0] = 70.0
        episode.hit()
        now[0] = 71.0
        episode.clear()
    assert [r.getMessage() for r in caplog.records] == [
        "out of file descriptors", "accepting again after 2.5 s (1,000 times)",
        "out of file descriptors", "accepting again after 1.0 s (1 time)"]


def test_clearing_with_nothing_wrong_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "gpudash.exporter"):
        Episode("a", "b").clear()
    assert not caplog.records
