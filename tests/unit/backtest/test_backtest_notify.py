"""The Alertmanager estimate: routes, grouping, inhibition and timing from the generated alertmanager.yml."""

from __future__ import annotations

from support.paths import ROOT

from gpudash.backtest.alert_state import alert_labels
from gpudash.backtest.engine import Incident
from gpudash.backtest.notify import estimate, parse_matcher, parse_route, routes_for
from gpudash.backtest.rule_set import rule_set
from gpudash.config.loading import load_settings

CONFIG = rule_set(load_settings(ROOT / "thresholds.yaml")).alertmanager


def incident(alert: str, severity: str, gpu: str, start: float, end: float, **extra: str) -> Incident:
    labels = alert_labels({"cluster": "c", "instance": "n:9400", "gpu": gpu, **extra}, {"severity": severity}, alert)
    return Incident(alert, severity, labels, start, end)


def test_matchers_and_routes() -> None:
    assert parse_matcher('alertname=~"GPU.+"').matches({"alertname": "GPUHot"})
    assert parse_matcher('gpu=""').matches({})
    root = parse_route(CONFIG["route"])
    (critical,) = routes_for(root, {"severity": "critical", "cluster": "c"})
    assert critical.receiver == "gpudash-critical" and critical.group_wait == 10
    (warning,) = routes_for(root, {"severity": "warning", "cluster": "c"})
    assert warning.group_by == ("cluster",) and warning.repeat_interval == 86400


def test_a_page_then_repeats_then_its_resolution() -> None:
    # critical: group_wait 10s, group_interval 1m, repeat 1h; firing for 2 h
    sent = estimate([incident("GPUHot", "critical", "0", 0, 7200 - 15)], CONFIG, 15, 10_000)
    assert [n.at for n in sent] == [10, 3610, 7210]
    assert sent[-1].resolved and not sent[-1].firing


def test_warnings_of_a_cluster_arrive_as_one_digest() -> None:
    found = [incident("GPUHot", "warning", str(g), 60 * g, 3000) for g in range(4)]
    sent = estimate(found, CONFIG, 15, 3000)
    assert len(sent) == 1 and len(sent[0].firing) == 4 and sent[0].receiver == "gpudash-warning-digest"


def test_critical_inhibits_the_warning_of_the_same_alert_on_the_same_gpu() -> None:
    warn = incident("GPUHot", "warning", "0", 0, 3000)
    crit = incident("GPUHot", "critical", "0", 0, 3000)
    sent = estimate([warn, crit], CONFIG, 15, 3000)
    assert {n.receiver for n in sent} == {"gpudash-critical"}
    other_gpu = incident("GPUHot", "warning", "1", 0, 3000)
    assert {n.receiver for n in estimate([other_gpu, crit], CONFIG, 15, 3000)} == {
        "gpudash-critical", "gpudash-warning-digest"}
