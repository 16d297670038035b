"""The real generated dashboards: a threshold change writes exactly the dashboards it affects.

Uses `gpudash dashboards` on a copy of the repository; uids and titles get the test's prefix so a run
against a real Grafana never touches the real gpudash dashboards there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from grafana_standin.testkit import GrafanaUnderTest, run_gpudash, write_set

pytest_plugins = ["grafana_standin.fixtures"]
pytestmark = pytest.mark.slow


def generate(repo: Path, thresholds: Path, grafana: GrafanaUnderTest) -> list[dict[str, Any]]:
    out = repo / "out"
    done = run_gpudash(["dashboards", "--definitions", repo / "dashboards", "--thresholds", thresholds,
                        "--out", out], {"GPUDASH_SITE": None})
    assert done.code == 0, done.text
    dashboards = []
    for path in sorted(out.glob("*.json")):
        data = json.loads(path.read_text())
        data["uid"] = grafana.uid(data["uid"])[:40]
        data["title"] = f"{data['title']} {grafana.prefix}"
        dashboards.append(data)
    return dashboards


def set_threshold(path: Path, keys: tuple[str, ...], value: Any) -> None:
    data = yaml.safe_load(path.read_text())
    node = data
    for key in keys[:-1]:
        node = node[key]
    node[keys[-1]] = value
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def test_a_threshold_change_writes_exactly_the_affected_dashboards(grafana: GrafanaUnderTest,
                                                                   repo_copy: Path) -> None:
    thresholds = repo_copy / "thresholds.yaml"
    local = generate(repo_copy, thresholds, grafana)
    assert len(local) >= 2
    first = grafana.push(local)
    assert first.code == 0, first.text
    assert grafana.gpudash("sync").writes == 0

    set_threshold(thresholds, ("power", "warning_ratio"), 0.8)  # drawn on the node dashboard (not the fleet one)
    changed = generate(repo_copy, thresholds, grafana)
    touched = [new["uid"] for old, new in zip(local, changed, strict=True) if old != new]
    assert touched, "the power threshold is on no dashboard"
    write_set(grafana.local_dir, changed)
    result = grafana.gpudash("sync")
    assert result.code == 0, result.text
    assert result.writes == len(touched)
    assert all(f"updated  {uid}" in result.out for uid in touched)
    if len(touched) < len(local):
        assert f"{len(local) - len(touched)} unchanged" in result.out

    set_threshold(thresholds, ("alerts", "xid", "window"), "11m")  # alert rules only, no dashboard
    write_set(grafana.local_dir, generate(repo_copy, thresholds, grafana))
    assert grafana.gpudash("sync").writes == 0
