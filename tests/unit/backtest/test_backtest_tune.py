"""`gpudash tune`'s proposals from a fleet's history, with Prometheus answers given as data."""

from __future__ import annotations

import math
from typing import Any

import pytest
from support.paths import ROOT

from gpudash.backtest.tune import MARGIN_C, propose
from gpudash.check.prometheus_api import TimeRange
from gpudash.config.loading import load_settings

DAY = 86400.0


class Answers:
    """A Prometheus that answers every range query with the same per-model samples."""

    def __init__(self, samples: dict[str, list[str]]) -> None:
        self.samples = samples

    def range(self, expr: str, window: TimeRange) -> list[dict[str, Any]]:
        return [{"metric": {"modelName": model}, "values": [[i, v] for i, v in enumerate(values)]}
                for model, values in self.samples.items()]


def test_a_hot_fleet_gets_a_warning_above_its_busy_p99() -> None:
    settings = load_settings(ROOT / "thresholds.yaml")
    proposals = propose(Answers({"H200": ["84", "86.5"]}), settings, 0.0, 2 * DAY)
    warning = next(p for p in proposals if p.key == "temperature.gpu_warning_celsius")
    assert warning.new == math.ceil(86.5 + MARGIN_C) == 90  # rounded up to a whole degree
    assert "H200 86.5 C" in warning.reason


@pytest.mark.parametrize("odd", ["+Inf", "-Inf", "NaN"])
def test_samples_that_are_not_finite_are_left_out(odd: str) -> None:
    settings = load_settings(ROOT / "thresholds.yaml")
    proposals = propose(Answers({"H200": [odd, "86.5", odd], "A100": [odd]}), settings, 0.0, 2 * DAY)
    warning = next(p for p in proposals if p.key == "temperature.gpu_warning_celsius")
    assert warning.new == 90
    assert "A100" not in warning.reason  # a model with nothing but +Inf has no statistic
    assert propose(Answers({"H200": [odd, odd]}), settings, 0.0, 2 * DAY) == []
