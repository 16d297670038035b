"""The fleet's job tables open the job dashboard over each job's lifetime, against a real Prometheus.

One node's /metrics (dcgm-exporter's names, `hpc_job` labels) is scraped, and the recording rules evaluated,
every second: job "long" holds two busy GPUs throughout; job "short" holds an idle one for about a second,
then the GPU goes back to no job while "long" runs on. The fleet's two job tables are asked as Grafana asks
them, and their rows run through Grafana's own display code (tests/schema/display.cjs), data links included:
each job's link opens the job dashboard from its first recorded evaluation to its last (the first and last
evaluation that saw its samples), widened by the margin, and the job still running ends at "now". Skips
when Node.js or tests/schema/node_modules is missing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from support.e2e import StaticMetrics, gpudash_rules, site_yaml
from support.grafana_display import disagreement, grafana_frames, grafana_links, grafana_rows, missing
from support.paths import ROOT
from support.slack import budget

from gpudash.catalog import DCGM
from gpudash.check.prometheus_api import PrometheusClient
from gpudash.config.loading import load_settings
from gpudash.panels.build import build_all
from gpudash.panels.job_panels import LIFETIME, lifetime_margin_s
from gpudash.preview.displayed import displayed
from gpudash.preview.fetch import fetch_panel, label_values
from gpudash.preview.panel_queries import builtins, choose_variables, panel_queries, window
from gpudash.promql.for_settings import promql_for
from gpudash.stack.process import PrometheusProcess
from gpudash.stack.servers import prometheus_config, rule_files, scrape_jobs

RANGE_S = 600
HELD, IDLE = "GPU-hours held per job (top 10)", "Largest idle holders (top 10 GPU-hours idle)"
UTIL = DCGM.ref("gpu_util").name


def exposition(jobs: dict[int, tuple[str, float]]) -> bytes:
    """Four GPUs' utilization, each labelled with its job ("" for none)."""
    lines = [f'{UTIL}{{gpu="{gpu}",UUID="GPU-{gpu}",Hostname="node-a",hpc_job="{job}"}} {util:g}'
             for gpu, (job, util) in jobs.items()]
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PrometheusProcess, Path]]:
    why = missing()
    if why:
        pytest.skip(why)
    tmp = tmp_path_factory.mktemp("job-lifetime-links")
    before = {0: ("long", 90.0), 1: ("long", 90.0), 2: ("short", 0.0), 3: ("", 0.0)}
    with StaticMetrics(exposition(before)) as node:
        site = site_yaml(tmp / "site.yml", "e2e", [node.address])
        files = gpudash_rules(tmp / "generated", site)
        rules = rule_files(files)
        with PrometheusProcess(prometheus_config(scrape_jobs(files), rule_files=list(rules), interval="1s"),
                               rules) as prometheus:
            prometheus.wait_for(f'{LIFETIME}{{hpc_job="short"}}', timeout=budget(30))
            node.body = exposition({**before, 2: ("", 0.0)})  # the short job ends
            # Ended before the range's end: its recorded series is stale, the long job's goes on.
            prometheus.wait_for(f'absent({LIFETIME}{{hpc_job="short"}}) '
                                f'and on () count_over_time({LIFETIME}{{hpc_job="long"}}[10m]) > 8',
                                timeout=budget(30))
            yield prometheus, site


def _samples(prometheus: PrometheusProcess, selector: str) -> list[float]:
    """The times of a series' stored samples over the last RANGE_S."""
    (series,) = prometheus.query(f"{selector}[{RANGE_S}s]")
    return [float(t) for t, _ in series["values"]]


def _links(stack: tuple[PrometheusProcess, Path], title: str) -> dict[str, dict[str, str]]:
    """Each row's job and the query of its data link, as Grafana fills it in; the preview must show the rows."""
    prometheus, site = stack
    fleet = build_all(load_settings(ROOT / "thresholds.yaml", site), ROOT / "dashboards")["gpudash-fleet.json"]
    client = PrometheusClient(prometheus.url)
    span = window(client.now(), RANGE_S, 1)
    filled = builtins(RANGE_S, 1)
    values = {**choose_variables(fleet, label_values(client, span), {}, filled), **filled}
    panel: dict[str, Any] = next(p for p in fleet["panels"] if p.get("title") == title)
    queries = panel_queries(panel, values)
    data = fetch_panel(client, queries, span)
    assert not data.errors, data.errors
    frames = grafana_frames(queries, data)
    differs = disagreement(title, displayed(panel, data, span.end), grafana_rows(panel, frames, span.end))
    assert not differs, differs
    header, _ = grafana_rows(panel, frames, span.end)
    found = {}
    for row, (url,) in grafana_links(panel, frames, span.end):
        parts = urlsplit(url)
        assert parts.path == "/d/gpudash-job"
        found[row[header.index("hpc_job")]] = {k: v for k, (v,) in parse_qs(parts.query).items()}
    return found


def test_each_job_opens_over_its_lifetime_and_the_running_one_until_now(stack: tuple[PrometheusProcess, Path]
                                                                        ) -> None:
    prometheus, site = stack
    margin_ms = lifetime_margin_s(promql_for(load_settings(ROOT / "thresholds.yaml", site))) * 1000
    links = _links(stack, HELD)
    assert set(links) == {"long", "short"}
    assert all(link["var-cluster"] == "e2e" and link["var-job"] == job for job, link in links.items())
    evaluations = {job: _samples(prometheus, f'{LIFETIME}{{hpc_job="{job}"}}') for job in links}
    # The short job was recorded at one to a few evaluations, and its link spans exactly those.
    short = evaluations["short"]
    assert 1 <= len(short) <= 10, short
    assert int(links["short"]["from"]) == round(short[0] * 1000 - margin_ms)
    assert int(links["short"]["to"]) == round(short[-1] * 1000 + margin_ms)
    # Those evaluations are the first and last that saw its raw samples (a scrape and an evaluation or so late,
    # 1 s each: the series goes stale at the first scrape without it).
    raw = _samples(prometheus, f'{UTIL}{{hpc_job="short"}}')
    assert raw[0] <= short[0] <= raw[0] + 3 and raw[-1] <= short[-1] <= raw[-1] + 4, (raw, short)
    # The long job still runs: from its first evaluation to now.
    assert int(links["long"]["from"]) == round(evaluations["long"][0] * 1000 - margin_ms)
    assert links["long"]["to"] == "now"


def test_the_idle_table_links_its_jobs_over_their_lifetime_too(stack: tuple[PrometheusProcess, Path]) -> None:
    prometheus, _ = stack
    links = _links(stack, IDLE)
    assert set(links) == {"short"}  # the long job's GPUs are busy: no row, though its lifetime is asked
    short = _samples(prometheus, f'{LIFETIME}{{hpc_job="short"}}')
    assert links["short"]["to"] != "now" and int(links["short"]["to"]) > short[-1] * 1000
