"""The alert table's invariants: one spec per name, each with its runbook section, and every threshold its
rules read (its `alerts:` section, `for:` knobs, levels, the paths its texts name) in the Thresholds model."""

from __future__ import annotations

import dataclasses
import re
from string import Formatter

import pytest
from support.paths import ROOT

from gpudash.config.loading import Settings
from gpudash.config.thresholds import Alerts
from gpudash.health.xid import ACTIONS
from gpudash.rules.alert_spec import AlertContext, AlertSpec, RuleSpec, RuleWords, render, target_labels, threshold
from gpudash.rules.alert_table import ALERTING_ALERTS, ALERTS, alert_names
from gpudash.rules.node_state import WATCHDOG

SECTIONS = {f.name: f for f in dataclasses.fields(Alerts)}


def knob_names(spec: AlertSpec, settings: Settings) -> set[str]:
    if not spec.knobs:
        return set()
    return {f.name for f in dataclasses.fields(getattr(settings.thresholds.alerts, spec.knobs))}


def rules_of(spec: AlertSpec, settings: Settings) -> list[RuleSpec]:
    """Its static rules and those it builds for the default thresholds."""
    ctx = AlertContext(settings, None, None)  # type: ignore[arg-type]  # expand reads only the thresholds
    return [*(spec.expand(ctx) if spec.expand else ()), *spec.rules]


def fields_in(template: str) -> list[str]:
    return [name for _, name, _, _ in Formatter().parse(template) if name is not None]


def test_each_alert_is_one_spec_of_a_unique_name() -> None:
    names = [spec.name for spec in ALERTS]
    assert len(names) == len(set(names)) == len(alert_names())
    assert tuple(names) == alert_names()
    assert all(re.fullmatch(r"GPU[A-Z][A-Za-z]+", name) for name in names)
    # the alerting's own: the Watchdog keeps the name every Prometheus heartbeat has (kube-prometheus')
    assert [spec.name for spec in ALERTING_ALERTS] == [WATCHDOG, "GPUNodeDrained"]


def test_each_specs_runbook_section_is_a_heading_of_docs_alerts() -> None:
    headings = {line[3:].strip().lower() for line in (ROOT / "docs" / "alerts.md").read_text().splitlines()
                if line.startswith("## ")}
    missing = [spec.name for spec in (*ALERTS, *ALERTING_ALERTS) if spec.runbook_section not in headings]
    assert not missing, f"no section in docs/alerts.md for {missing}"


def test_every_rule_has_a_severity_an_action_and_a_for_knob_of_its_section(settings: Settings) -> None:
    for spec in (*ALERTS, *ALERTING_ALERTS):
        # "": an alert with no knobs (the Watchdog, GPUNodeDrained: no window, fires at once)
        assert spec.knobs in (*SECTIONS, ""), f"{spec.name}: alerts.{spec.knobs} is not in thresholds.Alerts"
        rules = rules_of(spec, settings)
        assert rules, spec.name
        for rule in rules:
            assert rule.severity in ("critical", "warning", "info") and rule.action in ACTIONS, spec.name
            assert rule.for_ is None or rule.for_ in knob_names(spec, settings), f"{spec.name}: {rule.for_}"


def test_every_threshold_a_spec_reads_is_in_the_thresholds_model(settings: Settings) -> None:
    t = settings.thresholds
    for spec in (*ALERTS, *ALERTING_ALERTS):
        for path in spec.reads + tuple(r.level for r in rules_of(spec, settings) if r.level):
            threshold(t, path)  # AttributeError names the missing part
        covered = (f"alerts.{spec.knobs}", *spec.reads)
        for rule in rules_of(spec, settings):
            for name in fields_in(rule.summary) + fields_in(rule.description):
                root, _, rest = name.partition(".")
                assert root in RuleWords or rule.words, f"{spec.name}: {{{name}}} is no word of a rule"
                if root == "k":
                    assert rest in knob_names(spec, settings), f"{spec.name}: alerts.{spec.knobs}.{rest}"
                if root == "t":
                    threshold(t, rest)
                    assert any(rest == c or rest.startswith(c + ".") for c in covered), \
                        f"{spec.name}: reads {rest}, not in its reads {spec.reads}"


@pytest.mark.parametrize("spec", (*ALERTS, *ALERTING_ALERTS), ids=lambda s: s.name)
def test_each_spec_renders_only_rules_of_its_name(spec: AlertSpec, settings: Settings) -> None:
    rules = render((spec,), settings)
    assert rules and {r.alert for r in rules} == {spec.name}
    assert all("{" + word not in r.summary + r.description for r in rules for word in RuleWords)


def test_a_rule_that_drops_a_label_its_page_must_carry_is_refused(settings: Settings) -> None:
    card = target_labels(settings, ("card",))
    assert settings.site.job_label in target_labels(settings, ("job",))
    dropped = AlertSpec("GPUProbe", "xid", (RuleSpec(
        "warning", "reset_gpu", lambda c: "max by (cluster, instance) (up)", "s", "d", for_=None, carries=("card",)),))
    kept = dataclasses.replace(dropped.rules[0], expr=lambda c: f"max by (cluster, {', '.join(card)}) (up)")
    with pytest.raises(ValueError, match=f"GPUProbe: its expression keeps no {card[0]}"):
        render([dropped], settings)
    (rule,) = render([dataclasses.replace(dropped, rules=(kept,))], settings)
    assert rule.expr.startswith("max by (cluster")


def test_keep_firing_for_is_the_knob_the_rule_names(settings: Settings) -> None:
    spec = AlertSpec("GPUProbe", "nvlink", (RuleSpec(
        "warning", "none", lambda c: "up", "s", "d", keep_firing_for="window"),))
    (rule,) = render([spec], settings)
    assert rule.keep_firing_for == settings.thresholds.alerts.nvlink.window
    assert rule.as_dict("")["keep_firing_for"] == str(settings.thresholds.alerts.nvlink.window)
