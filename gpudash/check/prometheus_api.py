"""The live check's only door to Prometheus (or anything that speaks its HTTP API, such as VictoriaMetrics).

prometheus-api-client retries three times with backoff by default, so a dead server takes ~6 s to fail
and a wrong URL looks like a hang; here it makes one attempt with a short connect timeout, each request
has a deadline for the whole of it (gpudash.deadline), and every failure becomes either a per-query error
text (a parse error, a timeout, an answer of the wrong shape) or one RemoteError line when the server
cannot be reached at all. Credentials in the URL log in and never appear in a message: whatever the server
said enters one through `Secrets.printable` (gpudash.redaction). No answer is read past its limit
(gpudash.answer_size: 32 MiB for a query, 16 MiB for a status page).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import partial
from typing import Any

import requests
from prometheus_api_client import PrometheusApiClientException, PrometheusConnect
from urllib3.exceptions import ReadTimeoutError
from urllib3.util.retry import Retry

from gpudash.answer_size import UnreadableAnswer, answer_hook, prometheus_limit
from gpudash.deadline import Deadline, DeadlineExceeded, within
from gpudash.errors import RemoteError
from gpudash.redaction import Secrets, split_userinfo

CONNECT_TIMEOUT_S = 2.0
PROBE_TIMEOUT_S = 5.0
QUERY_TIMEOUT_S = 15.0
# Failures that mean the server is not there: the run stops. Anything else concerns one query.
_UNREACHABLE = (("Connection refused", "connection refused"), ("Failed to resolve", "unknown host"),
                ("No route to host", "no route to host"), ("Network is unreachable", "network unreachable"))


class QueryError(Exception):
    """Prometheus answered, and refused or failed this one query (bad PromQL, too many samples, timeout)."""


@dataclass(frozen=True)
class TimeRange:
    """The time range a dashboard query covers, as Grafana would send it."""

    end: float
    range_s: int
    step_s: int

    @property
    def start(self) -> float:
        return self.end - self.range_s


def _error_text(response: requests.Response | None, fallback: str, secrets: Secrets) -> str:
    if response is None:
        return secrets.printable(fallback)
    try:
        body = response.json()
    except ValueError:
        return f"HTTP {response.status_code}: {secrets.printable(response.text)}"
    if isinstance(body, dict) and body.get("error"):
        return secrets.printable(str(body["error"]), 400)  # the reason comes last, after the series it names
    return f"HTTP {response.status_code}"


def _unexpected(response: requests.Response | None, secrets: Secrets) -> str:
    """What the server answered, when it is not the `{"data": {"result": [...]}}` of Prometheus's API."""
    if response is None:
        return "an answer that is not Prometheus's API"
    try:
        body = response.json()
    except ValueError:
        return (f"answered HTTP {response.status_code} with a body that is not JSON: "
                f"{secrets.printable(response.text, 80)!r}")
    shown = secrets.printable(json.dumps(body), 120)
    return f"answered HTTP {response.status_code} with JSON of another shape: {shown}"


