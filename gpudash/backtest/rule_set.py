"""The alerting rules to replay, taken from what `gpudash rules` renders, with recording rules inlined.

Alert expressions read recorded series (`cluster_instance_gpu:gpu_fb_used:ratio`); over a history that was
backfilled, or recorded before a rule existed, those series are missing. Inlining puts the recording
expression in their place, written so that it reads exactly what the recorded series would have held at
evaluation timestamps aligned to the rule interval:

- `rec`               -> `(expr)`                                  its value now
- `rec[W]`            -> `(expr)[W:I]`                             a subquery at the rule interval I
- `rec offset X`      -> `last_over_time((expr)[1s:I] offset X)`   its value at exactly that evaluation
- `rec[W] offset X`   -> `(expr)[W:I] offset X`

Subquery steps are aligned to multiples of I, as the backtest's evaluation timestamps are, so each reads the
same samples a recorded series would (a recorded series holds nothing where its expression returned nothing).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from gpudash.config.durations import parse_duration
from gpudash.config.loading import Settings
from gpudash.errors import ConfigError
from gpudash.repository import ALERTMANAGER_FILE, ALERTS_FILE, RECORDING_FILE
from gpudash.rules.generated_files import render_all

_NAME_CHARS = "a-zA-Z0-9_:"
_DURATION = r"[0-9][0-9smhdwy]*"


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


def _reference(name: str) -> re.Pattern[str]:
    # The name as a whole identifier, then an optional range and an optional offset.
    return re.compile(rf"(?<![{_NAME_CHARS}])({re.escape(name)})(?![{_NAME_CHARS}{{(])"
                      rf"(\[(?P<range>{_DURATION})\])?(\s+offset\s+(?P<offset>-?{_DURATION}))?")


def inline(expr: str, recordings: Mapping[str, str], interval_s: int) -> str:
    """`expr` with every recorded series it reads replaced by the expression that records it."""
    step = f"{interval_s}s"
    for _ in range(8):  # a recording may read another; the registry is shallow
        before = expr
        for name, body in recordings.items():
            if re.search(rf"(?<![{_NAME_CHARS}]){re.escape(name)}\{{", expr):
                raise ConfigError(f"cannot inline recorded series {name}: a selector with matchers reads it")

            def replace(match: re.Match[str], body: str = body) -> str:
                window, offset = match.group("range"), match.group("offset")
                if window and offset:
                    return f"({body})[{window}:{step}] offset {offset}"
                if window:
                    return f"({body})[{window}:{step}]"
                if offset:
                    return f"last_over_time(({body})[1s:{step}] offset {offset})"
                return f"({body})"

            expr = _reference(name).sub(replace, expr)
        if expr == before:
            return expr
    raise ConfigError("recording rules read each other in a cycle; cannot inline them")


def reads_recorded(expr: str, recordings: Mapping[str, str]) -> list[str]:
    """The recorded series an expression reads."""
    return [name for name in recordings if _reference(name).search(expr)]
