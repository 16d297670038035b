"""gpudash's HTTP clients against a small in-process server that misbehaves: slow, trickling, oddly shaped.

The live check's Prometheus client: a slow query fails alone and the run goes on, a trickled answer fails at
the deadline, an answer of the wrong shape is one line, and credentials in the URL log in but are never shown.
The Grafana client: a trickled answer fails at the deadline and its session is not reused.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from click.testing import CliRunner
from support.paths import ROOT
from support.site_query import site_promql

from gpudash.check.cli import check
from gpudash.check.judge import Status, run_check
from gpudash.check.prometheus_api import PrometheusClient, QueryError
from gpudash.check.queries import PANEL, CheckQuery, Group
from gpudash.check.tables import summary
from gpudash.errors import RemoteError
from gpudash.stack.loopback import LoopbackHTTPServer
from gpudash.sync.grafana_api import Connection, Grafana, GrafanaFailure, connection_from

TRICKLE_BYTES = 50
TRICKLE_PAUSE_S = 0.2  # 50 bytes take 10 s: far longer than any deadline below
STALL = "stall"  # a query the server answers only when the test ends
TRICKLE = "trickle"  # a query answered one byte at a time
STALL_BODY = "stall-body"  # a query whose headers come at once and whose body only when the test ends
VECTOR = {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1.0, "1"]}]}}


class Misbehaving(LoopbackHTTPServer):
    """Speaks enough of Prometheus's API for the check; `answers[query]` = (status, body) overrides it."""

    def __init__(self) -> None:
        self.answers: dict[str, tuple[int, str]] = {}
        self.authorization: list[str] = []
        self.release = threading.Event()  # set at the end of a test: stalled and trickling answers stop
        self.trickled_to_the_end = threading.Event()  # a trickled answer was sent whole (10 s after it began)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                server.authorization.append(self.headers.get("Authorization", ""))
                url = urlsplit(self.path)
                key = parse_qs(url.query).get("query", [url.path.rsplit("/", 2)[-2]])[0]
                if key == STALL:
                    server.release.wait(10)
                if key == TRICKLE or url.path.endswith("/" + TRICKLE):
                    self._trickle()
                    return
                if key == STALL_BODY:
                    self._headers(len(json.dumps(VECTOR)))
                    server.release.wait(10)
                    self.wfile.write(json.dumps(VECTOR).encode())
                    return
                status, body = server.answers.get(key, (200, json.dumps(_answer(key, url.path))))
                self._send(status, body.encode())

            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _headers(self, length: int) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(length))
                self.end_headers()
                self.wfile.flush()

            def _trickle(self) -> None:
                self._headers(TRICKLE_BYTES)
                for _ in range(TRICKLE_BYTES):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    if server.release.wait(TRICKLE_PAUSE_S):
                        return
                server.trickled_to_the_end.set()

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler


def _answer(query: str, path: str) -> dict[str, object]:
    if path.endswith("/query_range"):
        return {"status": "success", "data": {"resultType": "matrix",
                                              "result": [{"metric": {}, "values": [[1.0, "1"]]}]}}
    if query == "time()":
        return {"status": "success", "data": {"resultType": "scalar", "result": [time.time(), str(time.time())]}}
    if path.endswith("/values"):
        return {"status": "success", "data": ["a", "b"]}
    return VECTOR


@pytest.fixture
def server() -> Iterator[Misbehaving]:
    with Misbehaving() as running:
        yield running
        running.release.set()


def _group(*exprs: str) -> Group:
    queries = tuple(CheckQuery("T", f"panel {n}", PANEL, expr) for n, expr in enumerate(exprs))
    return Group("T", "t.json", queries, 3600)


# ------------------------------------------------------------------------ Prometheus: time


def test_a_slow_query_fails_alone_and_the_run_goes_on(server: Misbehaving) -> None:
    (result,) = run_check(server.url, [_group(STALL, "up")], site_promql(), timeout=0.5)
    stalled, fine = result.results
    assert stalled.status is Status.ERROR and stalled.detail.startswith("timed out after 0.5 s")
    assert fine.status is Status.OK


def test_a_trickled_answer_fails_at_the_deadline_not_at_the_end_of_the_trickle(server: Misbehaving) -> None:
    prometheus = PrometheusClient(server.url, timeout=1.0, read_timeout=0.5)
    with pytest.raises(QueryError, match=r"^timed out after 1 s$"):
        prometheus.instant(TRICKLE)
    assert not server.trickled_to_the_end.is_set()  # given up mid-trickle; per-read timeouts never fire
    assert len(prometheus.instant("up")) == 1  # a fresh session: the abandoned one still holds its connection
    prometheus.close()


def test_a_body_that_stops_coming_is_a_read_timeout_of_that_query(server: Misbehaving) -> None:
    prometheus = PrometheusClient(server.url, timeout=5.0, read_timeout=0.3)
    with pytest.raises(QueryError, match=r"^timed out after 0.3 s without data$"):
        prometheus.instant(STALL_BODY)  # requests reports a read timeout in the body as a ConnectionError
    prometheus.close()


