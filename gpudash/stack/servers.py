"""More real servers on 127.0.0.1 beside gpudash.stack.process: the exporter, node_exporter, VictoriaMetrics, and an
Alertmanager webhook receiver.

With gpudash.stack.process's PrometheusProcess these make whole monitoring stacks for the demo and the end-to-end tests:
one Prometheus per cluster scraping its exporters with the generated scrape config, evaluating the
generated rules and remote-writing (with its `cluster` external label) into one VictoriaMetrics, the
global store the dashboards read. Each process runs from its real binary, in a temporary directory, on
a free port; leaving the `with` block stops it and removes the directory.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import yaml

from gpudash.catalog import SIGNALS, Publisher
from gpudash.config.durations import parse_duration
from gpudash.config.loading import Settings
from gpudash.config.site import Cluster, Receiver, ScrapeTarget, Site
from gpudash.repository import ALERTS_FILE, RECORDING_FILE, SCRAPE_FILE
from gpudash.stack.loopback import LoopbackHTTPServer
from gpudash.stack.process import ManagedProcess

# A series of any DCGM field: on /metrics once the exporter's first sweep has read the GPUs.
_DCGM_FIELD_NAMES = tuple(s.dcgm_name.encode() for s in SIGNALS if s.publisher is not Publisher.GPUDASH)


class VictoriaMetrics(ManagedProcess):
    """Single-node VictoriaMetrics: Prometheus remote write in at /api/v1/write, PromQL out at /api/v1/query.

    By default it hides the newest 30 s of samples from queries and caches results; both are turned off
    here so a query sees what was just written, as a test or a demo that has run for seconds needs.
    """

    packages = "victoria-metrics"
    binaries = ("victoria-metrics", "victoria-metrics-prod")
    config_name = ""

    def __init__(self, *, extra_args: Sequence[str] = (), startup_timeout: float = 30.0) -> None:
        super().__init__(extra_args=extra_args, startup_timeout=startup_timeout)

    def _args(self) -> list[str]:
        return [
            f"-storageDataPath={self.dir / 'data'}",
            f"-httpListenAddr={self.address}",
            "-search.latencyOffset=0s",
            "-search.disableCache",
            "-loggerLevel=WARN",
        ]

    @property
    def remote_write_url(self) -> str:
        return f"{self.url}/api/v1/write"


class NodeExporter(ManagedProcess):
    """prometheus-node-exporter with only the CPU and load collectors (what the data-loader alert reads)."""

    packages = "prometheus-node-exporter"
    binaries = ("prometheus-node-exporter", "node_exporter")
    config_name = ""
    ready_path = "/metrics"  # node_exporter has no /-/ready: it is ready when /metrics answers

    def __init__(self, *, startup_timeout: float = 30.0) -> None:
        super().__init__(startup_timeout=startup_timeout)

    def _args(self) -> list[str]:
        return ["--collector.disable-defaults", "--collector.cpu", "--collector.loadavg",
                f"--web.listen-address={self.address}", "--log.level=warn"]


class ExporterProcess(ManagedProcess):
    """`gpudash exporter ARGS` as a child process on a free loopback port, ready when /metrics has GPUs.

    ``args`` are the exporter's own options (``--simulate 8 --fault 2=leak``); ``--listen`` is added, on
    ``port`` when given (so something can be prepared for that address first), else on a free one.
    """

    config_name = ""
    ready_path = "/metrics"

    def __init__(self, args: Sequence[str], *, port: int = 0, startup_timeout: float = 30.0,
                 env: Mapping[str, str] | None = None) -> None:
        super().__init__(startup_timeout=startup_timeout, port=port)
        self.args = list(args)
        self.env = dict(env) if env is not None else None

    @property
    def name(self) -> str:
        return "gpudash exporter"

    @property
    def url(self) -> str:
        return f"http://{self.address}/metrics"

    def _args(self) -> list[str]:
        return ["-m", "gpudash", "exporter", *self.args, "--listen", self.address]

    def _popen_options(self) -> dict[str, Any]:
        # From the caller's directory (a relative --collectors or --web-config path means what it says); in
        # its own session, as a Ctrl-C in the terminal reaches the demo, which stops us in order.
        return {"env": self.env, "start_new_session": True}

    def _ready(self, body: bytes) -> bool:
        return any(name in body for name in _DCGM_FIELD_NAMES)

    def _not_ready(self) -> str:
        return f"no GPU series on {self.url}"


def prometheus_config(scrape_configs: Sequence[Mapping[str, Any]], *, rule_files: Sequence[str] = (),
                      interval: str = "15s", external_labels: Mapping[str, str] | None = None,
                      alertmanager: str | None = None, remote_write: str | None = None) -> str:
    """prometheus.yml text: one cluster's Prometheus, optionally alerting and remote-writing to a global store."""
    config: dict[str, Any] = {"global": {"scrape_interval": interval, "evaluation_interval": interval}}
    if external_labels:
        # Added to every series on remote write and federation and to every alert it sends, unless the
        # series already has the label (the generated scrape config attaches `cluster` as a target label).
        config["global"]["external_labels"] = dict(external_labels)
    if rule_files:
        config["rule_files"] = list(rule_files)
    if alertmanager:
        config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]}
    config["scrape_configs"] = [dict(job) for job in scrape_configs]
    if remote_write:
        # Short batches, so the global store is at most a couple of seconds behind.
        config["remote_write"] = [{"url": remote_write, "queue_config": {"batch_send_deadline": "1s"}}]
    return yaml.safe_dump(config, sort_keys=False)


