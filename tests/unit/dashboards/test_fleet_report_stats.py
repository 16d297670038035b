"""The fleet dashboard's goodput and interruption rate over its range, read as `gpudash report` counts them."""

from __future__ import annotations

import re
from typing import Any

import pytest
from support.paths import ROOT

from gpudash.config.loading import load_settings
from gpudash.health.published_rates import LLAMA3_RATE
from gpudash.panels.build import build_all
from gpudash.rules.health_alerts import health_alert_names

GOODPUT, RATE = "Goodput (proxy) in range", "Interruptions per 1,000 GPU-days in range"


@pytest.fixture(scope="module")
def fleet() -> dict[str, Any]:
    return build_all(load_settings(ROOT / "thresholds.yaml"), ROOT / "dashboards")["gpudash-fleet.json"]


def _stat(fleet: dict[str, Any], title: str) -> tuple[dict[str, Any], str]:
    (panel,) = [p for p in fleet["panels"] if p["title"] == title]
    assert panel["type"] == "stat"
    (target,) = panel["targets"]
    return panel, target["expr"]


def test_goodput_weights_the_recorded_gpu_count_by_tensor_else_sm_activity(fleet: dict[str, Any]) -> None:
    panel, expr = _stat(fleet, GOODPUT)
    assert re.search(r'cluster:gpu_tensor_active:avg\{cluster=~"\$cluster"\} or on \(cluster\) '
                     r'cluster:gpu_sm_active:avg\{cluster=~"\$cluster"\}', expr)
    assert 'on (cluster) cluster:gpu_count:count{cluster=~"$cluster"}' in expr
    assert "[$__range:" in expr and "DCGM_" not in expr  # recorded series only, over the dashboard's range
    assert "proxy" in panel["description"].lower() and "Not a count of useful work" in panel["description"]


def test_the_interruption_rate_counts_health_alert_episodes_with_an_action(fleet: dict[str, Any]) -> None:
    panel, expr = _stat(fleet, RATE)
    for selector in re.findall(r"ALERTS\{[^}]*\}", expr):
        assert 'alertstate="firing"' in selector and 'action!~"none|"' in selector
        assert 'cluster=~"$cluster"' in selector
        names = re.search(r'alertname=~"([^"]*)"', selector)
        assert names is not None and set(names.group(1).split("|")) == set(health_alert_names())
    # An episode counted once, at its first evaluation: firing now and not one evaluation before.
    assert re.search(r"unless on \([^)]*\) max by \([^)]*\) \(ALERTS\{[^}]*\} offset \w+\)", expr)
    assert expr.count("[$__range:") == 2 and "/ 86400" in expr and expr.endswith("* 1000")
    description = panel["description"]
    assert f"{LLAMA3_RATE:.2f}" in description and "Llama 3" in description and "0.47" in description
