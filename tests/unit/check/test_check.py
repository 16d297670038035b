"""gpudash check without a server: what it extracts from dashboards and rule files, how it interpolates like
Grafana, how it reads PromQL to explain an empty answer, how it reports, and how it fails fast.

The checks against real servers are in tests/test_e2e_*.py.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import cast

import pytest
import yaml
from support.cli import gpudash
from support.paths import ROOT
from support.site_query import site_promql

from gpudash.check.judge import GroupResult, Result, Status
from gpudash.check.queries import (
    ALERT,
    PANEL,
    RECORDING,
    VARIABLE,
    CheckQuery,
    Group,
    Interpolation,
    dashboard_group,
    dashboard_groups,
    interpolate,
    load_dashboards,
    parse_range,
    rule_groups,
    unresolved,
)
from gpudash.check.tables import as_json, render_table, summary
from gpudash.errors import ConfigError
from gpudash.redaction import Secrets
from gpudash.stack.process import free_port


def _targets(dashboard: dict) -> list[dict]:
    found = []
    stack = list(dashboard["panels"])
    while stack:
        panel = stack.pop()
        found += [t for t in panel.get("targets") or [] if t.get("expr")]
        stack += panel.get("panels") or []
    return found


# ------------------------------------------------------------------------ interpolation


def test_variables_in_every_grafana_spelling() -> None:
    values = {"cluster": ".*", "gpu": "3", "__range": "21600s"}
    assert interpolate('x{cluster=~"$cluster",gpu=~"${gpu}"}', values) == 'x{cluster=~".*",gpu=~"3"}'
    assert interpolate('x{gpu=~"${gpu:regex}",c=~"[[cluster]]"}[$__range]', values) == 'x{gpu=~"3",c=~".*"}[21600s]'
    assert interpolate("x{a=~\"$nosuch\"}", values) == "x{a=~\"$nosuch\"}"
    assert unresolved('x{a=~"$nosuch"}') == ["$nosuch"]
    # label_replace's "$1" is a regex reference, not a variable
    assert unresolved('label_replace(x, "host", "$1", "instance", "(.+)")') == []


def test_builtins_follow_grafana() -> None:
    six_hours = Interpolation(6 * 3600, scrape_interval_s=15)
    assert six_hours.interval_s == 30  # 21600 s / ~1000 points = 21.6 s, rounded up to a step Grafana uses
    assert six_hours.rate_interval_s == 60  # max($__interval + scrape, 4 * scrape)
    assert six_hours.builtins()["__range"] == "21600s"
    short = Interpolation(1800, scrape_interval_s=1)
    assert (short.interval_s, short.rate_interval_s) == (2, 4)
    assert parse_range("now-6h") == 21600 and parse_range("30m") == 1800


def test_every_target_and_variable_of_the_committed_dashboards_is_checked() -> None:
    for path in sorted((ROOT / "dashboards" / "json").glob("*.json")):
        dashboard = json.loads(path.read_text())
        group = dashboard_group(dashboard, str(path))
        panels = [q for q in group.queries if q.kind == PANEL]
        variables = [q for q in group.queries if q.kind == VARIABLE]
        assert len(panels) == len(_targets(dashboard))
        assert [v.item for v in variables] == [f"${v['name']}" for v in dashboard["templating"]["list"]
                                               if v["type"] == "query"]
        for query in group.queries:
            assert unresolved(query.expr) == [], query
            assert ".*" in query.expr or (query.kind == VARIABLE and "$" not in query.expr)
        assert group.range_s == 6 * 3600  # the dashboard's own time range


def test_chosen_values_replace_all() -> None:
    dashboards = load_dashboards([ROOT / "dashboards" / "json" / "gpudash-node.json"])
    (group,) = dashboard_groups(dashboards, 15, {"cluster": "prod-a", "instance": "node1:9400"}, 3600)
    panel = next(q for q in group.queries if q.kind == PANEL)
    assert 'cluster=~"prod-a"' in panel.expr and 'instance=~"node1:9400"' in panel.expr and 'gpu=~".*"' in panel.expr
    assert group.range_s == 3600


def test_legacy_dashboard_12239(reference: Path) -> None:
    (dashboard, origin), = load_dashboards([reference / "dcgm-exporter" / "dashboard-12239.json"])
    group = dashboard_group(dashboard, origin)
    assert dashboard["schemaVersion"] == 22
    assert [q.item for q in group.queries if q.kind == VARIABLE] == ["$instance", "$gpu"]
    panels = [q for q in group.queries if q.kind == PANEL]
    assert len(panels) == len(_targets(dashboard)) == 8
    assert all('instance=~".*", gpu=~".*"' in q.expr for q in panels)
    assert [q.instant for q in panels if q.item == "GPU Power Total"] == [True]


def test_rule_files(tmp_path: Path) -> None:
    groups = rule_groups([ROOT / "generated" / "prometheus"])
    kinds = {g.title: {q.kind for q in g.queries} for g in groups}
    assert kinds == {"rules: gpu-alerts.rules.yml": {ALERT}, "rules: gpu-alerting.rules.yml": {ALERT},
                     "rules: gpu-recording.rules.yml": {RECORDING}}
    for name in ("gpu-alerts.rules.yml", "gpu-alerting.rules.yml"):
        alerts = yaml.safe_load((ROOT / "generated" / "prometheus" / name).read_text())
        (group,) = [g for g in groups if g.title == f"rules: {name}"]
        assert sum(len(g["rules"]) for g in alerts["groups"]) == len(group.queries)

    (tmp_path / "empty.rules.yml").write_text("groups: []\n")
    with pytest.raises(ConfigError, match="no rules found"):
        rule_groups([tmp_path / "empty.rules.yml"])
    (tmp_path / "none").mkdir()
    with pytest.raises(ConfigError, match="no rule files"):
        rule_groups([tmp_path / "none"])


@pytest.mark.parametrize("text", ["groups: " + "[" * 3000 + "]" * 3000 + "\n", "groups: " + "9" * 5001 + "\n"])
def test_a_rule_file_too_deep_or_with_a_huge_number_is_one_line(tmp_path: Path, text: str) -> None:
    path = tmp_path / "odd.rules.yml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=rf"^{path}: not a readable rule file: ") as info:
        rule_groups([path])
    assert "\n" not in info.value.format_message()


# ------------------------------------------------------------------------ reporting


def _results() -> list[GroupResult]:
    group = Group("GPU fleet", "dashboards/json/gpudash-fleet.json", (), 21600)
    rows = (
        Result(CheckQuery("GPU fleet", "GPUs reporting", PANEL, "sum(cluster:gpu_count:count)"), 1, Status.OK),
        Result(CheckQuery("GPU fleet", "Power: now and 1d ago", PANEL, "sum(p offset 1d)", False, "B"), 0,
               Status.NEEDS_HISTORY, "returns data without offset 1d"),
        Result(CheckQuery("GPU fleet", "Typo", PANEL, "DCGM_FI_DEV_GPU_UTILL"), 0, Status.EMPTY, "no series"),
    )
    return [GroupResult(Group(group.title, group.origin, tuple(r.query for r in rows), group.range_s), rows)]


def test_table_and_summary() -> None:
    results = _results()
    table = render_table(results[0]).splitlines()
    assert table[0] == "GPU fleet  (dashboards/json/gpudash-fleet.json: 3 queries, range 6h)"
    assert table[1].split() == ["PANEL", "EXPRESSION", "SERIES", "RESULT"]
    assert "Power: now and 1d ago [B]" in table[3] and "needs history: returns data without offset 1d" in table[3]
    assert table[4].endswith("NO DATA: no series")
    assert summary(results, "http://p:9090") == (
        "checked 3 queries against http://p:9090: 1 ok, 1 needs history; 1 failed")
    data = json.loads(as_json(results))
    assert [r["status"] for r in data[0]["results"]] == ["ok", "needs_history", "empty"]


# ------------------------------------------------------------------------ the command


def test_unreachable_prometheus_is_one_line_and_tried_once(monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_port()  # nothing listens there
    attempts: list[object] = []
    connect = socket.socket.connect

    def counted(self: socket.socket, address: object) -> None:
        if isinstance(address, tuple) and address[1:2] == (port,):
            attempts.append(address)
        connect(self, address)  # type: ignore[arg-type]

    monkeypatch.setattr(socket.socket, "connect", counted)
    done = gpudash("check", "--prometheus", f"http://127.0.0.1:{port}")
    assert done.code == 4
    assert done.out == ""
    assert done.err.splitlines() == [f"gpudash: cannot reach Prometheus at http://127.0.0.1:{port}: connection refused"]
    assert len(attempts) == 1  # one attempt, not prometheus-api-client's retries with backoff (~6 s)


def test_prometheus_url_from_the_environment() -> None:
    port = free_port()
    done = gpudash("check", env={"PROMETHEUS_URL": f"http://127.0.0.1:{port}"})
    assert done.code == 4 and f"127.0.0.1:{port}" in done.err


def test_usage_errors_are_one_line(tmp_path: Path) -> None:
    done = gpudash("check", "--var", "cluster")
    assert done.code == 2
    assert done.err.strip() == "gpudash: --var 'cluster': expected NAME=VALUE, e.g. --var cluster=prod-a"
    done = gpudash("check", "--dashboards", str(tmp_path))
    assert done.code == 2 and done.err.strip() == f"gpudash: {tmp_path}: no dashboard JSON files (*.json)"
    (tmp_path / "x.json").write_text("{not json")
    done = gpudash("check", "--dashboards", str(tmp_path / "x.json"))
    assert done.code == 2 and done.err.startswith(f"gpudash: {tmp_path / 'x.json'}: not a readable")
    done = gpudash("check", "--profile", "nvidia_smi", "--dashboards", str(tmp_path))
    assert done.code == 2 and "leave out --dashboards" in done.err
    done = gpudash("check", "--range", "soon")
    assert done.code == 2 and "--range 'soon'" in done.err


class _Answers:
    """A Prometheus stand-in for the empty-answer logic: `count(<selector>)` has data only for `present`."""

    def __init__(self, *present: str) -> None:
        self.present = present

    def instant(self, expr: str, at: float | None = None) -> list[dict[str, object]]:
        return [{"value": [0, "1"]}] if any(f"count({p})" == expr for p in self.present) else []


def test_a_missing_job_recording_is_no_job_yet_and_a_missing_gpu_recording_is_a_failure() -> None:
    from gpudash.check.judge import Checker
    from gpudash.check.prometheus_api import PrometheusClient, TimeRange

    prometheus = cast(PrometheusClient, _Answers("DCGM_FI_DEV_GPU_UTIL"))
    checker = Checker(prometheus, site_promql(), TimeRange(0, 60, 15))
    job = checker.run(CheckQuery("rules", "GPUJobStraggler", ALERT, "cluster_job:gpu_count:count >= 4"))
    assert job.status is Status.NO_JOBS and "no GPU series carries the job label" in job.detail
    fleet = checker.run(CheckQuery("rules", "Fleet", ALERT, "cluster:gpu_count:count > 0"))
    assert fleet.status is Status.EMPTY and "recording rules are not loaded" in fleet.detail


def test_no_active_alert_is_not_firing_and_a_missing_gpu_series_still_fails() -> None:
    from gpudash.check.judge import Checker
    from gpudash.check.prometheus_api import PrometheusClient, TimeRange

    checker = Checker(cast(PrometheusClient, _Answers("DCGM_FI_DEV_GPU_UTIL")), site_promql(), TimeRange(0, 60, 15))
    stat = checker.run(CheckQuery("GPU health", "RMA", PANEL, 'count(ALERTS{alertstate="firing",action="rma"})'))
    assert stat.status is Status.NOT_FIRING and "no such alert active now" in stat.detail
    since = checker.run(CheckQuery("GPU health", "since", PANEL, 'ALERTS_FOR_STATE{action!=""} * 1000'))
    assert since.status is Status.NOT_FIRING
    # Not firing only excuses the alert series: a GPU signal every exporter publishes is still a failure.
    both = checker.run(CheckQuery("GPU health", "x", PANEL, "ALERTS * on (gpu) group_left DCGM_FI_DEV_GPU_TEMP"))
    assert both.status is Status.EMPTY


def test_an_empty_answer_from_a_recorded_list_is_nothing_matching_and_from_a_join_a_failure() -> None:
    from gpudash.check.judge import Checker
    from gpudash.check.prometheus_api import PrometheusClient, TimeRange

    busy, tensor = "cluster_instance_gpu:gpu_utilization:busy_at_idle_power", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"
    checker = Checker(cast(PrometheusClient, _Answers(busy, tensor, "cluster:gpu_count:count")), site_promql(),
                      TimeRange(0, 60, 15))
    # the list holds only the GPUs that pass its test: what it leaves after `unless` is a filtered answer too
    listed = checker.run(CheckQuery("rules", "spinning", RECORDING,
                                    f"{busy}\nunless on (cluster, instance, gpu)\n{tensor}"))
    assert listed.status is Status.NOTHING_MATCHES, listed
    joined = checker.run(CheckQuery("rules", "x", PANEL, f"cluster:gpu_count:count * on (cluster) {tensor}"))
    assert joined.status is Status.EMPTY


def test_the_fabric_series_are_optional_on_a_node_without_an_rdma_port() -> None:
    from gpudash.check.judge import Checker
    from gpudash.check.prometheus_api import PrometheusClient, TimeRange

    # a GPU node with no InfiniBand or RoCE port: node_exporter publishes none of its infiniband series
    checker = Checker(cast(PrometheusClient, _Answers("DCGM_FI_DEV_GPU_UTIL")), site_promql(), TimeRange(0, 60, 15))
    sent = "rate(node_infiniband_port_data_transmitted_bytes_total[5m])"
    ports = checker.run(CheckQuery("rules", "x", RECORDING, sent))
    down = checker.run(CheckQuery("rules", "GPUFabricPortDown", ALERT, "node_infiniband_state_id == 1"))
    for found in (ports, down):
        assert found.status is Status.OPTIONAL and "no InfiniBand or RoCE port publishes it here" in found.detail
    # any other series that is not a GPU signal is still missing data
    other = checker.run(CheckQuery("rules", "x", RECORDING, "rate(node_network_transmit_bytes_total[5m])"))
    assert other.status is Status.EMPTY


def test_no_job_metadata_is_optional_where_jobs_are_attributed() -> None:
    from gpudash.check.judge import Checker
    from gpudash.check.prometheus_api import PrometheusClient, TimeRange

    # Jobs are attributed (the GPU series carry hpc_job), but no exporter publishes who holds them.
    present = _Answers("DCGM_FI_DEV_GPU_UTIL", 'DCGM_FI_DEV_GPU_UTIL{hpc_job!=""}')
    checker = Checker(cast(PrometheusClient, present), site_promql(), TimeRange(0, 60, 15))
    holder = checker.run(CheckQuery("GPU job", "Who holds the job", PANEL,
                                    'group by (cluster, hpc_job, user) (gpudash_job_info{hpc_job=~"7"})'))
    assert holder.status is Status.OPTIONAL and "dcgm-exporter does not" in holder.detail
    # Beside a GPU signal every exporter publishes, that signal's absence is still the failure.
    joined = checker.run(CheckQuery("GPU job", "x", PANEL,
                                    "DCGM_FI_DEV_GPU_TEMP * on (hpc_job) group_left (user) gpudash_job_info"))
    assert joined.status is Status.EMPTY


def test_a_custom_variable_is_sent_as_its_current_value_unless_chosen() -> None:
    (dashboard, origin), = load_dashboards([ROOT / "dashboards" / "json" / "gpudash-health.json"])
    ledger = next(v for v in dashboard["templating"]["list"] if v["name"] == "ledger")
    assert ledger["query"] == "30d,90d"
    (group,) = dashboard_groups([(dashboard, origin)], 15)
    ledger_reads = ":hourly_"  # the ledger's recordings, read over $ledger
    windows = {q.expr for q in group.queries if ledger_reads in q.expr}
    assert windows and all("[30d]" in e and "$ledger" not in e and "30d,90d" not in e for e in windows)
    (chosen,) = dashboard_groups([(dashboard, origin)], 15, {"ledger": "90d"})
    assert all("[90d]" in q.expr for q in chosen.queries if ledger_reads in q.expr)
    without_current = {**dashboard, "templating": {"list": [{**ledger, "current": {}}]}}
    (first,) = dashboard_groups([(without_current, origin)], 15)
    assert all("[30d]" in q.expr for q in first.queries if ledger_reads in q.expr)


class _LabelEcho:
    """A Prometheus stand-in whose label values echo the password it was given."""

    secrets = Secrets.of("admin", "echoed-s3cret-value")

    def label_values(self, label: str, match: str | None = None, window: object = None) -> list[str]:
        return ["gpu-node-1", "Basic admin:echoed-s3cret-value"]


def test_label_values_the_server_echoes_a_secret_in_are_masked() -> None:
    from gpudash.check.judge import Checker
    from gpudash.check.prometheus_api import PrometheusClient, TimeRange

    checker = Checker(cast(PrometheusClient, _LabelEcho()), site_promql(), TimeRange(0, 60, 15))
    result = checker.run(CheckQuery("GPU fleet", "$instance", VARIABLE, "label_values(up, instance)"))
    assert result.status is Status.OK and result.detail == "instance: Basic admin:***, gpu-node-1"


def test_a_query_judged_after_the_deadline_is_after_deadline_and_none_is_asked() -> None:
    from gpudash.check.judge import Checker
    from gpudash.check.prometheus_api import PrometheusClient, TimeRange
    from gpudash.deadline import Deadline

    now, seen = [0.0], []
    asked = _Answers("DCGM_FI_DEV_GPU_UTIL")

    class Slow(_Answers):
        def instant(self, expr: str, at: float | None = None) -> list[dict[str, object]]:
            now[0] += 4  # each answer takes 4 s of the run's 10
            seen.append(expr)
            return asked.instant(expr, at)

    checker = Checker(cast(PrometheusClient, Slow()), site_promql(), TimeRange(0, 60, 15),
                      Deadline(10, clock=lambda: now[0]), judged=lambda result: seen.append(result.status.name))
    query = CheckQuery("T", "p", PANEL, "count(DCGM_FI_DEV_GPU_UTIL)", instant=True)
    assert [checker.run(query).status for _ in range(4)] == [Status.OK, Status.OK, Status.AFTER_DEADLINE,
                                                             Status.AFTER_DEADLINE]
    assert seen.count("count(DCGM_FI_DEV_GPU_UTIL)") == 3  # the third was cut short by the deadline; no fourth
