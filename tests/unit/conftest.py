"""The unit suite starts no process and listens on no socket: a test that does fails, and belongs in tests/e2e/."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest


class StartsSomething(AssertionError):
    """A unit test tried to start a process or listen on a socket."""


@pytest.fixture(autouse=True)
def no_process_no_server(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[None]:
    tried: list[str] = []

    def refuse(what: str) -> StartsSomething:
        tried.append(what)
        return StartsSomething(f"{request.node.nodeid} {what}: a unit test starts no process and no server; "
                               "move it to tests/e2e/")

    def popen(self: Any, args: Any, *rest: Any, **kwargs: Any) -> None:
        raise refuse(f"started a process ({args!r})")

    def listen(self: socket.socket, *args: Any) -> None:
        raise refuse(f"listened on a socket ({self.getsockname()!r})")

    def spawn(*args: Any, **kwargs: Any) -> None:
        raise refuse(f"started a process ({args[:2]!r})")

    monkeypatch.setattr(subprocess.Popen, "__init__", popen)
    monkeypatch.setattr(socket.socket, "listen", listen)
    for name in ("fork", "system", "posix_spawn", "posix_spawnp", "execv", "execve"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, spawn)
    yield
    # Also when the code under test caught the error: what it tried is reported all the same.
    if tried:
        pytest.fail("; ".join(tried), pytrace=False)
