"""Everything doctor judges, fetched once: each exporter's page, Prometheus' view, Alertmanager's, Grafana's.

A fetch never raises for a server that is down or answers badly: it records the reason in `error`, so the
links after it are still checked and the broken one is named. Prometheus is read through the live check's
client (one attempt, a deadline per request, credentials out of every message); exporters and Alertmanager
over plain HTTP with the same deadline, redaction and limit on the size of an answer (gpudash.answer_size).
The errors servers report about themselves (a target's or a rule's lastError) are made printable here, where
the credentials are known, before any judge cuts them short.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import requests
import yaml
from prometheus_api_client import PrometheusApiClientException
from prometheus_client.parser import text_string_to_metric_families

from gpudash.answer_size import STATUS_ANSWER, UnreadableAnswer, answer_hook
from gpudash.check.prometheus_api import CONNECT_TIMEOUT_S, PrometheusClient, QueryError
from gpudash.deadline import DeadlineExceeded, within
from gpudash.errors import GpudashError
from gpudash.redaction import Secrets, split_userinfo

T = TypeVar("T")
DEFAULT_TIMEOUT_S = 10.0
ERROR_TEXT = 400  # characters of an error a server reports about itself that doctor keeps
# How far back a node's GPU count is remembered, so a node that lost one shows it.
PEAK_WINDOW = "1h"


@dataclass(frozen=True)
class Sample:
    labels: Mapping[str, str]
    value: float


Samples = Mapping[str, tuple[Sample, ...]]


_WRITTEN_NAME = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)", re.MULTILINE)


def parse_exposition(text: str) -> dict[str, tuple[Sample, ...]]:
    """Prometheus text exposition -> samples by metric name (a counter's `_total` name kept as written)."""
    found: dict[str, list[Sample]] = {}
    # prometheus_client's parser names a counter's samples `<name>_total` even where the text wrote no such
    # suffix (dcgm-exporter's DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL, DCGM_FI_DEV_PCIE_REPLAY_COUNTER): keep the
    # name the exporter wrote.
    written = set(_WRITTEN_NAME.findall(text))
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = sample.name if sample.name in written or sample.name != f"{family.name}_total" else family.name
            found.setdefault(name, []).append(Sample(dict(sample.labels), float(sample.value)))
    return {name: tuple(samples) for name, samples in found.items()}


# ------------------------------------------------------------------------------------------------ HTTP


class _Http:
    """GET with a connect timeout, a deadline for the whole answer, a limit on its size, and credentials kept out
    of messages."""

    def __init__(self, url: str, timeout: float) -> None:
        login = split_userinfo(url.rstrip("/"))
        self.url = login.url
        self.timeout = timeout
        self._auth = (login.user, login.password) if login.user or login.password else None
        self.secrets = Secrets.of(login.user, login.password)

    def get(self, path: str) -> requests.Response:
        def request() -> requests.Response:
            with requests.Session() as session:
                session.hooks["response"] = [answer_hook(lambda url: STATUS_ANSWER)]
                return session.get(f"{self.url}{path}", auth=self._auth, timeout=(CONNECT_TIMEOUT_S, self.timeout))

        return within(self.timeout, request, name="doctor GET")

    def problem(self, exc: BaseException) -> str:
        """Why a request failed, as one line fit for a message."""
        if isinstance(exc, DeadlineExceeded):
            return f"no answer within {self.timeout:g} s"
        if isinstance(exc, UnreadableAnswer):
            return exc.message
        if isinstance(exc, requests.ConnectTimeout):
            return "connect timed out"
        if isinstance(exc, requests.ConnectionError):
            text = str(exc)
            for marker, reason in (("refused", "connection refused"), ("resolve", "unknown host"),
                                   ("No route", "no route to host")):
                if marker in text:
                    return reason
            return f"connection failed: {self.secrets.printable(text, 120)}"
        return self.secrets.printable(str(exc), 160)

    def status_problem(self, response: requests.Response) -> str:
        return f"HTTP {response.status_code}: {self.secrets.printable(response.text, 100)}"


# ------------------------------------------------------------------------------------------------ exporters


@dataclass(frozen=True)
class ExporterPage:
    url: str  # without credentials
    samples: Samples = field(default_factory=dict)
    error: str = ""
    fetched_at: float = 0.0  # this machine's clock when the page arrived
    discovered: bool = False  # found through Prometheus' targets, not given


def metrics_url(address_or_url: str) -> str:
    """`host:port` -> `http://host:port/metrics`; a URL without a path gets /metrics."""
    url = address_or_url if "://" in address_or_url else f"http://{address_or_url}"
    _scheme, _, rest = url.partition("://")
    return url if "/" in rest else f"{url}/metrics"


def scrape_exporter(url: str, timeout: float = DEFAULT_TIMEOUT_S, discovered: bool = False) -> ExporterPage:
    http = _Http(metrics_url(url), timeout)
    try:
        response = http.get("")
    except (requests.RequestException, DeadlineExceeded, UnreadableAnswer) as exc:
        return ExporterPage(http.url, error=http.problem(exc), discovered=discovered)
    if response.status_code != 200:
        return ExporterPage(http.url, error=http.status_problem(response), discovered=discovered)
    try:
        samples = parse_exposition(response.text)
    except ValueError as exc:
        return ExporterPage(http.url, error=f"not a Prometheus exposition: {http.secrets.printable(str(exc), 120)}",
                            discovered=discovered)
    return ExporterPage(http.url, samples, fetched_at=time.time(), discovered=discovered)


# ------------------------------------------------------------------------------------------------ Prometheus


class PrometheusStatus(PrometheusClient):
    """The live check's client, plus the status APIs doctor reads (targets, rules, Alertmanagers, labels)."""

    def api(self, path: str, **params: str) -> Any:
        """GET /api/v1/<path>: the answer's `data`."""
        def get() -> list[Any]:
            response = self._session.get(f"{self.url}/api/v1/{path}", params=params, auth=self._auth,
                                         timeout=(CONNECT_TIMEOUT_S, self.read_timeout))
            if response.status_code != 200:
                raise PrometheusApiClientException(f"HTTP {response.status_code}")
            body = response.json()
            if not isinstance(body, dict) or "data" not in body:
                raise TypeError("no data")
            return [body["data"]]

        return self._call(path, get)[0]

    def label_names(self, match: str, since: float) -> list[str]:
        names = self._call("label names", self._api.get_label_names,
                           params={"match[]": match, "start": f"{since:.0f}"})
        return [str(name) for name in names]


@dataclass(frozen=True)
class PrometheusView:
    url: str
    error: str = ""
    now: float = 0.0
    targets: tuple[Mapping[str, Any], ...] = ()
    rule_groups: tuple[Mapping[str, Any], ...] = ()
    alertmanagers: tuple[str, ...] = ()
    labels: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # metric -> label names on its series
    results: Mapping[str, tuple[Mapping[str, Any], ...]] = field(default_factory=dict)  # query name -> vector
    failed_queries: Mapping[str, str] = field(default_factory=dict)  # query name -> why it failed
    formatted: Mapping[str, str] = field(default_factory=dict)  # expression -> as Prometheus formats it


def read_prometheus(url: str, queries: Mapping[str, str], label_metrics: Sequence[str],
                    expressions: Callable[[Sequence[Mapping[str, Any]]], Sequence[str]],
                    timeout: float = DEFAULT_TIMEOUT_S) -> PrometheusView:
    """One pass over Prometheus. `expressions(rule_groups)` names what to have Prometheus format (rules)."""
    try:
        client = PrometheusStatus(url, timeout=timeout)
    except GpudashError as exc:
        return PrometheusView(split_userinfo(url).url, error=exc.format_message())
    try:
        client.probe()
        now = client.now()
        targets = [_printable_error(client, t) for t in _listed(client.api("targets", state="active"), "activeTargets")]
        groups = [{**g, "rules": [_printable_error(client, r) for r in g.get("rules") or [] if isinstance(r, dict)]}
                  for g in _listed(client.api("rules"), "groups")]
        managers = _listed(client.api("alertmanagers"), "activeAlertmanagers")
    except GpudashError as exc:
        client.close()
        return PrometheusView(client.url, error=exc.format_message())
    except QueryError as exc:
        client.close()
        return PrometheusView(client.url, error=f"{client.url} answered its status API with: {exc}")
    results: dict[str, tuple[Mapping[str, Any], ...]] = {}
    failed: dict[str, str] = {}
    labels: dict[str, tuple[str, ...]] = {}
    try:
        for name, expr in queries.items():
            try:
                results[name] = tuple(client.instant(expr, at=now))
            except QueryError as exc:
                failed[name] = str(exc)
        for metric in label_metrics:
            try:
                labels[metric] = tuple(sorted(client.label_names(metric, now - 300)))
            except QueryError as exc:
                failed[f"labels of {metric}"] = str(exc)
        formatted = _formatted(client, expressions(groups))
    except GpudashError as exc:
        return PrometheusView(client.url, error=exc.format_message())
    finally:
        client.close()
    return PrometheusView(client.url, "", now, tuple(targets), tuple(groups),
                          tuple(str(m.get("url", "")) for m in managers), labels, results, failed, formatted)


def _printable_error(client: PrometheusClient, item: Mapping[str, Any]) -> Mapping[str, Any]:
    """A target or a rule with the error Prometheus reports for it fit for a message (a judge cuts it further)."""
    error = item.get("lastError")
    return {**item, "lastError": client.printable(str(error), ERROR_TEXT)} if error else item


def _listed(data: Any, key: str) -> list[Mapping[str, Any]]:
    """The list of objects under `key` of an API answer's data; QueryError when the answer has another shape."""
    items = data.get(key) if isinstance(data, dict) else None
    if items is None:
        return []
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise QueryError(f"its {key} are not a list of objects")
    return items


def _formatted(client: PrometheusStatus, exprs: Sequence[str]) -> dict[str, str]:
    """Each expression as Prometheus prints it (/api/v1/format_query, 2.38+): equal text means equal rules.

    A server without that API (older Prometheus, some stores) leaves the map empty and the rules are compared
    as text with whitespace evened out.
    """
    out: dict[str, str] = {}
    for expr in dict.fromkeys(exprs):
        try:
            out[expr] = str(client.api("format_query", query=expr))
        except QueryError:
            if not out:
                return {}
    return out


# ------------------------------------------------------------------------------------------------ Alertmanager


@dataclass(frozen=True)
class AlertmanagerView:
    url: str
    error: str = ""
    config: Mapping[str, Any] = field(default_factory=dict)  # the configuration it has loaded
    notifications: Mapping[str, tuple[float, float]] = field(default_factory=dict)  # integration: (sent, failed)


def read_alertmanager(url: str, timeout: float = DEFAULT_TIMEOUT_S) -> AlertmanagerView:
    http = _Http(url, timeout)
    try:
        status = http.get("/api/v2/status")
        if status.status_code != 200:
            return AlertmanagerView(http.url, error=f"/api/v2/status: {http.status_problem(status)}")
        original = status.json().get("config", {}).get("original", "")
        metrics = http.get("/metrics")
    except (requests.RequestException, DeadlineExceeded, UnreadableAnswer) as exc:
        return AlertmanagerView(http.url, error=http.problem(exc))
    except (ValueError, AttributeError):
        return AlertmanagerView(http.url, error="/api/v2/status did not answer Alertmanager's JSON")
    try:
        config = yaml.safe_load(original) or {}
    except yaml.YAMLError:
        return AlertmanagerView(http.url, error="its status API holds a configuration that is not YAML")
    notifications = notification_counts(parse_exposition(metrics.text)) if metrics.status_code == 200 else {}
    return AlertmanagerView(http.url, config=config if isinstance(config, dict) else {},
                            notifications=notifications)


def notification_counts(samples: Samples) -> dict[str, tuple[float, float]]:
    """(sent, failed) per integration, or per receiver and integration where Alertmanager counts so."""
    counts: dict[str, tuple[float, float]] = {}
    for index, name in enumerate(("alertmanager_notifications_total", "alertmanager_notifications_failed_total")):
        for sample in samples.get(name, ()):
            key = _integration(sample.labels)
            pair = list(counts.get(key, (0.0, 0.0)))
            pair[index] += sample.value  # failures come per reason on newer Alertmanagers
            counts[key] = (pair[0], pair[1])
    return counts


def _integration(labels: Mapping[str, str]) -> str:
    """`webhook`, or `gpudash-critical/webhook` where Alertmanager counts per receiver (0.27 and later)."""
    integration = labels.get("integration", "")
    receiver = labels.get("receiver_name", "")
    return f"{receiver}/{integration}" if receiver else integration


def finite(value: Any) -> float | None:
    """A sample value from an API answer as a float; None when it is not a finite number."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None
