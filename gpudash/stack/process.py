"""Real Prometheus and Alertmanager processes on 127.0.0.1, for tests and the demo.

Each runs from the Debian binaries with a temporary data directory and a free port, and is ready (its
``/-/ready`` answers 200) when the ``with`` block starts; leaving the block stops it and removes the
directory. Nothing is mocked::

    with Alertmanager(AM_YAML) as am, Prometheus(prom_yaml(am.address), {"gpu.rules.yml": RULES}) as prom:
        prom.wait_for("up == 1")
        am.alerts()

``rule_files`` are written beside the config file, so the config names them by relative path. The
lifecycle is ManagedProcess's, which gpudash.stack.servers's servers share. Only the standard library is
used (urllib), so this module is also safe on the exporter's side.
"""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from gpudash.errors import RemoteError
from gpudash.stack.loopback import OnLoopback

_START_ATTEMPTS = 3  # a free port can be taken between choosing it and binding it
_P = TypeVar("_P", bound="ManagedProcess")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _find(names: Sequence[str], package: str) -> str:
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    raise RemoteError(f"{names[0]} not found on PATH (Debian/Ubuntu: apt install {package})")


def http_get(url: str, timeout: float = 5.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        body: bytes = response.read()
        return body


def http_post(url: str, data: bytes = b"", content_type: str = "application/json", timeout: float = 5.0) -> bytes:
    request = urllib.request.Request(url, data=data, method="POST", headers={"Content-Type": content_type})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        body: bytes = response.read()
        return body


class ManagedProcess(OnLoopback):
    """A server process in its own temporary directory on a loopback port: started, ready, stopped, removed.

    ``start()`` writes ``config_yaml`` (as ``config_name``; none when that is empty) and ``files`` into the
    directory beside a ``data`` folder, runs ``binary`` with ``_args()`` and ``extra_args`` on a free port
    (on another one if that was taken meanwhile; only on ``port`` when one is given), its output to
    ``server.log``, and returns once ``ready_path`` answers 200 with a body ``_ready`` accepts. ``stop()``
    sends ``stop_signal`` (SIGKILL after 10 s) and removes the directory. A subclass names the binary
    (``binaries``, found on PATH, and the Debian ``packages`` that hold it; none: this Python) and its
    arguments, and overrides the rest only where its server differs.
    """

    packages = ""
    binaries: tuple[str, ...] = ()
    config_name = "config.yml"
    ready_path = "/-/ready"
    stop_signal = signal.SIGTERM
    port: int = 0  # the one it listens on, once started

    def __init__(
        self,
        config_yaml: str = "",
        files: Mapping[str, str] | None = None,
        *,
        extra_args: Sequence[str] = (),
        startup_timeout: float = 30.0,
        port: int = 0,
    ) -> None:
        self.config_yaml = config_yaml
        self.files = dict(files or {})
        self.extra_args = list(extra_args)
        self.startup_timeout = startup_timeout
        self.binary = _find(self.binaries, self.packages) if self.binaries else sys.executable
        self.fixed_port = port
        self.port = port
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def name(self) -> str:
        """What messages call this server."""
        return Path(self.binary).name

    @property
    def dir(self) -> Path:
        assert self._tmp is not None, "not started"
        return Path(self._tmp.name)

    def _args(self) -> list[str]:
        raise NotImplementedError

    def _popen_options(self) -> dict[str, Any]:
        """subprocess.Popen's options besides the command and its output."""
        return {"cwd": self.dir}

    def _ready(self, body: bytes) -> bool:
        """Whether this answer on ``ready_path`` means ready (any 200 does, unless a subclass says more)."""
        return True

    def _not_ready(self) -> str:
        """What the error says when the server never gets ready."""
        return "not ready"

    def start(self: _P) -> _P:
        self._tmp = tempfile.TemporaryDirectory(prefix=f"gpudash-{self.name.removeprefix('gpudash ')}-")
        config = {self.config_name: self.config_yaml} if self.config_name else {}
        for name, text in {**config, **self.files}.items():
            target = self.dir / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        (self.dir / "data").mkdir()
        last_error = ""
        for _ in range(1 if self.fixed_port else _START_ATTEMPTS):
            self.port = self.fixed_port or free_port()
            with open(self.dir / "server.log", "ab") as log:  # the child keeps its own copy of the descriptor
                self._proc = subprocess.Popen(
                    [self.binary, *self._args(), *self.extra_args],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    **self._popen_options(),
                )
            last_error = self._wait_ready()
            if not last_error:
                return self
            self._halt()
            if "address already in use" not in last_error.lower():
                break
        self.stop()
        raise RemoteError(f"{self.name} did not start: {last_error}")

    def _wait_ready(self) -> str:
        """'' once ready; else why not (the log's last lines)."""
        assert self._proc is not None
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                return f"exited with {self._proc.returncode}: {self.log_tail()}"
            try:
                if self._ready(http_get(f"http://{self.address}{self.ready_path}", timeout=1.0)):
                    return ""
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.05)
        return f"{self._not_ready()} after {self.startup_timeout:.0f}s: {self.log_tail()}"

    def log_tail(self, lines: int = 5) -> str:
        if self._tmp is None:
            return ""
        try:
            text = (self.dir / "server.log").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return " | ".join(text.strip().splitlines()[-lines:])

    def _halt(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(self.stop_signal)
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(5)
        self._proc = None

    def stop(self) -> None:
        self._halt()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self: _P) -> _P:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def get_json(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        return json.loads(http_get(f"{self.url}{path}{query}"))


class PrometheusProcess(ManagedProcess):
    """``prometheus`` with ``config_yaml`` and ``rule_files`` ({relative name: text}); lifecycle API on.

    Firing alerts are re-sent to Alertmanager every second (Prometheus' default is a minute), so a test
    sees an alert in Alertmanager within seconds of it firing.
    """

    packages = "prometheus"
    binaries = ("prometheus",)
    config_name = "prometheus.yml"

    def __init__(
        self,
        config_yaml: str,
        rule_files: Mapping[str, str] | None = None,
        *,
        extra_args: Sequence[str] = (),
        startup_timeout: float = 30.0,
    ) -> None:
        super().__init__(config_yaml, rule_files, extra_args=extra_args, startup_timeout=startup_timeout)

    def _args(self) -> list[str]:
        return [
            f"--config.file={self.dir / self.config_name}",
            f"--storage.tsdb.path={self.dir / 'data'}",
            f"--web.listen-address={self.address}",
            "--web.enable-lifecycle",
            "--rules.alert.resend-delay=1s",
            "--log.level=warn",
        ]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Instant query; the result vector (empty when nothing matches). A bad expression raises."""
        try:
            body = self.get_json("/api/v1/query", query=expr)
        except urllib.error.HTTPError as exc:
            detail = json.loads(exc.read() or b"{}").get("error", str(exc))
            raise RemoteError(f"query {expr!r} failed: {detail}") from None
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def wait_for(self, expr: str, timeout: float = 30.0, interval: float = 0.25) -> list[dict[str, Any]]:
        """Poll until ``expr`` returns at least one series; raise RemoteError at the timeout."""
        deadline = time.monotonic() + timeout
        while True:
            result = self.query(expr)
            if result:
                return result
            if time.monotonic() > deadline:
                raise RemoteError(f"query {expr!r} returned nothing for {timeout:.0f}s")
            time.sleep(interval)

    def targets(self) -> list[dict[str, Any]]:
        active: list[dict[str, Any]] = self.get_json("/api/v1/targets")["data"]["activeTargets"]
        return active

    def reload(self) -> None:
        http_post(f"{self.url}/-/reload")


class AlertmanagerProcess(ManagedProcess):
    """``prometheus-alertmanager`` with ``config_yaml``, clustering off; ``templates`` beside the config."""

    packages = "prometheus-alertmanager"
    binaries = ("prometheus-alertmanager", "alertmanager")
    config_name = "alertmanager.yml"

    def __init__(
        self,
        config_yaml: str,
        templates: Mapping[str, str] | None = None,
        *,
        extra_args: Sequence[str] = (),
        startup_timeout: float = 30.0,
    ) -> None:
        super().__init__(config_yaml, templates, extra_args=extra_args, startup_timeout=startup_timeout)

    def _args(self) -> list[str]:
        return [
            f"--config.file={self.dir / self.config_name}",
            f"--storage.path={self.dir / 'data'}",
            f"--web.listen-address={self.address}",
            "--cluster.listen-address=",
            "--log.level=warn",
        ]

    def alerts(self) -> list[dict[str, Any]]:
        """Alerts Alertmanager holds now (API v2)."""
        alerts: list[dict[str, Any]] = self.get_json("/api/v2/alerts")
        return alerts

    def post_alerts(self, alerts: Sequence[Mapping[str, Any]]) -> None:
        http_post(f"{self.url}/api/v2/alerts", json.dumps(list(alerts)).encode())