# ------------------------------------------------------------------------ Prometheus: answers


WRONG_SHAPES = [
    '{"status": "success", "data": null}',
    '{"status": "success", "data": [1, 2]}',
    '{"status": "success", "data": {"resultType": "vector"}}',
    '{"status": "success", "data": {"result": {"not": "a list"}}}',
    "<html>\n<body>Sign in</body>\n</html>",
]


@pytest.mark.parametrize("body", WRONG_SHAPES)
def test_an_answer_of_the_wrong_shape_is_that_querys_one_line_error(server: Misbehaving, body: str) -> None:
    server.answers["odd"] = (200, body)
    prometheus = PrometheusClient(server.url)
    with pytest.raises(QueryError) as caught:
        prometheus.instant("odd")
    message = str(caught.value)
    assert message.startswith("answered HTTP 200 with ") and "\n" not in message
    assert ("not JSON: '<html> <body>Sign in" in message) == body.startswith("<html>")


@pytest.mark.parametrize("body", WRONG_SHAPES)
def test_a_probe_answered_in_the_wrong_shape_is_one_remote_error_line(server: Misbehaving, body: str) -> None:
    server.answers["vector(1)"] = (200, body)
    with pytest.raises(RemoteError) as caught:
        run_check(server.url, [_group("up")], site_promql())
    assert caught.value.format_message().startswith(
        f"{server.url} does not answer like Prometheus: answered HTTP 200 with ")
    assert "\n" not in caught.value.message


def test_label_values_of_the_wrong_shape(server: Misbehaving) -> None:
    server.answers["gpu"] = (200, '{"status": "success", "data": null}')
    with pytest.raises(QueryError, match=r'^answered HTTP 200 with JSON of another shape: \{"status"'):
        PrometheusClient(server.url).label_values("gpu")


# ------------------------------------------------------------------------ Prometheus: credentials


def test_credentials_in_the_url_log_in_and_are_never_shown(server: Misbehaving, monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:
    server.answers["echo"] = (422, json.dumps({"status": "error", "error": "bad query\nfrom admin:p@ss"}))
    dashboard = {"title": "T", "uid": "t", "time": {"from": "now-1h"}, "templating": {"list": []},
                 "panels": [{"type": "timeseries", "title": "Echo", "targets": [{"refId": "A", "expr": "echo"}]}]}
    (tmp_path / "t.json").write_text(json.dumps(dashboard))
    monkeypatch.chdir(ROOT)
    url = server.url.replace("http://", "http://admin:p%40ss@")
    done = CliRunner().invoke(check, ["--prometheus", url, "--dashboards", str(tmp_path / "t.json"), "--no-rules"])
    assert set(server.authorization) == {"Basic " + base64.b64encode(b"admin:p@ss").decode()}
    assert "Echo" in done.output and "bad query from admin:***" in done.output
    assert f"checked 1 queries against {server.url}:" in done.output
    for secret in ("p@ss", "p%40ss", "admin:"):
        assert secret not in done.output.replace("admin:***", "")
    assert summary([], url) == f"checked 0 queries against {server.url}: none passed; 0 failed"


def test_credentials_are_not_in_the_unreachable_line() -> None:
    from gpudash.stack.process import free_port

    port = free_port()
    with pytest.raises(RemoteError) as caught:
        PrometheusClient(f"http://admin:s3cret@127.0.0.1:{port}").probe()
    assert caught.value.message == f"cannot reach Prometheus at http://127.0.0.1:{port}: connection refused"


# ------------------------------------------------------------------------ Grafana


def test_grafana_trickled_answer_fails_at_the_deadline(server: Misbehaving) -> None:
    pauses: list[float] = []
    grafana = Grafana(Connection(server.url, "glsa_t", timeout=1.0, read_timeout=0.5, retries=0), pauses.append)
    first = grafana.api
    with pytest.raises(GrafanaFailure) as caught:
        grafana.call("x", "GET", f"/api/{TRICKLE}", lambda: grafana.api.client.GET(f"/{TRICKLE}"))
    assert not server.trickled_to_the_end.is_set()  # given up mid-trickle; per-read timeouts never fire
    assert caught.value.keyword == "timeout" and "no answer within 1 s (timeout)" in caught.value.message
    assert grafana.api is not first  # the abandoned request's session is not reused


def test_grafana_percent_encoded_credentials_log_in(server: Misbehaving) -> None:
    url = server.url.replace("http://", "http://admin:p%40ss@")
    grafana = Grafana(connection_from({"GRAFANA_URL": url}))
    assert grafana.call("x", "GET", "/api/health", lambda: grafana.api.client.GET("/health")) == VECTOR
    assert server.authorization == ["Basic " + base64.b64encode(b"admin:p@ss").decode()]
