"""The suite's safety nets on a busy machine: one slack factor stretches every timeout, waits and pytest-timeout's
limit alike, and a stack whose port was taken before its server bound it is built again on another."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
import pytest_timeout
from hypothesis import settings
from support import ports, slack, waiting

from gpudash.errors import RemoteError


def test_the_slack_is_the_load_per_cpu_and_never_under_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(slack.ENV, raising=False)
    monkeypatch.setattr(slack, "cpus", lambda: 2)
    monkeypatch.setattr(slack.os, "getloadavg", lambda: (8.0, 7.0, 6.0))
    assert slack.slack() == 4.0 and slack.budget(30) == 120.0
    monkeypatch.setattr(slack.os, "getloadavg", lambda: (0.3, 0.2, 0.1))
    assert slack.slack() == 1.0 and slack.budget(30) == 30.0


def test_the_environment_sets_the_slack(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slack.os, "getloadavg", lambda: (50.0, 50.0, 50.0))
    monkeypatch.setenv(slack.ENV, "2.5")
    assert slack.budget(10) == 25.0


@pytest.mark.parametrize("text", ["0.5", "fast", "nan", "inf"])
def test_a_slack_that_is_not_a_number_of_at_least_one_is_refused(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv(slack.ENV, text)
    with pytest.raises(ValueError, match=f"^GPUDASH_TEST_SLACK='{text}': expected a number of at least 1$"):
        slack.slack()


def test_eventually_waits_its_timeout_times_the_slack(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [0.0]
    fake_time = SimpleNamespace(monotonic=lambda: clock[0],
                                sleep=lambda seconds: clock.__setitem__(0, clock[0] + seconds))
    monkeypatch.setattr(waiting, "time", fake_time)  # the waiting module's clock only
    monkeypatch.setenv(slack.ENV, "3")
    asked: list[float] = []

    def never() -> bool:
        asked.append(clock[0])
        return False

    with pytest.raises(AssertionError, match=r"^timed out after 6 s waiting for 'the thing'; last: False$"):
        waiting.eventually(never, timeout=2, what="the thing", interval=0.5)
    assert asked[-1] == 6.0  # still asking after the unstretched 2 s
    clock[0] = 0.0
    assert waiting.eventually(lambda: clock[0] >= 5 and "ready", timeout=2, interval=0.5) == "ready"


def test_pytest_timeouts_limit_is_stretched_too(monkeypatch: pytest.MonkeyPatch,
                                                request: pytest.FixtureRequest) -> None:
    started: list[float] = []
    monkeypatch.setattr(pytest_timeout, "pytest_timeout_set_timer",
                        lambda item, settings: started.append(settings.timeout) or True)
    monkeypatch.setenv(slack.ENV, "4")
    settings = pytest_timeout.Settings(300, "signal", False, False)
    assert request.config.hook.pytest_timeout_set_timer(item=request.node, settings=settings) is True
    assert started == [1200]


def test_hypothesis_deadline_is_a_safety_net_far_above_its_default() -> None:
    loaded = settings.get_profile("gpudash").deadline
    assert loaded is not None and loaded >= timedelta(seconds=2)
    assert settings.default.deadline == loaded


def test_a_stack_whose_port_was_taken_is_built_again_on_another() -> None:
    tried: list[list[int]] = []

    @contextmanager
    def stack(*chosen: int) -> Iterator[tuple[int, ...]]:
        tried.append(list(chosen))
        if len(tried) == 1:
            raise RemoteError(f"gpudash exporter did not start: exited with 2: gpudash: cannot listen on "
                              f"127.0.0.1:{chosen[0]}: Address already in use")
        yield chosen

    with ports.on_free_ports(2, stack) as built:
        assert list(built) == tried[-1]
    assert len(tried) == 2 and all(len(set(p)) == 2 for p in tried)


def test_any_other_failure_of_the_stack_is_not_retried() -> None:
    tried: list[Any] = []

    @contextmanager
    def stack(port: int) -> Iterator[int]:
        tried.append(port)
        raise RemoteError("prometheus did not start: exited with 1: bad config")
        yield port

    with pytest.raises(RemoteError, match="bad config"), ports.on_free_ports(1, stack):
        pass
    assert len(tried) == 1


def test_a_port_taken_every_time_fails_after_the_last_attempt() -> None:
    tried: list[int] = []

    @contextmanager
    def stack(port: int) -> Iterator[int]:
        tried.append(port)
        raise RemoteError(f"cannot listen on 127.0.0.1:{port}: Address already in use")
        yield port

    with pytest.raises(RemoteError, match="Address already in use"), ports.on_free_ports(1, stack, attempts=3):
        pass
    assert len(tried) == 3
