"""Connections that end early: named by kind, summed up in at most one line per interval."""

from __future__ import annotations

import logging
import ssl

import pytest

from gpudash.exporter.early_ends import EarlyEnds, kind_of


@pytest.mark.parametrize(
    ("exc", "handshake", "kind"),
    [
        (ssl.SSLError(1, "[SSL: HTTP_REQUEST] http request"), True, "tls_handshake"),
        (ssl.SSLError(1, "[SSL: DECRYPTION_FAILED_OR_BAD_RECORD_MAC]"), False, "tls"),
        (ssl.SSLEOFError(8, "EOF occurred in violation of protocol"), True, "reset"),
        (ConnectionResetError(104, "Connection reset by peer"), True, "reset"),
        (BrokenPipeError(32, "Broken pipe"), False, "reset"),
        (TimeoutError("The handshake operation timed out"), True, "timeout"),
        (OSError(107, "Transport endpoint is not connected"), True, "reset"),
        (UnicodeEncodeError("latin-1", "☕", 0, 1, "ordinal not in range"), False, "error"),
    ],
)
def test_kind_of(exc: BaseException, handshake: bool, kind: str) -> None:
    assert kind_of(exc, handshake) == kind


def test_at_most_one_summary_line_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    now = [1000.0]
    ends = EarlyEnds(interval=60.0, clock=lambda: now[0])
    caplog.set_level(logging.INFO, logger="gpudash.exporter")
    for kind, count in (("tls_handshake", 1200), ("reset", 709), ("timeout", 1)):
        for _ in range(count):
            ends.record(kind)
    now[0] += 59.0
    ends.flush()
    assert caplog.messages == []  # not a minute yet
    now[0] += 1.0
    ends.flush()
    ends.flush()
    assert caplog.messages == [
        "1,910 connections ended early in the last 60 s: 1,200 TLS handshake failures, 709 resets, 1 timeout"
    ]
    assert ends.pending() == 0
    now[0] += 600.0
    ends.flush()
    assert len(caplog.messages) == 1  # a quiet interval says nothing


def test_the_last_counts_are_logged_at_shutdown(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    ends = EarlyEnds(interval=60.0, clock=lambda: now[0])
    caplog.set_level(logging.INFO, logger="gpudash.exporter")
    ends.record("reset")
    now[0] = 5.0
    ends.flush(final=True)
    assert caplog.messages == ["1 connection ended early in the last 5 s: 1 reset"]
