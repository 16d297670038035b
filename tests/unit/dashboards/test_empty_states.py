"""Panels as Grafana draws them: an empty answer that is good news says so, counts are drawn whole, and the
throttle reasons have room for each row."""

from __future__ import annotations

from typing import Any

import pytest
from support.paths import ROOT

from gpudash.config.loading import load_settings
from gpudash.panels.build import build_all


@pytest.fixture(scope="module")
def built() -> dict[str, dict[str, Any]]:
    return build_all(load_settings(ROOT / "thresholds.yaml"), ROOT / "dashboards")


def starting(dashboard: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    found = [p for p in dashboard["panels"] if str(p.get("title", "")).startswith(prefix)]
    assert found, prefix
    return found


@pytest.mark.parametrize(("name", "prefix"), [
    ("gpudash-fleet.json", "Exporters and GPUs that stopped reporting"),
    ("gpudash-fleet.json", "Memory pressure"),
    ("gpudash-job.json", "Processes on the job's GPUs that belong to another job")])
def test_an_empty_answer_that_is_good_news_says_so(built: dict[str, Any], name: str, prefix: str) -> None:
    (panel,) = starting(built[name], prefix)
    shown = panel["fieldConfig"]["defaults"].get("noValue")  # what Grafana shows for an empty answer
    assert shown and shown.startswith("None"), (prefix, shown)


@pytest.mark.parametrize(("name", "prefix"), [
    ("gpudash-node.json", "XID errors by code"), ("gpudash-fleet.json", "XID errors by code"),
    ("gpudash-job.json", "XID errors on the job's GPUs, by code"),
    ("gpudash-health.json", "Firing health alerts per action"), ("gpudash-health.json", "GPUs down / expected")])
def test_counts_are_drawn_without_decimals(built: dict[str, Any], name: str, prefix: str) -> None:
    for panel in starting(built[name], prefix):
        assert panel["fieldConfig"]["defaults"].get("decimals") == 0, panel["title"]


def test_throttle_reasons_give_each_gpu_and_reason_a_readable_row(built: dict[str, Any]) -> None:
    from gpudash.catalog import THERMAL_OR_BRAKE_REASONS
    from gpudash.preview.pixels import ROW_PX

    (panel,) = starting(built["gpudash-node.json"], "Throttle reasons")
    rows = 8 * len(THERMAL_OR_BRAKE_REASONS)  # an 8-GPU node, each reason its own row
    title_and_legend_px = 70
    assert (panel["gridPos"]["h"] * ROW_PX - title_and_legend_px) / rows >= 14, panel["gridPos"]
