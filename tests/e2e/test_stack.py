"""Real Prometheus and Alertmanager on loopback: ready when the block starts, gone when it ends."""

from __future__ import annotations

import pytest
from support.waiting import eventually

from gpudash.errors import RemoteError
from gpudash.stack.process import AlertmanagerProcess, PrometheusProcess

AM_CONFIG = "route:\n  receiver: blackhole\n  group_wait: 0s\nreceivers:\n  - name: blackhole\n"
RULES = "groups:\n  - name: always\n    rules:\n      - alert: AlwaysFiring\n        expr: vector(1)\n"


def test_an_alert_rule_reaches_alertmanager() -> None:
    with AlertmanagerProcess(AM_CONFIG) as am:
        config = (
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            f"alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: ['{am.address}']\n"
            "rule_files: ['rules/always.yml']\n"
        )
        with PrometheusProcess(config, {"rules/always.yml": RULES}) as prometheus:
            data_dir = prometheus.dir
            assert (data_dir / "rules" / "always.yml").read_text() == RULES
            assert prometheus.wait_for('ALERTS{alertname="AlwaysFiring"}')
            alerts = eventually(am.alerts, timeout=30, what="the alert at Alertmanager")
            assert [a["labels"]["alertname"] for a in alerts] == ["AlwaysFiring"]
        assert not data_dir.exists()


def test_a_bad_config_fails_with_the_servers_own_words() -> None:
    with pytest.raises(RemoteError, match=r"prometheus did not start: exited with 2: .*parsing YAML"), \
            PrometheusProcess("global: [not, a, mapping]\n"):
        pass
    with pytest.raises(RemoteError, match="root route must specify a default receiver"), \
            AlertmanagerProcess("route: {}\n"):
        pass


def test_a_bad_query_is_a_remote_error() -> None:
    with PrometheusProcess("global:\n  scrape_interval: 1s\n") as prometheus:
        assert prometheus.query("vector(2)")[0]["value"][1] == "2"
        with pytest.raises(RemoteError, match="query 'sum\\(' failed"):
            prometheus.query("sum(")
