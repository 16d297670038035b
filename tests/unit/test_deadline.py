"""gpudash.deadline: a whole request within a deadline, whatever its socket timeouts. No server, no sleep."""

from __future__ import annotations

import threading

import pytest

from gpudash.deadline import Deadline, DeadlineExceeded, within


def test_the_answer_or_the_error_of_the_request() -> None:
    assert within(5.0, lambda: 42) == 42
    with pytest.raises(KeyError, match="gone"):
        within(5.0, lambda: {}["gone"])


def test_a_request_still_running_at_the_deadline_is_given_up() -> None:
    release, finished = threading.Event(), threading.Event()

    def request() -> None:
        release.wait(10)
        finished.set()

    with pytest.raises(DeadlineExceeded) as caught:
        within(0.05, request)
    assert not finished.is_set()  # given up while the request still runs, not once it ended
    assert isinstance(caught.value, TimeoutError) and caught.value.seconds == 0.05
    assert str(caught.value) == "no complete answer within 0.05 s"
    release.set()


@pytest.mark.parametrize("seconds", [0, -1.0])
def test_a_deadline_is_positive(seconds: float) -> None:
    with pytest.raises(ValueError, match="a deadline must be a positive number of seconds"):
        within(seconds, lambda: None)


def test_a_run_deadline_counts_down_from_its_start() -> None:
    now = [100.0]
    deadline = Deadline(30, clock=lambda: now[0])
    assert deadline.left() == 30 and not deadline.passed
    now[0] = 125.5
    assert deadline.elapsed() == 25.5 and deadline.left() == 4.5 and not deadline.passed
    now[0] = 130.0
    assert deadline.left() == 0 and deadline.passed
    now[0] = 1e9
    assert deadline.left() == 0 and not Deadline.never().passed and Deadline.never().left() == float("inf")
    with pytest.raises(ValueError, match="positive"):
        Deadline(0)
