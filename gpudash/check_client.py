"""The live check's only door to Prometheus (or anything that speaks its HTTP API, such as VictoriaMetrics).

prometheus-api-client retries three times with backoff by default, so a dead server takes ~6 s to fail
and a wrong URL looks like a hang; here it makes one attempt with a short connect timeout, and every
failure becomes either a per-query error text (a parse error, a timeout) or one RemoteError line when the
server cannot be reached at all.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import requests
from prometheus_api_client import PrometheusApiClientException, PrometheusConnect
from urllib3.util.retry import Retry

from gpudash.errors import RemoteError

CONNECT_TIMEOUT_S = 2.0
QUERY_TIMEOUT_S = 15.0


class QueryError(Exception):
    """Prometheus answered, and refused or failed this one query (bad PromQL, too many samples, timeout)."""


@dataclass(frozen=True)
class Window:
    """The time range a dashboard query covers, as Grafana would send it."""

    end: float
    range_s: int
    step_s: int

    @property
    def start(self) -> float:
        return self.end - self.range_s


def _error_text(response: requests.Response | None, fallback: str) -> str:
    if response is None:
        return fallback
    try:
        body = response.json()
    except ValueError:
        return f"HTTP {response.status_code}: {response.text.strip()[:200]}"
    if isinstance(body, dict) and body.get("error"):
        return str(body["error"])
    return f"HTTP {response.status_code}"


class Prometheus:
    """Queries one Prometheus-compatible server; `probe()` first, so an unreachable one is one clear line."""

    def __init__(self, url: str, timeout: float = QUERY_TIMEOUT_S) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._last: requests.Response | None = None
        session = requests.Session()
        session.hooks["response"].append(self._remember)
        # total=0: one attempt only; the check decides what a failure means.
        self._api = PrometheusConnect(self.url, retry=Retry(total=0, raise_on_status=False), session=session,
                                      timeout=(CONNECT_TIMEOUT_S, timeout))

    def _remember(self, response: requests.Response, *args: Any, **kwargs: Any) -> None:
        self._last = response

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        self._last = None
        try:
            return fn(*args, **kwargs)
        except PrometheusApiClientException as exc:
            raise QueryError(_error_text(self._last, str(exc))) from None
        except requests.Timeout:
            raise QueryError(f"timed out after {self.timeout:g} s") from None
        except requests.ConnectionError as exc:
            during = "" if what == "probe" else f" (during {what})"
            raise RemoteError(f"cannot reach Prometheus at {self.url}{during}: {_reason(exc)}") from None
        except requests.RequestException as exc:
            raise RemoteError(f"Prometheus at {self.url} ({what}): {exc}") from None

    def probe(self) -> None:
        """Raise RemoteError unless the server answers a trivial query within the connect timeout."""
        started = time.monotonic()
        try:
            result = self._call("probe", self._api.custom_query, "vector(1)", timeout=(CONNECT_TIMEOUT_S, 5.0))
        except QueryError as exc:
            raise RemoteError(f"{self.url} does not answer like Prometheus: {exc}") from None
        if not isinstance(result, list):
            raise RemoteError(f"{self.url} does not answer like Prometheus (no result list)")
        self.probe_seconds = time.monotonic() - started

    def instant(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        params = {"time": f"{at:.3f}"} if at is not None else None
        return list(self._call("query", self._api.custom_query, expr, params=params))

    def range(self, expr: str, window: Window) -> list[dict[str, Any]]:
        # The client rounds to whole seconds; rounding the end up keeps the newest samples in the last step.
        end_s = math.ceil(window.end)
        start = datetime.fromtimestamp(end_s - window.range_s, timezone.utc)
        end = datetime.fromtimestamp(end_s, timezone.utc)
        return list(self._call("query_range", self._api.custom_query_range, expr, start, end, f"{window.step_s}s"))

    def label_values(self, label: str, match: str | None = None, window: Window | None = None) -> list[str]:
        params: dict[str, str] = {}
        if match:
            params["match[]"] = match
        if window is not None:
            params.update(start=f"{window.start:.0f}", end=f"{window.end:.0f}")
        return [str(v) for v in self._call("label values", self._api.get_label_values, label, params=params)]

    def now(self) -> float:
        """The server's clock (a query of `time()`), so windows line up even when the clocks differ."""
        result = self.instant("time()")
        if isinstance(result, list) and result:
            return float(result[0]["value"][0]) if isinstance(result[0], dict) else float(result[0])
        return time.time()

    def close(self) -> None:
        self._api.close()


def _reason(exc: requests.ConnectionError) -> str:
    text = str(exc)
    for marker, reason in (("Connection refused", "connection refused"), ("timed out", "connect timed out"),
                           ("Name or service not known", "unknown host"), ("No route to host", "no route to host")):
        if marker in text:
            return reason
    return text.splitlines()[0][:200] if text else type(exc).__name__


def series_count(result: Any) -> int:
    """Number of series in a query result (a vector or matrix list; a scalar or string counts as one)."""
    if isinstance(result, list):
        if len(result) == 2 and not isinstance(result[0], dict):
            return 1  # a scalar: [time, "value"]
        return len(result)
    return 0
