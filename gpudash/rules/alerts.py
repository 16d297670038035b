"""The alerting rule files: every GPU alert of gpudash.rules.alert_table, and its alerts about the alerting
(the Watchdog, GPUNodeDrained) in a file of their own, rendered for a site.

The GPU alerts come in two groups, which Prometheus evaluates side by side (each group's rules one after
another, so each group's evaluation, not their sum, must fit in the interval): the utilization, temperature,
memory and job alerts, and the GPU health and fabric alerts (`HEALTH_ALERTS`, `FABRIC_ALERTS`)."""

from __future__ import annotations

from typing import Any

from gpudash.config.loading import Settings
from gpudash.rules.alert_rule import AlertRule
from gpudash.rules.alert_spec import render
from gpudash.rules.alert_table import ALERTING_ALERTS, ALERTS
from gpudash.rules.fabric_alerts import FABRIC_ALERTS
from gpudash.rules.health_alerts import HEALTH_ALERTS

GROUP_NAME = "gpudash-gpu-alerts"
HEALTH_GROUP_NAME = "gpudash-gpu-health-alerts"
# The GPU alert groups, in the file's order.
GROUP_NAMES = (GROUP_NAME, HEALTH_GROUP_NAME)
ALERTING_GROUP_NAME = "gpudash-alerting"
_HEALTH = frozenset(spec.name for spec in (*HEALTH_ALERTS, *FABRIC_ALERTS))


def alert_rules(settings: Settings) -> list[AlertRule]:
    """Every alerting rule the site's metric profile can evaluate, in a stable order."""
    return render(ALERTS, settings)


def alert_groups(settings: Settings) -> dict[str, Any]:
    """The alerting rule file, as a mapping ready to dump."""
    base = settings.site.runbook_base_url
    rules = alert_rules(settings)
    groups = [{"name": GROUP_NAME, "rules": [r.as_dict(base) for r in rules if r.alert not in _HEALTH]},
              {"name": HEALTH_GROUP_NAME, "rules": [r.as_dict(base) for r in rules if r.alert in _HEALTH]}]
    return {"groups": [group for group in groups if group["rules"]]}


def alerting_groups(settings: Settings) -> dict[str, Any]:
    """The rule file of the alerts about the alerting (Watchdog, GPUNodeDrained), as a mapping ready to dump."""
    base = settings.site.runbook_base_url
    rules = [r.as_dict(base) for r in render(ALERTING_ALERTS, settings)]
    return {"groups": [{"name": ALERTING_GROUP_NAME, "rules": rules}]}
