"""What the doctor unit tests share: the expectations built from the repository's own settings and dashboards."""

from __future__ import annotations

import pytest
from support.paths import ROOT

from gpudash.catalog import DCGM
from gpudash.check.queries import load_dashboards
from gpudash.config.loading import load_settings
from gpudash.doctor.expect import Expectations, build


@pytest.fixture(scope="session")
def expect() -> Expectations:
    settings = load_settings(ROOT / "thresholds.yaml")
    dashboards = [data for data, _ in load_dashboards([ROOT / "dashboards" / "json"])]
    return build(settings, DCGM, dashboards)