class PrometheusClient:
    """Queries one Prometheus-compatible server; `probe()` first, so an unreachable one is one clear line.

    `timeout` bounds each request as a whole; `read_timeout` (default: the same) each wait for data; `deadline`,
    when given, the whole run: a request gets at most what is left of it, and none is sent once it has passed.
    """

    def __init__(self, url: str, timeout: float = QUERY_TIMEOUT_S, read_timeout: float | None = None,
                 deadline: Deadline | None = None) -> None:
        login = split_userinfo(url.rstrip("/"))
        self.url = login.url
        self.timeout = timeout
        self.read_timeout = timeout if read_timeout is None else read_timeout
        self.deadline = deadline or Deadline.never()
        self._auth = (login.user, login.password) if login.user or login.password else None
        self.secrets = Secrets.of(login.user, login.password)
        self._last: requests.Response | None = None
        self._api = self._connect()

    def _connect(self) -> PrometheusConnect:
        session = requests.Session()
        # The limit first: it reads the body, so an answer past it is never read whole.
        session.hooks["response"] = [answer_hook(prometheus_limit), partial(self._remember, session)]
        self._session = session
        # total=0: one attempt only; read=False: a read timeout stays a timeout, not a MaxRetryError that
        # requests turns into ConnectionError ("cannot reach").
        return PrometheusConnect(self.url, retry=Retry(total=0, read=False, raise_on_status=False),
                                 auth=self._auth, session=session,
                                 timeout=(CONNECT_TIMEOUT_S, self.read_timeout))

    def _remember(self, session: requests.Session, response: requests.Response, *args: Any, **kwargs: Any) -> None:
        if session is self._session:  # a request abandoned at its deadline may still answer, too late
            self._last = response

    def printable(self, text: str, limit: int = 200) -> str:
        """What the server said (or an exception about it), fit for a message: see Secrets.printable."""
        return self.secrets.printable(text, limit)

    def _call(self, what: str, fn: Callable[..., Any], *args: Any, deadline: float | None = None,
              **kwargs: Any) -> list[Any]:
        seconds = min(self.timeout if deadline is None else deadline, self.deadline.left())
        if seconds <= 0:
            raise QueryError(f"not asked: the run's deadline ({self.deadline.seconds:g} s) passed")
        self._last = None
        try:
            result = within(seconds, partial(fn, *args, **kwargs), name=f"prometheus {what}")
        except DeadlineExceeded:
            self._api.close()
            self._api = self._connect()  # the abandoned request still holds its connection: never reuse it
            raise QueryError(f"timed out after {seconds:g} s") from None
        except UnreadableAnswer as exc:
            if what == "probe":
                raise
            raise QueryError(exc.message) from None
        except PrometheusApiClientException as exc:
            raise QueryError(_error_text(self._last, str(exc), self.secrets)) from None
        except requests.JSONDecodeError:
            raise QueryError(_unexpected(self._last, self.secrets)) from None
        except requests.ConnectTimeout:
            raise self._unreachable(what, "connect timed out") from None
        except requests.Timeout:
            raise QueryError(f"timed out after {self.read_timeout:g} s without data") from None
        except requests.ConnectionError as exc:
            if _read_timed_out(exc):  # while reading the body: requests reports it as a ConnectionError
                raise QueryError(f"timed out after {self.read_timeout:g} s without data") from None
            unreachable = _unreachable_reason(exc)
            if unreachable or what == "probe":
                raise self._unreachable(what, unreachable or self._reason(exc)) from None
            raise QueryError(f"connection lost: {self._reason(exc)}") from None
        except requests.RequestException as exc:
            raise RemoteError(f"Prometheus at {self.url} ({what}): {self.printable(str(exc))}") from None
        except (TypeError, KeyError, IndexError):
            # prometheus-api-client indexes ["data"]["result"] without looking: a 200 of another shape lands here.
            if self._last is None or self._last.status_code != 200:
                raise
            raise QueryError(_unexpected(self._last, self.secrets)) from None
        if not isinstance(result, list):
            raise QueryError(_unexpected(self._last, self.secrets))
        return result

    def _unreachable(self, what: str, reason: str) -> RemoteError:
        during = "" if what == "probe" else f" (during {what})"
        return RemoteError(f"cannot reach Prometheus at {self.url}{during}: {reason}")

    def _reason(self, exc: requests.ConnectionError) -> str:
        text = str(exc)
        return self.printable(text.splitlines()[0]) if text else type(exc).__name__

    def probe(self) -> None:
        """Raise RemoteError unless the server answers a trivial query within the connect timeout."""
        started = time.monotonic()
        try:
            self._call("probe", self._api.custom_query, "vector(1)", deadline=PROBE_TIMEOUT_S,
                       timeout=(CONNECT_TIMEOUT_S, min(PROBE_TIMEOUT_S, self.read_timeout)))
        except QueryError as exc:
            raise RemoteError(f"{self.url} does not answer like Prometheus: {exc}") from None
        self.probe_seconds = time.monotonic() - started

    def instant(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        params = {"time": f"{at:.3f}"} if at is not None else None
        return self._call("query", self._api.custom_query, expr, params=params)

    def range(self, expr: str, window: TimeRange) -> list[dict[str, Any]]:
        # The client rounds to whole seconds; rounding the end up keeps the newest samples in the last step.
        end_s = math.ceil(window.end)
        start = datetime.fromtimestamp(end_s - window.range_s, timezone.utc)
        end = datetime.fromtimestamp(end_s, timezone.utc)
        return self._call("query_range", self._api.custom_query_range, expr, start, end, f"{window.step_s}s")

    def label_values(self, label: str, match: str | None = None, window: TimeRange | None = None) -> list[str]:
        params: dict[str, str] = {}
        if match:
            params["match[]"] = match
        if window is not None:
            params.update(start=f"{window.start:.0f}", end=f"{window.end:.0f}")
        return [str(v) for v in self._call("label values", self._api.get_label_values, label, params=params)]

    def now(self) -> float:
        """The server's clock (a query of `time()`), so windows line up even when the clocks differ."""
        try:
            result = self.instant("time()")
        except QueryError as exc:
            raise RemoteError(f"Prometheus at {self.url} cannot tell its time: {exc}") from None
        if not result:
            return time.time()
        try:
            return float(result[0]["value"][0]) if isinstance(result[0], dict) else float(result[0])
        except (KeyError, IndexError, TypeError, ValueError):
            shown = self.printable(json.dumps(result), 120)
            raise RemoteError(f"Prometheus at {self.url} answered time() with {shown}") from None

    def close(self) -> None:
        self._api.close()


def _read_timed_out(exc: BaseException) -> bool:
    reason = exc.args[0] if exc.args else None
    return isinstance(reason, ReadTimeoutError) or isinstance(getattr(reason, "reason", None), ReadTimeoutError)


def _unreachable_reason(exc: requests.ConnectionError) -> str:
    """Why the server cannot be reached at all, or '' when it was reached and the connection broke later."""
    text = str(exc)
    return next((reason for marker, reason in _UNREACHABLE if marker in text), "")


def series_count(result: Any) -> int:
    """Number of series in a query result (a vector or matrix list; a scalar or string counts as one)."""
    if isinstance(result, list):
        if len(result) == 2 and not isinstance(result[0], dict):
            return 1  # a scalar: [time, "value"]
        return len(result)
    return 0
