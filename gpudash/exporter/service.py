"""The exporter as one object: a source, its poller and the HTTP server, started and stopped together.

`gpudash exporter` runs one; tests and the demo start one in-process::

    with Exporter(SimulatedSource(fleet_from_specs(8, seed=7)), listen="127.0.0.1:0") as exporter:
        requests.get(exporter.url + "/metrics")
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence
from types import TracebackType

from gpudash.exporter.attribution import Attributor
from gpudash.exporter.collectors import Collectors, all_signals
from gpudash.exporter.exposition import Exposition
from gpudash.exporter.nic_affinity import GpuNic
from gpudash.exporter.poller import Poller
from gpudash.exporter.server import MetricsServer
from gpudash.exporter.source import COUNT_WINDOW_SECONDS, Source
from gpudash.exporter.webconfig import WebConfig


class Exporter:
    def __init__(
        self,
        source: Source,
        *,
        collectors: Collectors | None = None,
        listen: str = "127.0.0.1:0",
        interval: float = 1.0,
        slow_interval: float = 10.0,
        hostname: str | None = "",
        hostname_label: str = "hostname",
        web: WebConfig | None = None,
        attributor: Attributor | None = None,
        count_window: float = COUNT_WINDOW_SECONDS,
        gpus_expected: int | None = None,
        nics: Sequence[GpuNic] = (),
        node_series: Callable[[float], str] | None = None,
    ) -> None:
        """``hostname=""`` uses this machine's name; ``None`` leaves the host label out."""
        chosen = collectors or all_signals()
        self.source = source
        self.poller = Poller(
            source,
            chosen.keys,
            slow_keys=source.costly_keys(),
            hostname=socket.gethostname() if hostname == "" else hostname,
            hostname_label=hostname_label,
            driver_version_label=chosen.driver_version_label,
            interval=interval,
            slow_interval=slow_interval,
            attributor=attributor,
            count_window=count_window,
            gpus_expected=gpus_expected,
            nics=nics,
            node_series=node_series,
        )
        self.server = MetricsServer(self._exposition, listen, web)
        self._started = False

    def _exposition(self) -> Exposition:
        return self.poller.exposition

    @property
    def url(self) -> str:
        """Base URL, e.g. http://127.0.0.1:40123; metrics are under /metrics."""
        return self.server.url

    @property
    def port(self) -> int:
        return self.server.port

    def start(self) -> Exporter:
        self.poller.start()
        self.server.start()
        self._started = True
        return self

    def stop(self) -> None:
        if self._started:
            self.server.stop()
            self.poller.stop()
            self._started = False
        if self.poller.attributor is not None:
            self.poller.attributor.close()
        self.source.close()

    def __enter__(self) -> Exporter:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
