"""An alert as data (`AlertSpec`, one `RuleSpec` per severity, sensor or source) and the one renderer that
turns a spec into `AlertRule`s for a site.

A rule's summary and description are `str.format` templates over the names `RuleWords` lists: `where` (the
GPU, as the alert's labels name it), `t` (the thresholds), `k` (the alert's own section of `alerts:` in
thresholds.yaml), `level` (the rule's level), `to_do` (what its action asks), `gpu` (the GPU label's name),
`job_id` (the job, as its label names it), `scrape_job` (the exporters' scrape job) and the rule's own
`words`. Go templates in them are written doubled, `{{{{ $value }}}}`, as they would be in an f-string.

A rule's `carries` names what its page must name, by role: `card` (the GPU's UUID and its node's host name,
as the profile labels them: what a reset or an RMA is done to) and `job` (the site's job label, with `pod`
and `namespace` on Kubernetes, and the site's job owner label: what a restart is done to, and whom
Alertmanager tells). `render` refuses a rule whose expression does not keep those labels in an
aggregation, so a page can never lose them silently.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import reduce
from typing import Any

from gpudash.config.loading import Settings
from gpudash.config.thresholds import Thresholds
from gpudash.escape import go_template_text
from gpudash.promql.for_settings import promql_for
from gpudash.rules.alert_rule import AlertRule, runbook_anchor
from gpudash.rules.expressions import AlertExpressions
from gpudash.rules.health_expressions import HealthExpressions

# What each action asks of the person the alert reaches, in a rule's description (`to_do`).
ACTION_TEXT = {
    "none": "nothing to do to the GPU",
    "restart_job": "restart the job (from its checkpoint); the GPU is fine",
    "reset_gpu": "drain the GPU of work, then reset it (nvidia-smi -r)",
    "reboot_node": "drain and reboot the node",
    "drain": "drain the node from the scheduler and have it checked",
    "rma": "take the GPU out of service and open an RMA",
}
_WHERE = "GPU {{ $labels.%s }} on {{ $labels.instance }} ({{ $labels.cluster }})"


@dataclass(frozen=True)
class AlertContext:
    """What a rule's expression and words are built from: the site's expression builders and thresholds."""

    settings: Settings
    x: AlertExpressions
    h: HealthExpressions
    rule_level: float | None = None  # the value at the rule's `level` path

    @property
    def t(self) -> Thresholds:
        return self.settings.thresholds

    @property
    def level(self) -> float:
        if self.rule_level is None:
            raise LookupError("the rule names no level")
        return self.rule_level


@dataclass(frozen=True)
class RuleSpec:
    """One Prometheus rule of an alert."""

    severity: str  # critical pages; warning and info arrive in the digest
    action: str  # one of gpudash.health.xid.ACTIONS
    expr: Callable[[AlertContext], str | None]  # None: the site's metric profile cannot evaluate it
    summary: str
    description: str
    for_: str | None = "for_"  # the knob of the alert's section that is its `for:`; None: fires at once
    level: str | None = None  # a dotted path in the thresholds (`memory.warning`), `level` in texts and expr
    labels: tuple[tuple[str, str], ...] = ()
    words: Callable[[AlertContext], Mapping[str, object]] | None = None  # names the texts use beyond RuleWords
    keep_firing_for: str | None = None  # the knob of the alert's section that is its `keep_firing_for:`
    carries: tuple[str, ...] = ()  # the roles its page names (CARRIES): their labels are kept by the expression


@dataclass(frozen=True)
class AlertSpec:
    """One alert: its name (and runbook section), the thresholds it reads, and its rules in order."""

    name: str
    knobs: str  # its section under `alerts:` in thresholds.yaml (a field of thresholds.Alerts); "": none
    rules: tuple[RuleSpec, ...] = ()
    reads: tuple[str, ...] = ()  # dotted paths in the thresholds its texts and expressions read besides `knobs`
    expand: Callable[[AlertContext], Iterable[RuleSpec]] | None = None  # rules built at render time, first

    @property
    def runbook_section(self) -> str:
        """Its section's anchor in docs/alerts.md, where its rules' runbook annotation points."""
        return runbook_anchor(self.name)


# What a page names, by role: the labels each role stands for are the profile's and the site's (`target_labels`).
CARRIES = ("card", "job")

RuleWords = ("where", "t", "k", "level", "to_do", "gpu", "job_id", "scrape_job")


def threshold(t: Thresholds, path: str) -> Any:
    """The value at a dotted path of the thresholds (`alerts.nvlink.window`, `memory.critical`)."""
    return reduce(getattr, path.split("."), t)


def target_labels(settings: Settings, roles: Iterable[str]) -> tuple[str, ...]:
    """The label names that stand for `roles` on this site: what a rule carrying them must keep."""
    profile = promql_for(settings).profile
    names: list[str] = []
    for role in roles:
        if role == "card":
            names += profile.card_labels
        elif role == "job":
            owner = settings.site.alerting.job_owners.label  # Alertmanager routes the page to the owner by it
            names += [settings.site.job_label, *KUBERNETES_JOB_LABELS, *((owner,) if owner else ())]
        else:
            raise ValueError(f"unknown role {role!r} (known: {', '.join(CARRIES)})")
    return tuple(dict.fromkeys(names))


# The labels of a job's pod where the exporter runs on Kubernetes (absent elsewhere: `by` keeps them empty).
KUBERNETES_JOB_LABELS = ("namespace", "pod")


def _check_carried(alert: str, expr: str, labels: Iterable[str]) -> None:
    """A label is carried when every aggregation that ends the expression keeps it: the outermost `by` lists."""
    groups = re.findall(r"\bby \(([^)]*)\)", expr)
    kept = {name.strip() for group in groups for name in group.split(",")}
    missing = [label for label in labels if label not in kept]
    if missing:
        raise ValueError(f"{alert}: its expression keeps no {', '.join(missing)} label its page must carry")


def render(specs: Iterable[AlertSpec], settings: Settings) -> list[AlertRule]:
    """Every rule of `specs` the site's metric profile can evaluate, in the table's order."""
    q = promql_for(settings)
    x = AlertExpressions(q, settings.site)
    base = AlertContext(settings, x, HealthExpressions(x))
    t = settings.thresholds
    common = {"where": _WHERE % q.gpu, "t": t, "gpu": q.gpu,
              "job_id": f"{{{{ $labels.{settings.site.job_label} }}}}",
              "scrape_job": go_template_text(settings.site.scrape_job)}
    rules: list[AlertRule] = []
    for spec in specs:
        knobs = getattr(t.alerts, spec.knobs) if spec.knobs else None
        for rule in (*(spec.expand(base) if spec.expand else ()), *spec.rules):
            level = threshold(t, rule.level) if rule.level else None
            ctx = AlertContext(settings, x, base.h, level)
            expr = rule.expr(ctx)
            if expr is None:
                continue
            _check_carried(spec.name, expr, target_labels(settings, rule.carries))
            words = {**common, "k": knobs, "level": level, "to_do": ACTION_TEXT[rule.action],
                     **(rule.words(ctx) if rule.words else {})}
            rules.append(AlertRule(spec.name, rule.severity, rule.action, expr, rule.summary.format(**words),
                                   rule.description.format(**words),
                                   getattr(knobs, rule.for_) if rule.for_ else None, dict(rule.labels),
                                   getattr(knobs, rule.keep_firing_for) if rule.keep_firing_for else None))
    return rules
