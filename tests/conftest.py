"""Shared fixtures: the repository root and an editable copy of thresholds.yaml."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
# Public reference material kept as test fixtures: dcgm-exporter's default counters, dashboard 12239 and real
# /metrics samples, and nvidia_gpu_exporter's output from an H100 under load.
REFERENCE = ROOT / "tests" / "fixtures"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--real-grafana", action="store_true", default=False,
                     help="run the Grafana sync tests against GRAFANA_URL/GRAFANA_TOKEN instead of the stand-in")


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
