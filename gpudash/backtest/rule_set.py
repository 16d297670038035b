"""The alerting rules to replay, taken from what `gpudash rules` renders, with recording rules inlined.

Alert expressions read recorded series (`cluster_instance_gpu:gpu_fb_used:ratio`); over a history that was
backfilled, or recorded before a rule existed, those series are missing. Inlining (gpudash.promql.inline) puts the
recording expression in their place, written so that it reads exactly what the recorded series would have held at
evaluation timestamps aligned to the rule interval, as the backtest's are.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from gpudash.config.durations import parse_duration
from gpudash.config.loading import Settings
from gpudash.errors import ConfigError
from gpudash.promql.inline import inline
from gpudash.repository import ALERTMANAGER_FILE, ALERTS_FILE, RECORDING_FILE
from gpudash.rules.generated_files import render_all


@dataclass(frozen=True)
class AlertSpec:
    """One alerting rule as rendered: what it evaluates, how long it must hold, the labels it adds."""

    alert: str
    expr: str
    for_s: int = 0
    keep_firing_for_s: int = 0
    labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def severity(self) -> str:
        return self.labels.get("severity", "")


@dataclass(frozen=True)
class RuleSet:
    """The rendered alerting rules, recording rules (name -> expression) and alertmanager.yml."""

    alerts: tuple[AlertSpec, ...]
    recordings: Mapping[str, str]
    alertmanager: Mapping[str, Any]
    interval_s: int

    def inlined(self, alert: AlertSpec) -> AlertSpec:
        return AlertSpec(alert.alert, inline(alert.expr, self.recordings, self.interval_s), alert.for_s,
                         alert.keep_firing_for_s, alert.labels)


def _seconds(rule: Mapping[str, Any], key: str) -> int:
    text = rule.get(key)
    if text is None:
        return 0
    try:
        return parse_duration(str(text)).seconds
    except ValueError as exc:
        raise ConfigError(f"alert rule {rule.get('alert')}: {key}: {exc}") from None


def rule_set(settings: Settings) -> RuleSet:
    """Render the rules from the settings, as `gpudash rules` would, and read them back."""
    files = render_all(settings)
    alerts = []
    for group in yaml.safe_load(files[ALERTS_FILE])["groups"]:
        for rule in group["rules"]:
            labels = {str(k): str(v) for k, v in (rule.get("labels") or {}).items()}
            alerts.append(AlertSpec(str(rule["alert"]), str(rule["expr"]), _seconds(rule, "for"),
                                    _seconds(rule, "keep_firing_for"), labels))
    recordings = {str(r["record"]): str(r["expr"])
                  for group in yaml.safe_load(files[RECORDING_FILE])["groups"] for r in group["rules"]}
    return RuleSet(tuple(alerts), recordings, yaml.safe_load(files[ALERTMANAGER_FILE]),
                   settings.site.scrape_interval.seconds)
