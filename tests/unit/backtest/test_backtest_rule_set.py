"""Reading back the rendered rules and inlining the recording rules they read."""

from __future__ import annotations

import pytest
from support.paths import ROOT

from gpudash.backtest.rule_set import inline, reads_recorded, rule_set
from gpudash.config.loading import load_settings
from gpudash.errors import ConfigError
from gpudash.rules.alerts import alert_rules

REC = {"a:b:ratio": "x / (x + y)"}


@pytest.mark.parametrize(("expr", "inlined"), [
    ("a:b:ratio > 0.9", "(x / (x + y)) > 0.9"),
    ("min_over_time(a:b:ratio[5m])", "min_over_time((x / (x + y))[5m:15s])"),
    ("min_over_time(a:b:ratio[5m] offset 10m)", "min_over_time((x / (x + y))[5m:15s] offset 10m)"),
    ("max(a:b:ratio offset 20m) > 0.1", "max(last_over_time((x / (x + y))[1s:15s] offset 20m)) > 0.1"),
    ("a:b:ratio_other + a:b:ratio", "a:b:ratio_other + (x / (x + y))"),
])
def test_inline_reads_what_the_recorded_series_would_hold(expr: str, inlined: str) -> None:
    assert inline(expr, REC, 15) == inlined


def test_inline_refuses_a_recorded_selector_with_matchers() -> None:
    with pytest.raises(ConfigError, match="a:b:ratio"):
        inline('a:b:ratio{gpu="0"}', REC, 15)


def test_rule_set_holds_every_rendered_alert_with_its_for_and_labels() -> None:
    settings = load_settings(ROOT / "thresholds.yaml")
    rules = rule_set(settings)
    rendered = alert_rules(settings)
    assert [(a.alert, a.severity) for a in rules.alerts] == [(r.alert, r.severity) for r in rendered]
    assert [a.for_s for a in rules.alerts] == [r.for_.seconds if r.for_ else 0 for r in rendered]
    assert rules.interval_s == settings.site.scrape_interval.seconds
    assert "route" in rules.alertmanager
    readers = [a for a in rules.alerts if reads_recorded(a.expr, rules.recordings)]
    assert readers, "some alert reads a recorded series"
    for alert in readers:
        assert not reads_recorded(rules.inlined(alert).expr, rules.recordings)
