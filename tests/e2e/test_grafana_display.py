"""The preview's tables, gauges and bar gauges against Grafana's own display code, on real Prometheus answers.

A real Prometheus holds the last 20 minutes of a simulated 8-GPU node (written as TSDB blocks before it
starts, with the recording rules). For every table, gauge and bar gauge of the four dashboards, each panel's
queries are asked as the preview asks them; the answers are framed as Grafana's Prometheus data source frames
them and run through @grafana/data (tests/schema/display.cjs: the panel's transformations, field config,
display names and units). The rows, their order and their texts must be the preview's. Skips when Node.js
or tests/schema/node_modules (`make schema-deps`) is missing.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.e2e import gpudash_rules, site_yaml
from support.grafana_display import disagreement, grafana_frames, grafana_rows, missing
from support.paths import REFERENCE, ROOT
from support.slack import budget

from gpudash.check.prometheus_api import PrometheusClient, TimeRange
from gpudash.preview.displayed import displayed
from gpudash.preview.fetch import fetch_panel, label_values
from gpudash.preview.panel_queries import PanelQuery, builtins, choose_variables, panel_queries, window
from gpudash.preview.series import PanelData, to_series
from gpudash.repository import RECORDING_FILE
from gpudash.stack.history import SeededPrometheus, moments, simulated_openmetrics, yesterday_blocks
from gpudash.stack.process import PrometheusProcess
from gpudash.stack.servers import rule_files

GPUS, SEED, RANGE_S = 8, 11, 900
ADDRESS = "127.0.0.1:9400"
WORKLOADS = ("3=idle", "7=inference")
FAULTS = ("5=thermal:93", "2=xid:79", "6=straggler:30", "1=sbe-trickle", "4=leak")
JSON_DIR = ROOT / "dashboards" / "json"
SHOWN = ("table", "gauge", "bargauge")
RECORDED = REFERENCE / "grafana_display" / "memory-per-gpu.json"  # a real answer, in Prometheus's hash order


def _dashboard(uid: str) -> dict[str, Any]:
    data = json.loads((JSON_DIR / f"{uid}.json").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


PANELS = [(uid, panel["title"]) for uid in ("gpudash-fleet", "gpudash-node", "gpudash-job", "gpudash-health")
          for panel in _dashboard(uid)["panels"] if panel.get("type") in SHOWN]


@pytest.fixture(scope="module", autouse=True)
def grafana_data() -> None:
    why = missing()
    if why:
        pytest.skip(why)


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusProcess]:
    tmp = tmp_path_factory.mktemp("grafana-display")
    files = gpudash_rules(tmp / "generated", site_yaml(tmp / "site.yml", "e2e", [ADDRESS]))
    rules = rule_files(files)
    times = moments(time.time() - 600, 600, 540, 15.0)  # 20 minutes, ending a minute ago
    target = {"job": "gpu-exporter", "instance": ADDRESS, "cluster": "e2e", "rack": "rack-1"}
    history = simulated_openmetrics(GPUS, SEED, times, target, faults=FAULTS, workloads=WORKLOADS)
    with yesterday_blocks(history, rules[Path(RECORDING_FILE).name], times[0], times[-1]) as blocks, \
            SeededPrometheus("global: {}\n", blocks=blocks) as server:
        server.wait_for("cluster:gpu_count:count", timeout=budget(30))
        yield server


def _answer(client: PrometheusClient, span: TimeRange, uid: str, title: str
            ) -> tuple[dict[str, Any], list[Any], PanelData]:
    dashboard = _dashboard(uid)
    filled = builtins(RANGE_S, 15)
    values = {**choose_variables(dashboard, label_values(client, span), {}, filled), **filled}
    panel = next(p for p in dashboard["panels"] if p.get("title") == title)
    queries = panel_queries(panel, values)
    data = fetch_panel(client, queries, span)
    assert not data.errors, data.errors
    return panel, queries, data


@pytest.mark.parametrize(("uid", "title"), PANELS, ids=[f"{u[8:]}:{t[:40]}" for u, t in PANELS])
def test_the_preview_shows_what_grafana_shows(prometheus: PrometheusProcess, uid: str, title: str) -> None:
    client = PrometheusClient(prometheus.url)
    span = window(client.now(), RANGE_S, 15)
    panel, queries, data = _answer(client, span, uid, title)
    preview = displayed(panel, data, span.end)
    grafana = grafana_rows(panel, grafana_frames(queries, data), span.end)
    differs = disagreement(title, preview, grafana)
    assert not differs, differs


def test_labels_show_as_they_are_not_in_the_panel_unit(prometheus: PrometheusProcess) -> None:
    """A label that reads as a number (GPU 5, pid 4140) is not written in the panel's unit (5 °C, 4.04 GiB)."""
    client = PrometheusClient(prometheus.url)
    span = window(client.now(), RANGE_S, 15)
    for uid, title in (("gpudash-fleet", "Hottest GPUs (top 10)"), ("gpudash-health", "HBM headroom: the 10 "
                                                                                     "closest to their limit")):
        panel, queries, data = _answer(client, span, uid, title)
        _, rows = grafana_rows(panel, grafana_frames(queries, data), span.end)
        assert rows and all(re.fullmatch(r"\S+ GPU \d+", row[0]) for row in rows), rows
    panel, queries, data = _answer(client, span, "gpudash-node", "Memory per process")
    header, rows = grafana_rows(panel, grafana_frames(queries, data), span.end)
    assert rows and all(row[header.index(c)].isdigit() for row in rows for c in ("gpu", "pid")), rows


def _recorded() -> tuple[dict[str, Any], list[PanelQuery], PanelData, float]:
    recorded = json.loads(RECORDED.read_text(encoding="utf-8"))
    query = PanelQuery(recorded["query"]["ref"], recorded["query"]["expr"], recorded["query"]["legend"], True)
    series = to_series(recorded["result"], query.legend, query.ref)
    return recorded["panel"], [query], PanelData(series, (), ((query.ref, series),)), float(recorded["at"])


def test_a_recorded_answer_shows_in_index_order_in_grafana_and_the_preview() -> None:
    panel, queries, data, at = _recorded()
    grafana = grafana_rows(panel, grafana_frames(queries, data), at)
    titles = [title for title, _ in grafana[1]]
    assert [one.name for one in data.series] != sorted(titles), "the answer must come in hash order"
    assert titles == sorted(titles) and len(titles) == 8
    assert not disagreement(panel["title"], displayed(panel, data, at), grafana)


def test_a_preview_in_the_wrong_order_fails_the_comparison() -> None:
    panel, queries, data, at = _recorded()
    grafana = grafana_rows(panel, grafana_frames(queries, data), at)
    unsorted = {**panel, "transformations": [t for t in panel["transformations"] if t["id"] != "sortBy"]}
    wrong = displayed(unsorted, data, at)  # what a preview that ignores sortBy draws: the answer's order
    assert sorted(map(tuple, wrong[1])) == sorted(map(tuple, grafana[1]))  # the same rows ...
    differs = disagreement(panel["title"], wrong, grafana)
    assert differs.startswith(f"{panel['title']}: row 1 is "), differs  # ... in the wrong order
