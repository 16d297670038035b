"""Fixtures for the sync tests: `grafana` (stand-in per version, or a real Grafana) and `standin`.

`pytest --real-grafana` (or `make e2e-grafana`) points the same tests at GRAFANA_URL with GRAFANA_TOKEN.
Each test then works in a folder of its own (uids and titles carry a random prefix) and deletes it after.
Load with `pytest_plugins = ["grafana_standin.fixtures"]`. gpudash writes the classic schema in these tests
(grafana.schema: v1), as on every version; v2 on 13: tests/e2e/test_sync_v2_*.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from .flavor import TESTED_VERSIONS
from .server import StandIn
from .testkit import GrafanaUnderTest


def classic(target: GrafanaUnderTest) -> GrafanaUnderTest:
    """`target` with gpudash.yaml's grafana.schema: v1 (`auto` writes v2 on 13)."""
    target.site.write_text(target.site.read_text() + "  schema: v1\n")
    return target


def _standin_only(request: pytest.FixtureRequest) -> None:
    if request.config.getoption("--real-grafana", default=False):
        pytest.skip("needs the stand-in (faults or server-side state a real Grafana cannot be put in)")


@pytest.fixture(params=TESTED_VERSIONS, ids=lambda v: f"grafana{v}")
def grafana(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[GrafanaUnderTest]:
    """The Grafana under test: the stand-in once per version, or (--real-grafana) GRAFANA_URL once."""
    if request.config.getoption("--real-grafana", default=False):
        if request.param != TESTED_VERSIONS[-1]:
            pytest.skip("real Grafana: each test runs once")
        url, token = os.environ.get("GRAFANA_URL", ""), os.environ.get("GRAFANA_TOKEN", "")
        if not url or not token:
            pytest.fail("--real-grafana needs GRAFANA_URL and GRAFANA_TOKEN (a token that can write)")
        target = classic(GrafanaUnderTest(url, token, "real", tmp_path))
        yield target
        target.cleanup()
        return
    with StandIn(request.param) as standin:
        yield classic(GrafanaUnderTest(standin.url, standin.token, request.param, tmp_path, standin))


@pytest.fixture(params=TESTED_VERSIONS, ids=lambda v: f"grafana{v}")
def standin(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[GrafanaUnderTest]:
    """The stand-in only, once per version: for faults and states only a test server can produce."""
    _standin_only(request)
    with StandIn(request.param) as server:
        yield classic(GrafanaUnderTest(server.url, server.token, request.param, tmp_path, server))
