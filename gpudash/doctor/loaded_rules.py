"""Link 4, rules: the generated groups loaded (/api/v1/rules), the same as `gpudash rules` renders now
(expressions, `for:`, labels), evaluated without errors and faster than their interval; alerts pending,
and how long until their `for:` has elapsed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from gpudash.config.durations import duration_text
from gpudash.doctor.expect import Expectations, ExpectedRule
from gpudash.doctor.findings import Finding, Link, count, fail, hint, listed, ok
from gpudash.doctor.observed import PrometheusView
from gpudash.doctor.scrape_targets import reload_hint
from gpudash.promql.query import HEALTH_STATES, JOB_STATES
from gpudash.redaction import snippet
from gpudash.rules.recording import GROUP_NAME, GROUP_NAMES, LEDGER_GROUP_NAME

_STAMP = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)")
PENDING_SHOWN = 5  # pending alerts listed one per line; the rest are counted
# Why a group's interval matters, where the generated file sets one.
_BUILT_FOR = {LEDGER_GROUP_NAME: "each of its recordings is the hour before its evaluation: at another interval "
                                 "the health ledger counts hours twice or misses them",
              GROUP_NAME: "its GPU-seconds recordings are built for that interval",
              GROUP_NAMES[JOB_STATES]: "the hang alerts count its recordings' points over their windows at that "
                                       "interval",
              GROUP_NAMES[HEALTH_STATES]: "its XID-event and reset recordings are built for that interval"}
_BUILT_FOR_DEFAULT = "the alerts and dashboards read its recordings at that interval"


def loaded_expressions(expect: Expectations) -> Callable[[Sequence[Mapping[str, Any]]], list[str]]:
    """What to have Prometheus format: every generated expression and every loaded one of the same groups."""
    names = {rule.group for rule in expect.rules}

    def exprs(groups: Sequence[Mapping[str, Any]]) -> list[str]:
        loaded = [str(r.get("query", "")) for g in groups if g.get("name") in names for r in g.get("rules") or []]
        return [rule.expr for rule in expect.rules] + loaded

    return exprs


def _same_expr(view: PrometheusView, local: str, loaded: str) -> bool:
    if local in view.formatted and loaded in view.formatted:
        return view.formatted[local] == view.formatted[loaded]
    return " ".join(local.split()) == " ".join(loaded.split())


def _loaded(rule: Mapping[str, Any], group: str) -> ExpectedRule:
    kind = "alert" if rule.get("type") == "alerting" else "record"
    labels = tuple(sorted((str(k), str(v)) for k, v in (rule.get("labels") or {}).items()))
    return ExpectedRule(group, kind, str(rule.get("name")), str(rule.get("query", "")),
                        int(float(rule.get("duration") or 0)), labels)


def _differences(view: PrometheusView, wanted: list[ExpectedRule], loaded: list[ExpectedRule]) -> list[str]:
    """One phrase per rule that is missing, extra or changed."""
    notes: list[str] = []
    spare = list(loaded)
    changed_by_name: dict[str, list[ExpectedRule]] = {}
    for rule in wanted:
        match = next((r for r in spare if r.key == rule.key), None)
        if match is None:
            changed_by_name.setdefault(rule.name, []).append(rule)
            continue
        spare.remove(match)
        parts = []
        if not _same_expr(view, rule.expr, match.expr):
            parts.append(f"expr `{snippet(match.expr, 160)}` loaded, `{snippet(rule.expr, 160)}` generated")
        if rule.for_s != match.for_s:
            parts.append(f"for {duration_text(match.for_s)} loaded, {duration_text(rule.for_s)} generated")
        if parts:
            notes.append(f"{rule.shown}: {'; '.join(parts)}")
    for name, missing in changed_by_name.items():
        others = [r for r in spare if r.name == name]
        if others:  # same rule, other labels: say which labels moved
            notes.append(f"{name}: labels {listed([_labels(r) for r in others], 2)} loaded, "
                         f"{listed([_labels(r) for r in missing], 2)} generated")
            spare = [r for r in spare if r.name != name]
        else:
            notes.append(f"{listed([r.shown for r in missing], 2)} not loaded")
    notes += [f"{r.shown} loaded, not generated" for r in spare]
    return notes


def _labels(rule: ExpectedRule) -> str:
    return "{" + ", ".join(f"{k}={v}" for k, v in rule.labels) + "}"


def rule_findings(view: PrometheusView, expect: Expectations) -> list[Finding]:
    if view.error:
        return []
    wanted_groups = list(dict.fromkeys(rule.group for rule in expect.rules))
    loaded = {str(g.get("name")): g for g in view.rule_groups}
    present = [name for name in wanted_groups if name in loaded]
    files = ", ".join(expect.rule_files)
    if not present:
        other = f"; it has {count(len(loaded), 'other group')}" if loaded else "; it has no rules at all"
        return [fail(Link.RULES, "rule groups", f"none of gpudash's rule groups is loaded ({listed(wanted_groups)})"
                                                f"{other}",
                     why="prometheus.yml has no rule_files naming the generated files, or they are not on its host",
                     fix=f"copy generated/prometheus/{{{files}}} beside prometheus.yml, add rule_files: [{files}], "
                         f"then {reload_hint(view)}")]
    findings: list[Finding] = []
    for name in wanted_groups:
        group = loaded.get(name)
        if group is None:
            findings.append(fail(Link.RULES, name, "not loaded",
                                 fix=f"add its file to rule_files ({files}), then {reload_hint(view)}"))
            continue
        findings += _group(view, expect, name, group)
    findings += _alerts(view, loaded, wanted_groups)
    return findings


def _group(view: PrometheusView, expect: Expectations, name: str, group: Mapping[str, Any]) -> list[Finding]:
    rules = [r for r in group.get("rules") or [] if isinstance(r, dict)]
    wanted = [r for r in expect.rules if r.group == name]
    notes = _differences(view, wanted, [_loaded(r, name) for r in rules])
    findings: list[Finding] = []
    if notes:
        findings.append(fail(Link.RULES, name, f"differs from `gpudash rules` in {count(len(notes), 'rule')}: "
                                               f"{listed(notes, 2)}",
                             why="Prometheus holds rule files rendered from another thresholds.yaml (an older one), "
                                 "or edited by hand",
                             fix=f"`gpudash rules`, copy generated/prometheus/*.rules.yml to Prometheus, then "
                                 f"{reload_hint(view)}"))
    broken = [r for r in rules if r.get("health") not in (None, "ok", "unknown")]
    for rule in broken:
        findings.append(fail(Link.RULES, f"{name} / {rule.get('name')}",
                             f"evaluation fails: {snippet(str(rule.get('lastError') or rule.get('health')), 160)}",
                             why="an expression Prometheus cannot evaluate (many-to-many matching, a bad series)",
                             fix="`gpudash check` runs every rule and names the failing query"))
    interval = float(group.get("interval") or 0)
    wanted_s = expect.group_intervals.get(name)
    if wanted_s and interval and interval != wanted_s:
        findings.append(fail(Link.RULES, name, f"evaluated every {interval:g} s, not every {wanted_s} s as generated: "
                                               + _BUILT_FOR.get(name, _BUILT_FOR_DEFAULT),
                             why="the group's `interval` was edited or dropped where the rules were loaded",
                             fix=f"load generated/prometheus/{expect.rule_files[-1]} as generated, then "
                                 f"{reload_hint(view)}"))
    took = float(group.get("evaluationTime") or 0)
    if interval and took > interval:
        findings.append(fail(Link.RULES, name, f"evaluation takes {took:.1f} s, longer than its {interval:g} s "
                                               "interval: evaluations are skipped",
                             why="too many series for the rules, or an overloaded Prometheus",
                             fix="raise the evaluation interval or give Prometheus more CPU"))
    if not findings:
        # Prometheus's zero time: the group's first evaluation is still to come (an hourly one's up to an hour away)
        yet = not str(group.get("lastEvaluation", "")).startswith("0001")
        when = f"evaluated in {took * 1000:.0f} ms every {interval:g} s" if yet else (
            f"evaluated every {interval:g} s: not yet since Prometheus started")
        findings.append(ok(Link.RULES, name, f"{count(len(rules), 'rule')} loaded as generated, {when}"))
    return findings


def _since(text: str) -> float | None:
    """Unix time of an RFC 3339 stamp as Prometheus writes it (nanoseconds, `Z`); None when it is not one."""
    match = _STAMP.fullmatch(text)
    if not match:
        return None
    base, fraction, zone = match.groups()
    stamp = f"{base}.{(fraction or '0')[:6]}{'+00:00' if zone == 'Z' else zone}"
    return datetime.fromisoformat(stamp).timestamp()


def _alerts(view: PrometheusView, loaded: Mapping[str, Mapping[str, Any]], names: list[str]) -> list[Finding]:
    pending: list[tuple[float, str, Finding]] = []
    firing: list[str] = []
    for name in names:
        for rule in (loaded.get(name) or {}).get("rules") or []:
            for alert in rule.get("alerts") or []:
                labels = alert.get("labels") or {}
                if alert.get("state") == "firing":
                    firing.append(str(rule.get("name")))
                elif alert.get("state") == "pending":
                    pending.append(_pending(view, rule, alert, labels))
    findings = [f for _, _, f in sorted(pending, key=lambda item: (item[0], item[1]))[:PENDING_SHOWN]]
    if len(pending) > PENDING_SHOWN:
        findings.append(hint(Link.RULES, "pending", f"and {len(pending) - PENDING_SHOWN} more alerts pending"))
    if firing:
        counted = [f"{name} ({firing.count(name)})" for name in dict.fromkeys(firing)]
        findings.append(hint(Link.RULES, "firing", listed(counted),
                             why="the chain works up to here; the alerting link says whether anybody hears of them"))
    return findings


def _pending(view: PrometheusView, rule: Mapping[str, Any], alert: Mapping[str, Any],
             labels: Mapping[str, Any]) -> tuple[float, str, Finding]:
    where = ", ".join(f"{k}={labels[k]}" for k in ("cluster", "instance", "gpu") if k in labels)
    hold = float(rule.get("duration") or 0)
    since = _since(str(alert.get("activeAt") or ""))
    name = str(rule.get("name"))
    if since is None:
        return hold, name, hint(Link.RULES, name, f"pending ({where}); for: {duration_text(int(hold))}")
    held = max(0.0, view.now - since)
    left = max(0.0, hold - held)
    finding = hint(Link.RULES, name, f"pending for {duration_text(round(held))} ({where}): fires in "
                                     f"{duration_text(round(left))} if it holds (for: {duration_text(int(hold))})",
                   why="an alert fires only after its condition has held for its whole `for:`")
    return left, name, finding
