"""The fleet's job tables open the job dashboard over the job's lifetime, not over the fleet's range.

Each table carries two hidden columns, the job's first and last rule evaluation in the range (epoch ms, widened
by a margin; "now" for a job that still runs), read from the recording cluster_job:gpu_held:timestamp over the
range: no subquery, whose step would miss a job shorter than it. tests/e2e/test_job_links_over_lifetime.py holds
the links against a real Prometheus and Grafana's own display code.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.paths import ROOT

from gpudash.config.loading import load_settings
from gpudash.panels.build import build_all
from gpudash.panels.job_panels import LIFETIME, LIFETIME_FROM, LIFETIME_TO, RUNNING, job_link
from gpudash.preview.displayed import displayed
from gpudash.preview.series import PanelData, to_series
from gpudash.promql.for_settings import recording_rules

TABLES = ("GPU-hours held per job (top 10)", "Largest idle holders (top 10 GPU-hours idle)")
AT = 1_000_000.0


@pytest.fixture(scope="module")
def fleet() -> dict[str, Any]:
    return build_all(load_settings(ROOT / "thresholds.yaml"), ROOT / "dashboards")["gpudash-fleet.json"]


def _panel(fleet: dict[str, Any], title: str) -> dict[str, Any]:
    (panel,) = [p for p in fleet["panels"] if p.get("title") == title]
    return panel


def _lifetime_targets(panel: dict[str, Any]) -> tuple[str, str]:
    organize = panel["transformations"][-2 if panel["transformations"][-1]["id"] == "sortBy" else -1]
    renamed = organize["options"]["renameByName"]
    by_column = {renamed[f"Value #{t['refId']}"]: t["expr"] for t in panel["targets"]
                 if f"Value #{t['refId']}" in renamed}
    return by_column[LIFETIME_FROM], by_column[LIFETIME_TO]


def test_the_link_opens_the_job_from_its_first_to_its_last_sample() -> None:
    url = job_link("hpc_job")["url"]
    assert "${__url_time_range}" not in url
    assert url.endswith(f"&from=${{__data.fields.{LIFETIME_FROM}:percentencode}}"
                        f"&to=${{__data.fields.{LIFETIME_TO}:percentencode}}")


@pytest.mark.parametrize("title", TABLES)
def test_each_job_table_reads_the_lifetime_over_the_range_without_a_subquery(fleet: dict[str, Any],
                                                                             title: str) -> None:
    first, last = _lifetime_targets(_panel(fleet, title))
    selector = f'{LIFETIME}{{cluster=~"$cluster"}}'
    assert first.startswith(f"min_over_time({selector}[$__range]) * 1000 - 60000\n")
    assert f"(max_over_time({selector}[$__range]) * 1000 + 60000)" in last
    # Still recorded at the range's end (an ended job's series is stale): running, its end is RUNNING ("now").
    assert f"unless on (cluster, hpc_job) {selector}\n" in last and f"{selector} * {RUNNING}\n)" in last
    assert "[$__range:" not in first + last
    # Only the jobs the table lists, so the answer stays as small as the table whatever the fleet's jobs.
    which = "held" if title == TABLES[0] else "idle"
    for expr in (first, last):
        assert expr.split("\nand on (cluster, hpc_job)\n")[1].startswith(
            f"topk(10, sum_over_time(cluster_job:gpu_{which}_seconds:interval")


@pytest.mark.parametrize("title", TABLES)
def test_the_lifetime_columns_are_hidden_and_keep_only_the_tables_jobs(fleet: dict[str, Any], title: str) -> None:
    panel = _panel(fleet, title)
    link = panel["fieldConfig"]["overrides"][0]["properties"][0]["value"][0]
    assert link == job_link("hpc_job")
    hidden = {o["matcher"]["options"]: o["properties"] for o in panel["fieldConfig"]["overrides"]
              if any(p["id"] == "custom.hideFrom" and p["value"]["viz"] for p in o["properties"])}
    assert set(hidden) == {LIFETIME_FROM, LIFETIME_TO}
    (mappings,) = [p["value"] for p in hidden[LIFETIME_TO] if p["id"] == "mappings"]
    assert mappings[0]["options"][str(RUNNING)]["text"] == "now"
    value = "Value #A" if title == TABLES[0] else "Value #B"
    (keep,) = [t["options"] for t in panel["transformations"] if t["id"] == "filterByValue"]
    assert keep["filters"][0] == {"fieldName": value, "config": {"id": "isNotNull", "options": {}}}
    # The filter runs after the merge, before the columns are renamed.
    ids = [t["id"] for t in panel["transformations"]]
    assert ids.index("merge") < ids.index("filterByValue") < ids.index("organize", ids.index("merge"))


def test_the_preview_shows_neither_lifetime_column_nor_a_job_the_table_does_not_list(fleet: dict[str, Any]) -> None:
    panel = _panel(fleet, TABLES[0])
    answers = {"A": [({"cluster": "c", "hpc_job": "7"}, "12")],
               "Y": [({"cluster": "c", "hpc_job": "7"}, "900000000"), ({"cluster": "c", "hpc_job": "8"}, "1")],
               "Z": [({"cluster": "c", "hpc_job": "7"}, "0"), ({"cluster": "c", "hpc_job": "8"}, "2")]}
    frames = tuple((t["refId"], to_series([{"metric": labels, "value": [AT, v]} for labels, v in
                                           answers[t["refId"]]], None, t["refId"])) for t in panel["targets"])
    header, rows = displayed(panel, PanelData(tuple(s for _, f in frames for s in f), (), frames), AT)
    assert header == ["cluster", "hpc_job", "GPU-hours held"]
    assert rows == [["c", "7", "12"]]


def test_the_recording_is_its_own_evaluation_time_per_job() -> None:
    settings = load_settings(ROOT / "thresholds.yaml")
    (expr,) = [expr for rec, expr in recording_rules(settings) if rec.record == LIFETIME]
    # the evaluation's time of each job's GPU count, recorded just before it in the same evaluation
    assert expr == "timestamp(cluster_job:gpu_count:count)"
    (count,) = [expr for rec, expr in recording_rules(settings) if rec.record == "cluster_job:gpu_count:count"]
    assert count.startswith("count by (cluster, hpc_job) (")
