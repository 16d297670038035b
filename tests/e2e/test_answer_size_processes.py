"""No command reads a server's answer past its limit: an endless or huge body is one line, in bounded memory.

Each command runs as its own process against a server that answers every request 200 with a body that never ends
(chunked) or that declares 100 GB; the process's peak memory comes from the kernel (wait4 in a launcher of its
own), not from a guess.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.hostile_http import FloodingServer
from support.paths import ROOT

from gpudash.answer_size import GRAFANA_ANSWER, QUERY_ANSWER, STATUS_ANSWER

MAX_RSS_MB = 300
CLEAR = ("GRAFANA_URL", "GRAFANA_TOKEN", "GRAFANA_USER", "GRAFANA_PASSWORD", "PROMETHEUS_URL", "ALERTMANAGER_URL",
         "GPUDASH_SITE", "GPUDASH_THRESHOLDS")


@dataclass(frozen=True)
class Measured:
    code: int
    out: str
    err: str
    max_rss_mb: float


# The peak memory of a process forked from pytest starts at pytest's own (Linux carries a parent's high-water mark
# through fork and exec), so gpudash is started by a small interpreter of its own, which reports its child's.
_LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as report:
    report.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def gpudash_process(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> Measured:
    """`python -m gpudash ARGS` as a process of its own: exit code, output, and its peak resident memory."""
    environ = {k: v for k, v in os.environ.items() if k not in CLEAR} | (env or {})
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        report = Path(tmp) / "maxrss"
        proc = subprocess.Popen([sys.executable, "-c", _LAUNCHER, str(report), sys.executable, "-m", "gpudash",
                                 *args], cwd=ROOT, env=environ, stdout=out, stderr=err, start_new_session=True)
        # a safety net: a run past it is killed with its launcher, and fails below
        watchdog = threading.Timer(timeout, os.killpg, (proc.pid, signal.SIGKILL))
        watchdog.start()
        try:
            proc.wait()
        finally:
            watchdog.cancel()
        out.seek(0)
        err.seek(0)
        max_rss_kb = int(report.read_text()) if report.exists() else 0
        return Measured(proc.returncode, out.read().decode(), err.read().decode(), max_rss_kb / 1024)


@pytest.fixture(params=[0, 100_000_000_000], ids=["endless", "declared-100GB"])
def flooding(request: pytest.FixtureRequest) -> Iterator[FloodingServer]:
    with FloodingServer(declared=request.param) as server:
        yield server


def _assert_one_line_in_bounded_memory(ran: Measured, endpoint: str, limit: str, code: int) -> None:
    assert ran.code == code, ran.out + ran.err
    line = f"{endpoint} answered more than {limit}, the most gpudash reads of "
    assert line in ran.out + ran.err, ran.out + ran.err
    assert ran.max_rss_mb < MAX_RSS_MB, f"peak memory {ran.max_rss_mb:.0f} MB"


def test_check_stops_at_the_limit_of_a_query_answer(flooding: FloodingServer) -> None:
    ran = gpudash_process("check", "--prometheus", flooding.url, "--no-rules")
    _assert_one_line_in_bounded_memory(ran, f"{flooding.url}/api/v1/query", str(QUERY_ANSWER), 4)
    assert ran.err.startswith("gpudash: ") and ran.err.count("\n") == 1


@pytest.mark.parametrize("command", [["backtest", "--since", "1h"], ["tune", "--since", "1d"],
                                     ["preview", "--dashboard", "gpudash-fleet"]], ids=lambda c: c[0])
def test_backtest_tune_and_preview_stop_there_too(command: list[str], flooding: FloodingServer,
                                                  tmp_path: Path) -> None:
    out = ["--out", str(tmp_path)] if command[0] == "preview" else []
    ran = gpudash_process(*command, *out, "--prometheus", flooding.url)
    _assert_one_line_in_bounded_memory(ran, f"{flooding.url}/api/v1/query", str(QUERY_ANSWER), 4)
    assert not list(tmp_path.iterdir())


def test_doctor_names_each_endpoint_that_answered_too_much(flooding: FloodingServer) -> None:
    ran = gpudash_process("doctor", "--prometheus", flooding.url, "--alertmanager", flooding.url,
                          "--exporter", f"{flooding.url}/metrics", "--grafana", flooding.url,
                          env={"GRAFANA_TOKEN": "glsa_doctor_token"})
    _assert_one_line_in_bounded_memory(ran, f"{flooding.url}/api/v1/query", str(QUERY_ANSWER), 1)
    for path, limit in (("/metrics", STATUS_ANSWER), ("/api/v2/status", STATUS_ANSWER),
                        ("/api/frontend/settings", GRAFANA_ANSWER)):
        endpoint = flooding.url + path
        assert f"{endpoint} answered more than {limit}, the most gpudash reads of {limit.what}" in ran.out


@pytest.mark.parametrize("command", ["sync", "diff"])
def test_sync_and_diff_stop_at_the_limit_of_a_grafana_answer(command: str, flooding: FloodingServer) -> None:
    ran = gpudash_process(command, env={"GRAFANA_URL": flooding.url, "GRAFANA_TOKEN": "glsa_sync_token"})
    _assert_one_line_in_bounded_memory(ran, f"{flooding.url}/api/frontend/settings", str(GRAFANA_ANSWER), 4)
