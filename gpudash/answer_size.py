"""How much of a server's answer gpudash reads: a limit per kind of endpoint, read in pieces, never more.

An HTTP client reads a whole body before the caller sees it, so one answer of 100 MB (a proxy's error page
looping, a query over every series, a hostile server's endless stream) becomes gigabytes of Python objects.
`answer_hook` is a response hook for a requests or niquests session: it runs before the library reads the body,
reads it in 64 KiB pieces (decompressed, so a gzip bomb counts at its real size) up to the endpoint's limit, and
raises `AnswerTooLarge` (one line naming the endpoint and the limit) as soon as the answer declares or sends
more; the connection is closed, not read to its end. A body that breaks off or is not valid HTTP (a bad chunk
header) is `UnreadableAnswer`, one line that names the endpoint and quotes nothing of the body.

| limit | what | endpoints |
|---|---|---|
| 32 MiB | `QUERY_ANSWER` | Prometheus's query, query_range, label and series APIs |
| 16 MiB | `STATUS_ANSWER` | Prometheus's status APIs (targets, rules, ...), Alertmanager, an exporter's /metrics |
| 16 MiB | `GRAFANA_ANSWER` | every Grafana API |
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from urllib3.exceptions import HTTPError

from gpudash.errors import RemoteError

MiB = 1 << 20
PIECE = 65536


@dataclass(frozen=True)
class Limit:
    bytes: int
    what: str  # what it bounds, for the message: "a query answer"

    def __str__(self) -> str:
        return f"{self.bytes // MiB} MiB" if self.bytes % MiB == 0 else f"{self.bytes // 1024} KiB"


QUERY_ANSWER = Limit(32 * MiB, "a query answer")
STATUS_ANSWER = Limit(16 * MiB, "a status answer")
GRAFANA_ANSWER = Limit(16 * MiB, "a Grafana answer")
# Prometheus's APIs that answer with data (series, samples, label values): the others are status pages.
_PROMETHEUS_DATA = ("/api/v1/query", "/api/v1/query_range", "/api/v1/label/", "/api/v1/labels", "/api/v1/series")


def prometheus_limit(url: str) -> Limit:
    """The limit for an answer from this Prometheus URL: data APIs get the larger one."""
    path = urlsplit(url).path
    return QUERY_ANSWER if any(marker in path for marker in _PROMETHEUS_DATA) else STATUS_ANSWER


class UnreadableAnswer(RemoteError):
    """gpudash stopped reading an answer: more than its limit, or a body that is not valid HTTP."""

    def __init__(self, message: str, endpoint: str) -> None:
        super().__init__(message)
        self.endpoint = endpoint


class AnswerTooLarge(UnreadableAnswer):
    """A server answered more than gpudash reads from that endpoint."""

    def __init__(self, endpoint: str, limit: Limit) -> None:
        super().__init__(f"{endpoint} answered more than {limit}, the most gpudash reads of {limit.what}", endpoint)
        self.limit = limit


class _Response(Protocol):
    """What requests' and niquests' responses share, as far as reading the body goes."""

    url: str | None
    headers: Any
    _content: Any

    def iter_content(self, chunk_size: int) -> Any: ...

    def close(self) -> None: ...


def endpoint(url: str) -> str:
    """scheme://host:port/path: no credentials, no query string (a query can be long and says nothing here)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2], query="", fragment=""))


def read_capped(response: _Response, limit: Limit) -> None:
    """Read `response`'s body into it, at most `limit` bytes once decompressed; AnswerTooLarge past that."""
    declared = str(response.headers.get("Content-Length") or "")
    if declared.isdigit() and int(declared) > limit.bytes:
        response.close()
        raise AnswerTooLarge(endpoint(str(response.url)), limit)
    body = bytearray()
    try:
        for piece in response.iter_content(PIECE):
            body += piece
            if len(body) > limit.bytes:
                response.close()
                raise AnswerTooLarge(endpoint(str(response.url)), limit)
    except HTTPError as exc:  # what the HTTP library does not wrap; its text quotes the body, so it is not shown
        response.close()
        where = endpoint(str(response.url))
        raise UnreadableAnswer(f"{where} sent an answer that is not valid HTTP ({type(exc).__name__})", where) from None
    response._content = bytes(body)


def answer_hook(limit_for: Callable[[str], Limit]) -> Callable[..., None]:
    """A session's response hook that reads every answer with the limit `limit_for(url)` gives."""

    def hook(response: _Response, *args: Any, **kwargs: Any) -> None:
        read_capped(response, limit_for(str(response.url)))

    return hook
