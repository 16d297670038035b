"""The alerting rule file: every alert of gpudash.rules.alert_table, rendered for a site."""

from __future__ import annotations

from typing import Any

from gpudash.config.loading import Settings
from gpudash.rules.alert_rule import AlertRule
from gpudash.rules.alert_spec import render
from gpudash.rules.alert_table import ALERTS

GROUP_NAME = "gpudash-gpu-alerts"


def alert_rules(settings: Settings) -> list[AlertRule]:
    """Every alerting rule the site's metric profile can evaluate, in a stable order."""
    return render(ALERTS, settings)


def alert_groups(settings: Settings) -> dict[str, Any]:
    """The alerting rule file, as a mapping ready to dump."""
    base = settings.site.runbook_base_url
    return {"groups": [{"name": GROUP_NAME, "rules": [r.as_dict(base) for r in alert_rules(settings)]}]}
