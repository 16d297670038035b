"""A stack whose configuration names a server's address before that server starts, on ports that stay free."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from typing import TypeVar

from gpudash.errors import RemoteError
from gpudash.stack.process import free_port

T = TypeVar("T")


def free_ports(count: int) -> list[int]:
    ports: set[int] = set()
    while len(ports) < count:
        ports.add(free_port())
    return sorted(ports)


@contextmanager
def on_free_ports(count: int, build: Callable[..., AbstractContextManager[T]], attempts: int = 3) -> Iterator[T]:
    """Enter `build(*ports)` with `count` free ports; build it again on others when a port was taken meanwhile.

    A site names its exporters' addresses before they start (Prometheus starts first, to see their first
    readings): between choosing a free port and an exporter binding it, another process of a busy machine can
    take it, and the exporter exits with "Address already in use".
    """
    for attempt in range(1, attempts + 1):
        with ExitStack() as stack:
            try:
                value = stack.enter_context(build(*free_ports(count)))
            except RemoteError as exc:
                if attempt < attempts and "address already in use" in str(exc).lower():
                    continue
                raise
            yield value
            return
