"""One alerting rule as data, and how it is written out: labels `severity` and `action`, and its runbook.

The runbook is the alert's section of docs/alerts.md (the lower-case alert name as the anchor). A site that
publishes the runbook sets `runbook_base_url` in gpudash.yaml and each rule gets `runbook_url` = base + "#" +
anchor; without one, rules carry `runbook: "docs/alerts.md#<anchor>"`, the section in this repository (a
path, not a URL: there is no address to guess for a site's copy).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpudash.config.durations import Duration
from gpudash.escape import go_template_text

RUNBOOK_DOC = "docs/alerts.md"


def runbook_anchor(alert: str) -> str:
    """The anchor of an alert's section in docs/alerts.md."""
    return alert.lower()


@dataclass(frozen=True)
class AlertRule:
    alert: str
    severity: str
    action: str  # what to do about it: one of gpudash.health.xid.ACTIONS
    expr: str
    summary: str
    description: str
    for_: Duration | None = None
    labels: dict[str, str] = field(default_factory=dict)
    keep_firing_for: Duration | None = None  # stays firing this long after its expression stops returning it

    def as_dict(self, runbook_base_url: str) -> dict[str, Any]:
        rule: dict[str, Any] = {"alert": self.alert, "expr": self.expr}
        if self.for_ is not None:
            rule["for"] = str(self.for_)
        if self.keep_firing_for is not None:
            rule["keep_firing_for"] = str(self.keep_firing_for)
        rule["labels"] = {"severity": self.severity, "action": self.action, **self.labels}
        anchor = runbook_anchor(self.alert)
        rule["annotations"] = {"summary": self.summary, "description": self.description}
        if runbook_base_url:
            rule["annotations"]["runbook_url"] = go_template_text(f"{runbook_base_url}#{anchor}")
        else:
            rule["annotations"]["runbook"] = f"{RUNBOOK_DOC}#{anchor}"
        return rule
