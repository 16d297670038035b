"""The exporter under floods: out of file descriptors, slow request heads, too many connections, password
guesses, a mapping file of thousands of jobs. The process-level ones run the real `gpudash exporter`."""

from __future__ import annotations

import base64
import http.client
import logging
import os
import resource
import select
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support.waiting import eventually

from gpudash.exporter.basicauth import bcrypt_backend
from gpudash.exporter.connections import HEADER_SECONDS
from gpudash.exporter.exposition import Exposition
from gpudash.exporter.server import MetricsServer
from gpudash.exporter.service import Exporter
from gpudash.exporter.sim.fleet import fleet_from_specs
from gpudash.exporter.sim.simulated import SimulatedSource
from gpudash.exporter.webconfig import load_web_config
from gpudash.stack.process import free_port

TICKS = os.sysconf("SC_CLK_TCK")


class Running:
    def __init__(self, proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
        self.proc, self.port, self.log = proc, port, log

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime

    def rss_mib(self) -> float:
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        return int(next(line for line in status.splitlines() if line.startswith("VmRSS:")).split()[1]) / 1024

    def metrics(self, timeout: float = 10) -> bytes:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=timeout) as answer:
            return bytes(answer.read())


@contextmanager
def exporter_process(root: Path, tmp_path: Path, *args: str,
                     preexec: Callable[[], None] | None = None) -> Iterator[Running]:
    port = free_port()
    log = tmp_path / "exporter.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gpudash", "exporter", "--listen", f"127.0.0.1:{port}", "--simulate", "1",
             "--interval", "200ms", *args],
            cwd=root, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": str(root)},
            preexec_fn=preexec)
    running = Running(proc, port, log)
    try:
        def ready() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"the exporter exited: {running.log_text()}")
            return urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=1).status == 200

        eventually(ready, timeout=60, what="the exporter to answer /-/ready", ignoring=(OSError,))
        yield running
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _few_descriptors() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))


def test_out_of_descriptors_the_accept_loop_backs_off_says_so_once_and_recovers(root: Path, tmp_path: Path) -> None:
    with exporter_process(root, tmp_path, preexec=_few_descriptors) as running:
        held = [socket.create_connection(("127.0.0.1", running.port), timeout=10) for _ in range(120)]
        try:  # half-open: connected, nothing sent; past 64 descriptors accept() fails with EMFILE
            eventually(lambda: "cannot accept connections: out of file descriptors" in running.log_text(),
                       timeout=30, what="the out-of-descriptors line")
            before, started = running.cpu_seconds(), time.monotonic()
            time.sleep(2.0)  # what it burns while still out of descriptors: it once spun at 100 % of a core
            used = (running.cpu_seconds() - before) / (time.monotonic() - started)
            assert used < 0.25, f"{used:.0%} of a core while out of descriptors"
        finally:
            for sock in held:
                sock.close()
        body = eventually(lambda: running.metrics(timeout=5), timeout=60, what="a scrape after the sockets closed",
                          ignoring=(OSError,))
        assert b"gpudash_gpu_up{" in body
        eventually(lambda: "accepting connections again after" in running.log_text(), timeout=30,
                   what="the line saying it is over")
        assert running.log_text().count("cannot accept connections") == 1


def test_a_client_sending_one_header_line_a_second_is_cut_off_at_the_deadline(root: Path, tmp_path: Path) -> None:
    with exporter_process(root, tmp_path) as running:
        slow = socket.create_connection(("127.0.0.1", running.port), timeout=10)
        started = time.monotonic()
        slow.sendall(b"GET /metrics HTTP/1.1\r\nHost: exporter\r\n")
        cut_at: float | None = None
        scraped: float | None = None
        for line in range(int(HEADER_SECONDS * 3)):  # it would take three deadlines to send every line
            readable, _, _ = select.select([slow], [], [], 1.0)
            if readable:
                try:
                    ended = slow.recv(4096) == b""
                except ConnectionResetError:
                    ended = True
                if ended:
                    cut_at = time.monotonic() - started
                    break
            try:
                slow.sendall(f"X-Slow-{line}: still coming\r\n".encode())
            except (BrokenPipeError, ConnectionResetError):
                cut_at = time.monotonic() - started
                break
            if scraped is None and line == 2:  # meanwhile, a scrape is served as usual
                begun = time.monotonic()
                assert b"gpudash_gpu_up{" in running.metrics()
                scraped = time.monotonic() - begun
        slow.close()
    assert cut_at is not None, "the slow client was never cut off"
    assert HEADER_SECONDS - 0.5 <= cut_at <= HEADER_SECONDS * 2, cut_at
    assert scraped is not None and scraped < HEADER_SECONDS / 2


