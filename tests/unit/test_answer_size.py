"""How much of an answer gpudash reads: up to the endpoint's limit, in pieces, and not one piece more."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests
from requests.adapters import BaseAdapter
from urllib3.exceptions import InvalidHeader

from gpudash.answer_size import (
    PIECE,
    QUERY_ANSWER,
    STATUS_ANSWER,
    AnswerTooLarge,
    Limit,
    UnreadableAnswer,
    answer_hook,
    prometheus_limit,
    read_capped,
)

SMALL = Limit(10 * PIECE, "a test answer")
URL = "http://admin:s3cret@prometheus:9090/api/v1/query?query=secret_query"


class Answer:
    """A response as requests and niquests hand it to a hook: headers read, body not yet."""

    def __init__(self, pieces: Iterator[bytes], headers: dict[str, str] | None = None) -> None:
        self.url, self.headers, self._content = URL, headers or {}, False
        self.pieces, self.pulled, self.closed = pieces, 0, False

    def iter_content(self, chunk_size: int) -> Iterator[bytes]:
        for piece in self.pieces:
            self.pulled += 1
            yield piece

    def close(self) -> None:
        self.closed = True


def _endless() -> Iterator[bytes]:
    while True:
        yield b"x" * PIECE


def test_an_answer_within_the_limit_is_read_whole() -> None:
    answer = Answer(iter([b'{"status": ', b'"success"}']))
    read_capped(answer, SMALL)
    assert answer._content == b'{"status": "success"}' and not answer.closed


def test_an_endless_answer_stops_at_the_limit_and_names_the_endpoint_and_the_limit() -> None:
    answer = Answer(_endless())
    with pytest.raises(AnswerTooLarge) as caught:
        read_capped(answer, SMALL)
    assert answer.pulled == 11 and answer.closed  # the piece that went over, and not one more
    assert caught.value.format_message() == ("http://prometheus:9090/api/v1/query answered more than 640 KiB, the most "
                                             "gpudash reads of a test answer")
    assert caught.value.exit_code == 4


def test_a_declared_size_over_the_limit_is_refused_before_reading() -> None:
    answer = Answer(_endless(), {"Content-Length": str(QUERY_ANSWER.bytes + 1)})
    with pytest.raises(AnswerTooLarge, match=r"answered more than 32 MiB, the most gpudash reads of a query answer$"):
        read_capped(answer, QUERY_ANSWER)
    assert answer.pulled == 0 and answer.closed


def test_a_body_that_is_not_http_is_one_line_quoting_nothing_of_it() -> None:
    def broken() -> Iterator[bytes]:
        yield b"{"
        raise InvalidHeader("illegal chunk header: b'Authorization: Basic YWRtaW46czNjcmV0'")

    with pytest.raises(UnreadableAnswer) as caught:
        read_capped(Answer(broken()), SMALL)
    assert caught.value.format_message() == ("http://prometheus:9090/api/v1/query sent an answer that is not valid "
                                             "HTTP (InvalidHeader)")


@pytest.mark.parametrize(("url", "limit"), [
    ("http://p:9090/api/v1/query?query=up", QUERY_ANSWER), ("http://p:9090/prefix/api/v1/query_range", QUERY_ANSWER),
    ("http://p:9090/api/v1/label/gpu/values", QUERY_ANSWER), ("http://p:9090/api/v1/targets", STATUS_ANSWER),
    ("http://p:9090/api/v1/rules", STATUS_ANSWER), ("http://p:9090/api/v1/format_query", STATUS_ANSWER),
])
def test_prometheus_data_apis_get_the_larger_limit(url: str, limit: Limit) -> None:
    assert prometheus_limit(url) is limit


class _EndlessRaw:
    """A socket that never stops sending: `read` counts what was taken from it."""

    def __init__(self) -> None:
        self.read_bytes = 0

    def read(self, size: int = PIECE, **kwargs: Any) -> bytes:
        self.read_bytes += size
        return b"x" * size

    def close(self) -> None:
        pass


class _EndlessAdapter(BaseAdapter):
    def __init__(self) -> None:
        super().__init__()
        self.raw = _EndlessRaw()

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> requests.Response:
        response = requests.Response()
        response.status_code, response.url, response.raw, response.request = 200, str(request.url), self.raw, request
        return response

    def close(self) -> None:
        pass


def test_a_session_with_the_hook_never_reads_an_answer_whole() -> None:
    adapter = _EndlessAdapter()
    with requests.Session() as session:
        session.mount("http://", adapter)
        session.hooks["response"] = [answer_hook(lambda url: SMALL)]
        with pytest.raises(AnswerTooLarge):
            session.get("http://prometheus:9090/api/v1/query")  # stream=False: requests would read it all
    assert adapter.raw.read_bytes <= SMALL.bytes + PIECE
