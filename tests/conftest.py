"""Shared fixtures (the repository root, an editable copy of thresholds.yaml) and the two suites.

tests/unit/ starts no server and no process (tests/unit/conftest.py enforces it); tests/e2e/ is everything
that does, and every test there is marked `e2e`, so `pytest -m "not e2e"` is the unit suite.
pytest-timeout's limit of a test (pyproject's `timeout`, or a test's `timeout` mark) is a safety net like
the tests' own waits: `support.slack` stretches it on a busy machine; Hypothesis's deadline is one too.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import settings
from support.paths import REFERENCE, ROOT, TESTS
from support.slack import ENV as SLACK_ENV
from support.slack import budget, slack

E2E = TESTS / "e2e"
UNIT = TESTS / "unit"

# Hypothesis fails an example slower than its deadline (200 ms by default), which a busy machine's scheduler alone
# can cause (an example of microseconds took 300 ms beside the e2e workers): a safety net far above that instead,
# stretched by the slack at the start of the session.
settings.register_profile("gpudash", deadline=timedelta(seconds=budget(2)))
settings.load_profile("gpudash")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--real-grafana", action="store_true", default=False,
                     help="run the Grafana sync tests against GRAFANA_URL/GRAFANA_TOKEN instead of the stand-in")


def pytest_report_header(config: pytest.Config) -> str:
    return f"safety-net timeouts x{slack():.2g} ({SLACK_ENV} or the load per CPU)"


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: Any) -> bool:
    """pytest-timeout's own timer, for the test's limit times the slack at the moment the test starts."""
    from pytest_timeout import pytest_timeout_set_timer as start_timer

    return bool(start_timer(item, settings._replace(timeout=budget(settings.timeout))))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test under tests/e2e/ is e2e; a test under tests/unit/ marked e2e belongs in tests/e2e/."""
    misplaced = []
    for item in items:
        path = Path(item.path)
        if path.is_relative_to(E2E):
            item.add_marker(pytest.mark.e2e)
        elif path.is_relative_to(UNIT) and item.get_closest_marker("e2e") is not None:
            misplaced.append(item.nodeid)
    if misplaced:
        raise pytest.UsageError("marked e2e but under tests/unit/ (move them to tests/e2e/): " + ", ".join(misplaced))


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture
def thresholds_copy(tmp_path: Path) -> Callable[..., Path]:
    """Return a function that writes thresholds.yaml with some keys changed and gives its path.

    `thresholds_copy(("memory", "warning_ratio"), 0.8)` sets one value; several pairs may be passed.
    """

    def make(*changes: tuple[tuple[str, ...], object]) -> Path:
        data = yaml.safe_load((ROOT / "thresholds.yaml").read_text())
        for path, value in changes:
            node = data
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = value
        target = tmp_path / "thresholds.yaml"
        target.write_text(yaml.safe_dump(data, sort_keys=False))
        return target

    return make


@pytest.fixture
def reference() -> Path:
    """tests/fixtures: dcgm-exporter/ and nvidia_gpu_exporter/ reference files."""
    return REFERENCE


@pytest.fixture
def repo_copy(tmp_path: Path) -> Path:
    """A copy of the files `gpudash dashboards` reads, to run it somewhere harmless."""
    target = tmp_path / "repo"
    target.mkdir()
    shutil.copy(ROOT / "thresholds.yaml", target / "thresholds.yaml")
    shutil.copytree(ROOT / "dashboards", target / "dashboards", ignore=shutil.ignore_patterns("__pycache__"))
    return target