def local_site(site: Site, cluster: str, targets: Sequence[str], *, interval: str | None = None,
               webhook: str | None = None) -> Site:
    """The site config with one cluster of local targets (and a local webhook receiver), for a local stack.

    Rendering the rules, scrape config and alertmanager.yml from it gives exactly what production gets,
    only pointed at 127.0.0.1.
    """
    changes: dict[str, Any] = {
        "clusters": (Cluster(cluster, tuple(ScrapeTarget(t, "rack-1") for t in targets)),),
    }
    if interval is not None:
        changes["scrape_interval"] = changes["scrape_timeout"] = parse_duration(interval)
    if webhook is not None:
        changes["receivers"] = (Receiver("local", "webhook", (("url", webhook),)),)
    return replace(site, **changes)


def rendered(settings: Settings) -> dict[str, str]:
    """The generated files for these settings (as `gpudash rules` writes them), by relative path."""
    from gpudash.rules.generated_files import render_all

    return render_all(settings)


def scrape_jobs(files: Mapping[str, str]) -> list[dict[str, Any]]:
    jobs: list[dict[str, Any]] = yaml.safe_load(files[SCRAPE_FILE])["scrape_configs"]
    return jobs


def rule_files(files: Mapping[str, str]) -> dict[str, str]:
    """The generated rule files, by the names a prometheus.yml beside them uses."""
    return {Path(rel).name: files[rel] for rel in (ALERTS_FILE, RECORDING_FILE)}


class WebhookReceiver(LoopbackHTTPServer):
    """An Alertmanager webhook receiver on a free loopback port: every notification it gets, in order.

    Alertmanager posts one JSON document per notification (a group of alerts); `notifications` holds
    them as they came, and `on_notification` (if given) is called with each.
    """

    def __init__(self, on_notification: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.notifications: list[dict[str, Any]] = []
        self.on_notification = on_notification
        self._arrived = threading.Condition()

    @property
    def url(self) -> str:
        return f"{super().url}/alerts"

    def received(self) -> list[dict[str, Any]]:
        with self._arrived:
            return list(self.notifications)

    def wait_for(self, wanted: Callable[[dict[str, Any]], bool], timeout: float) -> dict[str, Any] | None:
        """The first notification `wanted` accepts, waiting up to `timeout` seconds for it; None if none came."""
        deadline = time.monotonic() + timeout
        with self._arrived:
            while True:
                found = next((body for body in self.notifications if wanted(body)), None)
                left = deadline - time.monotonic()
                if found is not None or left <= 0:
                    return found
                self._arrived.wait(left)

    def _record(self, body: dict[str, Any]) -> None:
        with self._arrived:
            self.notifications.append(body)
            self._arrived.notify_all()
        if self.on_notification is not None:
            self.on_notification(body)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    self.send_response(400)
                    self.end_headers()
                    return
                receiver._record(body if isinstance(body, dict) else {"body": body})
                self.send_response(200)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: the notifications themselves are the record."""

        return Handler
