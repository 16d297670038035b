"""The pieces that bound a flood, on socket pairs: the header deadline, the 503 refusal, the accept backoff."""

from __future__ import annotations

import io
import socket
import time

import pytest

from gpudash.exporter.connections import BACKOFF_MAX, BUSY, AcceptBackoff, DeadlineReader, Refusals


class Clock:
    def __init__(self, deadline: float | None) -> None:
        self.header_deadline = deadline
        self.idle_seconds = 30.0
        self.timed_out = 0

    def header_timed_out(self) -> None:
        self.timed_out += 1


def test_a_head_past_its_deadline_is_a_timeout_and_is_told() -> None:
    server, client = socket.socketpair()
    with server, client:
        clock = Clock(time.monotonic() + 30)
        reader = io.BufferedReader(DeadlineReader(server, clock))
        client.sendall(b"GET / HTTP/1.1\r\n")
        assert reader.readline() == b"GET / HTTP/1.1\r\n"
        clock.header_deadline = time.monotonic() - 1  # the rest of the head never came in time
        with pytest.raises(TimeoutError, match="request line and headers did not arrive in time"):
            reader.readline()
        assert clock.timed_out == 1


def test_without_a_deadline_a_read_waits_the_idle_time() -> None:
    server, client = socket.socketpair()
    with server, client:
        clock = Clock(None)
        reader = io.BufferedReader(DeadlineReader(server, clock))
        client.sendall(b"x\n")
        assert reader.readline() == b"x\n" and server.gettimeout() == 30.0 and clock.timed_out == 0


def test_a_refused_connection_gets_a_503_then_its_close() -> None:
    server, client = socket.socketpair()
    refusals = Refusals()
    client.sendall(b"GET /metrics HTTP/1.1\r\n\r\n")
    refusals.refuse(server, tls=False)
    with client:
        assert client.recv(len(BUSY) + 10) == BUSY
        client.close()
    refusals.reap()
    assert server.fileno() == -1  # closed once the client had sent its request and gone


def test_the_accept_backoff_doubles_to_its_cap_and_starts_over_once_accept_works() -> None:
    backoff = AcceptBackoff()
    delays = [backoff.failed() for _ in range(8)]
    assert delays[:3] == [0.05, 0.1, 0.2] and delays[-1] == BACKOFF_MAX and sorted(delays) == delays
    backoff.worked()
    assert backoff.failed() == 0.05
