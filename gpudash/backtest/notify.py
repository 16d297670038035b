"""What Alertmanager would have sent: the generated routes, grouping, inhibitions and timing, replayed.

An estimate, from the firing episodes the backtest found (Prometheus sends an alert while it fires and
its resolution when it stops):

- each alert follows the route tree (first matching child, unless a route says `continue`) and joins the
  group its route's `group_by` values name; children inherit `group_by` and timing from their parent;
- an alert is inhibited while a different alert matching an inhibit rule's source matchers fires with the
  same values of the rule's `equal` labels; the inhibited time is cut out of its episodes;
- a group sends `group_wait` after its first alert, then looks again every `group_interval`: it sends when
  an alert joined or resolved since its last message, or when `repeat_interval` has passed since it with
  alerts still firing; a group left with nothing firing is closed, and the next alert opens a new one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpudash.backtest.alert_state import Labels
from gpudash.backtest.engine import Incident
from gpudash.config.durations import parse_duration

_MATCHER = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*')
_DEFAULT_TIMING = {"group_wait": 30, "group_interval": 300, "repeat_interval": 4 * 3600}  # Alertmanager's own


@dataclass(frozen=True)
class Matcher:
    label: str
    op: str
    value: str

    def matches(self, labels: Mapping[str, str]) -> bool:
        have = labels.get(self.label, "")
        if self.op in ("=", "!="):
            return (have == self.value) == (self.op == "=")
        return (re.fullmatch(self.value, have) is not None) == (self.op == "=~")


def parse_matcher(text: str) -> Matcher:
    match = _MATCHER.fullmatch(text)
    if not match:
        raise ValueError(f"not an Alertmanager matcher: {text!r}")
    return Matcher(match.group(1), match.group(2), json.loads(f'"{match.group(3)}"'))


@dataclass(frozen=True)
class Route:
    name: str  # the path of matchers that leads here, for messages
    matchers: tuple[Matcher, ...]
    receiver: str
    group_by: tuple[str, ...] | None  # None: group by every label ('...')
    group_wait: int
    group_interval: int
    repeat_interval: int
    cont: bool
    routes: tuple[Route, ...] = ()


def _seconds(node: Mapping[str, Any], key: str, inherited: int) -> int:
    return parse_duration(str(node[key])).seconds if key in node else inherited


def parse_route(node: Mapping[str, Any], parent: Route | None = None) -> Route:
    matchers = tuple(parse_matcher(str(m)) for m in node.get("matchers", []))
    group_by: tuple[str, ...] | None
    if "group_by" in node:
        group_by = None if "..." in node["group_by"] else tuple(str(g) for g in node["group_by"])
    else:
        group_by = parent.group_by if parent else ()
    timing = {k: _seconds(node, k, getattr(parent, k) if parent else v) for k, v in _DEFAULT_TIMING.items()}
    name = ",".join(f"{m.label}{m.op}{m.value}" for m in matchers)
    name = f"{parent.name}/{name}" if parent and parent.name else name or "root"
    route = Route(name, matchers, str(node.get("receiver", parent.receiver if parent else "")), group_by,
                  timing["group_wait"], timing["group_interval"], timing["repeat_interval"],
                  bool(node.get("continue", False)))
    children = tuple(parse_route(child, route) for child in node.get("routes", []))
    return Route(route.name, matchers, route.receiver, group_by, route.group_wait, route.group_interval,
                 route.repeat_interval, route.cont, children)


def routes_for(route: Route, labels: Mapping[str, str]) -> list[Route]:
    """The routes an alert ends in (Alertmanager's depth-first match)."""
    found: list[Route] = []
    for child in route.routes:
        if all(m.matches(labels) for m in child.matchers):
            found.extend(routes_for(child, labels))
            if not child.cont:
                break
    return found or [route]


@dataclass(frozen=True)
class Inhibition:
    source: tuple[Matcher, ...]
    target: tuple[Matcher, ...]
    equal: tuple[str, ...]


def parse_inhibitions(config: Mapping[str, Any]) -> list[Inhibition]:
    return [Inhibition(tuple(parse_matcher(str(m)) for m in rule.get("source_matchers", [])),
                       tuple(parse_matcher(str(m)) for m in rule.get("target_matchers", [])),
                       tuple(str(e) for e in rule.get("equal", [])))
            for rule in config.get("inhibit_rules", [])]


Span = tuple[float, float]  # [from, to) in seconds


def _subtract(spans: list[Span], cut: Iterable[Span]) -> list[Span]:
    for c0, c1 in sorted(cut):
        kept: list[Span] = []
        for s0, s1 in spans:
            if c1 <= s0 or c0 >= s1:
                kept.append((s0, s1))
                continue
            if s0 < c0:
                kept.append((s0, c0))
            if c1 < s1:
                kept.append((c1, s1))
        spans = kept
    return spans


def uninhibited(incidents: Sequence[Incident], rules: Sequence[Inhibition], step: int) -> dict[Labels, list[Span]]:
    """Each alert's firing time as [from, to) spans, with the time an inhibit rule silenced it cut out."""
    spans: dict[Labels, list[Span]] = {}
    for i in incidents:
        spans.setdefault(i.labels, []).append((i.start, i.end + step))
    # per rule, the sources by their values of the `equal` labels: each target looks up its own
    sources: list[dict[tuple[str, ...], list[tuple[Labels, list[Span]]]]] = []
    for rule in rules:
        by_equal: dict[tuple[str, ...], list[tuple[Labels, list[Span]]]] = {}
        for labels, own in spans.items():
            source = dict(labels)
            if all(m.matches(source) for m in rule.source):
                by_equal.setdefault(tuple(source.get(e, "") for e in rule.equal), []).append((labels, own))
        sources.append(by_equal)
    out: dict[Labels, list[Span]] = {}
    for labels, own in spans.items():
        target = dict(labels)
        for rule, by_equal in zip(rules, sources, strict=True):
            if not all(m.matches(target) for m in rule.target):
                continue
            for other, theirs in by_equal.get(tuple(target.get(e, "") for e in rule.equal), ()):
                if other != labels:  # an alert never inhibits itself
                    own = _subtract(own, theirs)
        if own:
            out[labels] = own
    return out


@dataclass
class Notification:
    receiver: str
    route: str
    at: float
    firing: tuple[Labels, ...]
    resolved: tuple[Labels, ...]


@dataclass
class _Group:
    route: Route
    spans: dict[Labels, list[Span]] = field(default_factory=dict)


def _firing(group: _Group, t: float) -> set[Labels]:
    return {labels for labels, spans in group.spans.items() if any(s0 <= t < s1 for s0, s1 in spans)}


def _replay_group(group: _Group, end: float) -> list[Notification]:
    r = group.route
    starts = sorted(s0 for spans in group.spans.values() for s0, _ in spans)
    sent: list[Notification] = []
    i = 0
    while i < len(starts):
        t = starts[i] + r.group_wait  # a new group: it waits, then sends
        last: set[Labels] = set()
        last_at = -1.0
        while t <= end:
            now = _firing(group, t)
            resolved = last - now
            if (now - last) or resolved or (now and t - last_at >= r.repeat_interval):
                sent.append(Notification(r.receiver, r.name, t, tuple(sorted(now)), tuple(sorted(resolved))))
                last, last_at = now, t
            if not now:
                break  # nothing left firing: the group closes
            t += r.group_interval
        while i < len(starts) and starts[i] <= t:
            i += 1
    return sent


def estimate(incidents: Sequence[Incident], config: Mapping[str, Any], step: int, end: float) -> list[Notification]:
    """The messages Alertmanager would have sent for these incidents, in time order."""
    root = parse_route(config.get("route", {}))
    spans = uninhibited(incidents, parse_inhibitions(config), step)
    groups: dict[tuple[str, tuple[str, ...]], _Group] = {}
    for labels, own in spans.items():
        as_dict = dict(labels)
        for route in routes_for(root, as_dict):
            names = route.group_by if route.group_by is not None else tuple(sorted(as_dict))
            key = (route.name, tuple(as_dict.get(n, "") for n in names))
            groups.setdefault(key, _Group(route)).spans[labels] = own
    sent = [n for group in groups.values() for n in _replay_group(group, end)]
    return sorted(sent, key=lambda n: n.at)