def test_a_kept_alive_connection_may_idle_past_the_header_deadline() -> None:
    server = MetricsServer(lambda: Exposition(b"up 1\n"), "127.0.0.1:0", header_seconds=0.5)
    server.start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        for _ in range(2):
            conn.request("GET", "/metrics")
            assert conn.getresponse().read() == b"up 1\n"
            time.sleep(1.0)  # idle twice as long as a request head may take, on the same connection
        conn.close()
        quiet = socket.create_connection(("127.0.0.1", server.port), timeout=10)  # connects, sends nothing
        assert quiet.recv(1) == b""  # closed at the deadline, not after the 30 s idle timeout
        quiet.close()
    finally:
        server.stop()


def test_connections_over_the_limit_are_answered_503_at_once_and_logged_once(
        caplog: pytest.LogCaptureFixture) -> None:
    server = MetricsServer(lambda: Exposition(b"up 1\n"), "127.0.0.1:0", max_connections=4)
    server.start()
    caplog.set_level(logging.WARNING, "gpudash.exporter")
    try:
        idle = [socket.create_connection(("127.0.0.1", server.port), timeout=10) for _ in range(4)]
        eventually(lambda: server.open_connections == 4, timeout=30, what="four connections with a thread")
        for _ in range(3):
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
            conn.request("GET", "/metrics")
            response = conn.getresponse()
            assert (response.status, response.getheader("Retry-After")) == (503, "1")
            conn.close()
        for sock in idle:
            sock.close()
        eventually(lambda: server.open_connections == 0, timeout=30, what="the idle connections to end")
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request("GET", "/metrics")
        assert conn.getresponse().read() == b"up 1\n"
        conn.close()
    finally:
        server.stop()
    said = [r.getMessage() for r in caplog.records]
    assert said[0] == "4 connections open, the most allowed: new ones are answered 503 and closed"
    assert len(said) == 2 and said[1].startswith("fewer connections than the limit again after")
    assert said[1].endswith("(3 times)")


needs_bcrypt = pytest.mark.skipif(bcrypt_backend() is None, reason="neither the bcrypt package nor crypt(3) bcrypt")


@needs_bcrypt
def test_a_guess_flood_is_bounded_and_leaves_room_for_scrapers(tmp_path: Path) -> None:
    # 30 threads of guesses once delayed a scrape by 9.3 s: every check waited on one lock, in one line
    backend = bcrypt_backend()
    assert backend is not None
    config = tmp_path / "web.yml"
    config.write_text(f"basic_auth_users:\n  prometheus: '{backend.make(b's3cret', 10)}'\n"
                      f"  replica: '{backend.make(b'other', 10)}'\n")

    def get(port: int, user: str, password: str, source: str = "127.0.0.1") -> int:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120, source_address=(source, 0))
        try:
            encoded = base64.b64encode(f"{user}:{password}".encode()).decode()
            conn.request("GET", "/metrics", headers={"Authorization": f"Basic {encoded}"})
            response = conn.getresponse()
            response.read()
            return response.status
        finally:
            conn.close()

    with Exporter(SimulatedSource(fleet_from_specs(1)), web=load_web_config(config)) as running:
        assert get(running.port, "prometheus", "s3cret") == 200  # verified once, then remembered
        answers: Counter[int] = Counter()
        stop = threading.Event()

        def guess() -> None:
            while not stop.is_set():
                answers[get(running.port, "prometheus", "guess")] += 1

        flood = [threading.Thread(target=guess) for _ in range(30)]
        for thread in flood:
            thread.start()
        try:
            eventually(lambda: answers[503] > 0, timeout=60, what="guesses beyond the bound answered 503")
            verified = [get(running.port, "prometheus", "s3cret") for _ in range(5)]  # from the flood's address
            first_time = get(running.port, "replica", "other", source="127.0.0.2")  # a check from elsewhere
        finally:
            stop.set()
            for thread in flood:
                thread.join(120)
    assert verified == [200] * 5 and first_time == 200
    assert set(answers) == {401, 503}


def test_a_mapping_file_of_thousands_of_jobs_keeps_metrics_and_memory_bounded(root: Path, tmp_path: Path) -> None:
    mapping = tmp_path / "job-mapping"
    mapping.mkdir()
    with exporter_process(root, tmp_path, "--hpc-job-mapping-dir", str(mapping)) as running:
        plain = len(running.metrics())
        rss = running.rss_mib()
        # 65 KB, 9,285 ids: /metrics was 334 MB, the process 1.08 GB, and 369 MB after the file went
        (mapping / "0").write_text("".join(f"{100000 + n}\n" for n in range(9285)))
        body = eventually(lambda: (b := running.metrics()).count(b'hpc_job="100015"') and b, timeout=60,
                          what="the copies of GPU 0's series")
        assert b'hpc_job="100016"' not in body and len(body) <= 17 * plain, len(body)
        with_file = running.rss_mib()
        (mapping / "0").unlink()
        eventually(lambda: b"hpc_job" not in running.metrics(), timeout=60, what="the copies to go")
        after = running.rss_mib()
    assert with_file - rss < 64 and after - rss < 32, (rss, with_file, after)
