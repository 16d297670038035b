"""Real Prometheus and Alertmanager processes on 127.0.0.1, for tests and the demo.

Each runs from the Debian binaries with a temporary data directory and a free port, and is ready (its
``/-/ready`` answers 200) when the ``with`` block starts; leaving the block stops it and removes the
directory. Nothing is mocked::

    with Alertmanager(AM_YAML) as am, Prometheus(prom_yaml(am.address), {"gpu.rules.yml": RULES}) as prom:
        prom.wait_for("up == 1")
        am.alerts()

``rule_files`` are written beside the config file, so the config names them by relative path. Only the
standard library is used (urllib), so this module is also safe on the exporter's side.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from gpudash.errors import RemoteError

_START_ATTEMPTS = 3  # a free port can be taken between choosing it and binding it


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


class _Process:
    """A server binary started in a temp dir on a free loopback port; subclasses say how."""

    packages = ""
    binaries: tuple[str, ...] = ()
    config_name = "config.yml"

    def __init__(
        self,
        config_yaml: str,
        files: Mapping[str, str] | None = None,
        *,
        extra_args: Sequence[str] = (),
        startup_timeout: float = 30.0,
    ) -> None:
        self.config_yaml = config_yaml
        self.files = dict(files or {})
        self.extra_args = list(extra_args)
        self.startup_timeout = startup_timeout
        self.binary = _find(self.binaries, self.packages)
        self.port = 0
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    @property
    def dir(self) -> Path:
        assert self._tmp is not None, "not started"
        return Path(self._tmp.name)

    @property
    def address(self) -> str:
        """host:port, as another server's config names this one."""
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    def _args(self) -> list[str]:
        raise NotImplementedError

    def start(self) -> _Process:
        self._tmp = tempfile.TemporaryDirectory(prefix=f"gpudash-{Path(self.binary).name}-")
        for name, text in {self.config_name: self.config_yaml, **self.files}.items():
            target = self.dir / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        (self.dir / "data").mkdir()
        last_error = ""
        for _ in range(_START_ATTEMPTS):
            self.port = free_port()
            self._log = open(self.dir / "server.log", "ab")  # noqa: SIM115 - lives as long as the process
            self._proc = subprocess.Popen(
                [self.binary, *self._args(), *self.extra_args],
                stdout=self._log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.dir,
            )
            last_error = self._wait_ready()
            if not last_error:
                return self
            self._halt()
            if "address already in use" not in last_error:
                break
        self.stop()
        raise RemoteError(f"{Path(self.binary).name} did not start: {last_error}")

    def _wait_ready(self) -> str:
        """'' once /-/ready answers 200; else why not (the log's last lines)."""
        assert self._proc is not None
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                return f"exited with {self._proc.returncode}: {self.log_tail()}"
            try:
                http_get(f"{self.url}/-/ready", timeout=1.0)
                return ""
            except (urllib.error.URLError, OSError):
                time.sleep(0.05)
        return f"not ready after {self.startup_timeout:.0f}s: {self.log_tail()}"

    def log_tail(self, lines: int = 5) -> str:
        try:
            text = (self.dir / "server.log").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return " | ".join(text.strip().splitlines()[-lines:])

    def _halt(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(5)
        self._proc = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def stop(self) -> None:
        self._halt()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def get_json(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        return json.loads(http_get(f"{self.url}{path}{query}"))


class Prometheus(_Process):
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

    def __enter__(self) -> Prometheus:
        self.start()
        return self

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


class Alertmanager(_Process):
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

    def __enter__(self) -> Alertmanager:
        self.start()
        return self

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
