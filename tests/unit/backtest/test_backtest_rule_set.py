"""Reading back the rendered rules, the recording rules they read inlined."""

from __future__ import annotations

from support.paths import ROOT

from gpudash.backtest.rule_set import rule_set
from gpudash.config.loading import load_settings
from gpudash.promql.inline import reads_recorded
from gpudash.rules.alerts import alert_rules


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
