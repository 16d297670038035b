"""Who holds a job, from gpudash_job_info: the job dashboard's table and the fleet's GPU-hours columns."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from support.paths import ROOT

from gpudash.catalog import JOB_INFO, JOB_INFO_LABELS
from gpudash.config.loading import load_settings
from gpudash.panels.build import build_all

FLEET_HOURS = ("GPU-hours held per job (top 10)", "Largest idle holders (top 10 GPU-hours idle)")


def _build(site: Path | None = None) -> dict[str, dict[str, Any]]:
    return build_all(load_settings(ROOT / "thresholds.yaml", site), ROOT / "dashboards")


@pytest.fixture(scope="module")
def built() -> dict[str, dict[str, Any]]:
    return _build()


def _panel(dashboard: dict[str, Any], title: str) -> dict[str, Any]:
    (panel,) = [p for p in dashboard["panels"] if p["title"] == title]
    return panel


def _value_targets(panel: dict[str, Any]) -> list[dict[str, Any]]:
    """The targets of the table's shown values: not the hidden lifetime columns its job links read."""
    return [t for t in panel["targets"] if t["refId"] not in ("Y", "Z")]


def _info_selector(expr: str) -> str:
    (selector,) = re.findall(rf"{JOB_INFO}\{{[^}}]*\}}", expr)
    return selector


def test_the_job_dashboard_opens_on_who_holds_the_job(built: dict[str, dict[str, Any]]) -> None:
    job = built["gpudash-job.json"]
    first_row, first = job["panels"][:2]
    assert first_row["type"] == "row" and first["title"] == "Who holds the job" and first["type"] == "table"
    (target,) = first["targets"]
    expr = target["expr"]
    assert f"group by (cluster, hpc_job, {', '.join(JOB_INFO_LABELS)})" in expr
    # One row per job, however many of its nodes publish the series, and only the chosen job's.
    assert expr.startswith("topk by (cluster, hpc_job) (1, ")
    selector = _info_selector(expr)
    assert 'cluster=~"$cluster"' in selector and 'hpc_job=~"$job"' in selector
    # The labels are the table; its value (always 1) is not shown, and no series reads "unknown".
    organize = first["transformations"][-1]["options"]
    assert organize["excludeByName"]["Value"] is True
    assert first["fieldConfig"]["defaults"]["noValue"].startswith("unknown")


@pytest.mark.parametrize("title", FLEET_HOURS)
def test_the_fleets_gpu_hours_tables_join_user_and_account_by_the_job(built: dict[str, dict[str, Any]],
                                                                     title: str) -> None:
    panel = _panel(built["gpudash-fleet.json"], title)
    assert panel["targets"]
    for target in _value_targets(panel):
        expr = target["expr"]
        assert "* on (cluster, hpc_job) group_left (user, account) topk by (cluster, hpc_job) (1, " in expr
        assert "group by (cluster, hpc_job, user, account) (" in expr
        # A job without metadata keeps its row: the hours alone, for the jobs the join left out.
        assert ") or on (cluster, hpc_job) (" in expr
        assert 'cluster=~"$cluster"' in _info_selector(expr)


def test_the_joins_follow_the_sites_job_label(tmp_path: Path) -> None:
    site = tmp_path / "gpudash.yaml"
    site.write_text("jobs:\n  label: slurm_job\n")
    built = _build(site)
    holder = _panel(built["gpudash-job.json"], "Who holds the job")["targets"][0]["expr"]
    assert "group by (cluster, slurm_job, user, account, partition, job_name)" in holder
    assert 'slurm_job=~"$job"' in _info_selector(holder)
    for title in FLEET_HOURS:
        panel = _panel(built["gpudash-fleet.json"], title)
        for target in _value_targets(panel):
            assert "on (cluster, slurm_job) group_left (user, account)" in target["expr"]
        assert all("hpc_job" not in target["expr"] for target in panel["targets"])
