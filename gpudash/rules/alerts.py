"""The alerting rule files: every GPU alert of gpudash.rules.alert_table, and its alerts about the alerting
(the Watchdog, GPUNodeDrained) in a file of their own, rendered for a site."""

from __future__ import annotations

from typing import Any

from gpudash.config.loading import Settings
from gpudash.rules.alert_rule import AlertRule
from gpudash.rules.alert_spec import render
from gpudash.rules.alert_table import ALERTING_ALERTS, ALERTS

GROUP_NAME = "gpudash-gpu-alerts"
ALERTING_GROUP_NAME = "gpudash-alerting"


def alert_rules(settings: Settings) -> list[AlertRule]:
    """Every alerting rule the site's metric profile can evaluate, in a stable order."""
    return render(ALERTS, settings)


def alert_groups(settings: Settings) -> dict[str, Any]:
    """The alerting rule file, as a mapping ready to dump."""
    base = settings.site.runbook_base_url
    return {"groups": [{"name": GROUP_NAME, "rules": [r.as_dict(base) for r in alert_rules(settings)]}]}


def alerting_groups(settings: Settings) -> dict[str, Any]:
    """The rule file of the alerts about the alerting (Watchdog, GPUNodeDrained), as a mapping ready to dump."""
    base = settings.site.runbook_base_url
    rules = [r.as_dict(base) for r in render(ALERTING_ALERTS, settings)]
    return {"groups": [{"name": ALERTING_GROUP_NAME, "rules": rules}]}
