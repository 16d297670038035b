"""What the local side expects of the servers: signals, labels, rules and routes, from the settings, the
dashboard JSON and what `gpudash rules` renders. Built once, before anything is fetched.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from gpudash.catalog import Profile
from gpudash.config.durations import parse_duration
from gpudash.config.loading import Settings
from gpudash.promql.recordings import signals_in
from gpudash.promql.scanner import selectors, windows
from gpudash.repository import ALERTMANAGER_FILE, ALERTS_FILE, RECORDING_FILE
from gpudash.rules.generated_files import render_all

_MATCHER_LABEL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)\s*\"")
_VARIABLE = re.compile(r"\$\{?\w+")


@dataclass(frozen=True)
class ExpectedRule:
    group: str
    kind: str  # alert | record
    name: str
    expr: str
    for_s: int
    labels: tuple[tuple[str, str], ...]

    @property
    def key(self) -> tuple[str, str, tuple[tuple[str, str], ...]]:
        """What tells rules of one name apart (GPUHighTemperature exists per severity and sensor)."""
        return self.kind, self.name, self.labels

    @property
    def shown(self) -> str:
        extra = ", ".join(value for _, value in self.labels)
        return f"{self.name} ({extra})" if extra else self.name


@dataclass(frozen=True)
class Expectations:
    settings: Settings
    profile: Profile
    used_by: Mapping[str, tuple[str, ...]]  # signal key -> the panels and rules that read it
    selector_labels: Mapping[str, tuple[str, ...]]  # metric name -> labels dashboards and rules select on
    rules: tuple[ExpectedRule, ...]
    rule_files: tuple[str, ...]  # the generated rule files' names, for the fix line
    alertmanager: Mapping[str, Any]  # the generated alertmanager.yml
    shortest_window_s: int  # the shortest range window of a rule: it must hold two scrapes
    datasource_uids: tuple[str, ...]  # the data source uids the dashboards name (the site's first)
    dashboards: tuple[Mapping[str, Any], ...]
    # Rule groups whose file sets their evaluation interval (seconds): the recordings are built for it.
    group_intervals: Mapping[str, int] = field(default_factory=dict)

    @property
    def gpu_metric(self) -> str:
        """The series every GPU has: utilization, under this profile's name."""
        return self.profile.ref("gpu_util").name


def _rules(text: str) -> list[ExpectedRule]:
    data = yaml.safe_load(text) or {}
    found: list[ExpectedRule] = []
    for group in data.get("groups") or []:
        name = str(group.get("name"))
        for rule in group.get("rules") or []:
            kind = "alert" if "alert" in rule else "record"
            for_s = parse_duration(str(rule["for"])).seconds if rule.get("for") else 0
            labels = tuple(sorted((str(k), str(v)) for k, v in (rule.get("labels") or {}).items()))
            found.append(ExpectedRule(name, kind, str(rule[kind]), str(rule["expr"]), for_s, labels))
    return found


def _queries(dashboard: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(panel or variable, expression) of every query of a dashboard, rows' panels included."""
    out: list[tuple[str, str]] = []
    title = str(dashboard.get("title", ""))
    for var in (dashboard.get("templating") or {}).get("list") or []:
        query = var.get("query")
        text = query.get("query") if isinstance(query, dict) else query
        if var.get("type") == "query" and text:
            out.append((f"{title} / ${var.get('name')}", str(text)))
    stack = list(dashboard.get("panels") or [])
    while stack:
        panel = stack.pop(0)
        stack[:0] = panel.get("panels") or []
        for target in panel.get("targets") or []:
            if target.get("expr"):
                out.append((f"{title} / {panel.get('title', '')}", str(target["expr"])))
    return out


def _literal_uids(dashboard: Mapping[str, Any]) -> set[str]:
    """Data source uids a dashboard names outright (not through a `${datasource}` variable)."""
    found: set[str] = set()
    stack: list[Any] = [dashboard]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            source = item.get("datasource")
            if isinstance(source, dict) and isinstance(source.get("uid"), str):
                uid = source["uid"]
                if uid and not _VARIABLE.match(uid) and uid not in ("-- Grafana --", "grafana"):
                    found.add(uid)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def build(settings: Settings, profile: Profile, dashboards: Sequence[Mapping[str, Any]]) -> Expectations:
    files = render_all(settings)
    rules = [rule for rel in (ALERTS_FILE, RECORDING_FILE) for rule in _rules(files[rel])]
    used: dict[str, list[str]] = {}
    labels: dict[str, set[str]] = {}
    names = {ref.name for ref in profile.metrics.values()}
    sources = [q for d in dashboards for q in _queries(d)] + [(f"rule {r.shown}", r.expr) for r in rules]
    for where, expr in sources:
        for signal in signals_in(expr, profile):
            if profile.has(signal.key):
                used.setdefault(signal.key, []).append(where)
        for sel in selectors(expr):
            if sel.name in names:
                labels.setdefault(sel.name, set()).update(_MATCHER_LABEL.findall(sel.matchers))
    lengths = [parse_duration(w.strip("[] ")).seconds for r in rules for w in windows(r.expr)]
    uids = [settings.site.datasource_uid, *sorted(set().union(*(_literal_uids(d) for d in dashboards)))]
    return Expectations(
        settings=settings,
        profile=profile,
        used_by={key: tuple(dict.fromkeys(where)) for key, where in sorted(used.items())},
        selector_labels={name: tuple(sorted(found)) for name, found in sorted(labels.items()) if found},
        rules=tuple(rules),
        rule_files=tuple(rel.rsplit("/", 1)[-1] for rel in (ALERTS_FILE, RECORDING_FILE)),
        alertmanager=yaml.safe_load(files[ALERTMANAGER_FILE]) or {},
        shortest_window_s=min(lengths) if lengths else 0,
        datasource_uids=tuple(dict.fromkeys(uids)),
        dashboards=tuple(dashboards),
        group_intervals={str(g.get("name")): parse_duration(str(g["interval"])).seconds
                         for rel in (ALERTS_FILE, RECORDING_FILE)
                         for g in (yaml.safe_load(files[rel]) or {}).get("groups") or [] if g.get("interval")},
    )

