"""Run each query against a live Prometheus and decide what an empty answer means.

A query that returns series is fine. An empty one is looked into, selector by selector:

- a series it reads does not exist: a failure when that is a signal every dcgm-exporter publishes (or a
  recorded series whose inputs exist: the recording rules are not loaded, unless it is a recorded list, such
  as the GPUs throttled now, beside other recordings: *nothing matches*); *optional* when the signal is
  one a deployment may lack (catalog `Signal.optional`), who holds a job (`gpudash_job_info`, which only the
  bundled exporter publishes) or, for a rule, not a GPU signal at all;
- everything it reads exists: *needs history* when it looks back with `offset` and has data without it,
  or when its series are younger than its range window (a counter that appeared seconds ago) or than its
  subquery's step (a subquery samples at multiples of its step);
  *nothing matches* when it filters with a comparison, or reads a recorded list (a list of GPUs with XID errors
  is rightly empty);
  *not firing* when it reads Prometheus' own ALERTS series and no such alert is active;
  *not firing* for an alert; otherwise a failure (a join on labels that do not line up, for instance);
- it reads the site's job label (gpudash.yaml `jobs.label`) or a job-level recording, and no GPU series
  carries that label: *no jobs*, the rightly empty job dashboard of a site without job attribution.

A run has a deadline for all of it (gpudash.deadline.Deadline): once it has passed, no query is asked any more,
and every query not judged by then is *after deadline*.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

from gpudash.catalog import (
    BY_DCGM_NAME,
    BY_KEY,
    EXPORTER_UNSUPPORTED,
    JOB_INFO,
    PROMETHEUS_ALERTS,
    PROMETHEUS_ALERTS_FOR_STATE,
    UNSUPPORTED_FIELD_LABEL,
    Signal,
)
from gpudash.check.prometheus_api import QUERY_TIMEOUT_S, PrometheusClient, QueryError, TimeRange, series_count
from gpudash.check.queries import ALERT, VARIABLE, CheckQuery, Group, Interpolation, unresolved
from gpudash.config.durations import parse_seconds
from gpudash.deadline import Deadline
from gpudash.infiniband import NIC_INFO, SERIES
from gpudash.promql.query import NODE_UNAME, PromQL
from gpudash.promql.recordings import JOB_RECORDINGS, RECORDING_BY_NAME
from gpudash.promql.scanner import (
    Selector,
    filters,
    metric_names,
    offsets,
    selectors,
    subquery_steps,
    widened,
    windows,
    without_offsets,
)


class Status(Enum):
    OK = "ok"
    NOT_FIRING = "not firing"
    NOTHING_MATCHES = "nothing matches now"
    NEEDS_HISTORY = "needs history"
    NO_JOBS = "no jobs"
    NOT_SUPPORTED = "not supported on this GPU"  # the exporter says NVML cannot give what it reads here
    OPTIONAL = "optional"
    SKIPPED = "not checked"
    AFTER_DEADLINE = "after deadline"  # the run's deadline passed before this query was judged
    EMPTY = "NO DATA"
    ERROR = "ERROR"

    @property
    def failed(self) -> bool:
        return self in (Status.EMPTY, Status.ERROR)


@dataclass(frozen=True)
class Result:
    query: CheckQuery
    series: int
    status: Status
    detail: str = ""


@dataclass(frozen=True)
class GroupResult:
    group: Group
    results: tuple[Result, ...]

    @property
    def failures(self) -> list[Result]:
        return [r for r in self.results if r.status.failed]


_LABEL_VALUES = re.compile(
    r"^\s*label_values\(\s*(?:(?P<match>.+),\s*)?(?P<label>[a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$", re.S)
_QUERY_RESULT = re.compile(r"^\s*query_result\((?P<expr>.+)\)\s*$", re.S)


class Checker:
    """Runs queries against one server, all at the same moment `window.end`, and judges each answer by the
    site's query builder: its metric profile and its job label. Each result goes to `judged` as it comes."""

    def __init__(self, prometheus: PrometheusClient, q: PromQL, window: TimeRange,
                 deadline: Deadline | None = None, judged: Callable[[Result], None] = lambda result: None) -> None:
        self.prometheus = prometheus
        self.profile = q.profile
        self.window = window
        self.job_label = q.job_label
        self.deadline = deadline or Deadline.never()
        self.judged = judged
        self._by_name = {ref.name: BY_KEY[key] for key, ref in q.profile.metrics.items()}
        self._exists: dict[str, bool] = {}

    def run_group(self, group: Group) -> GroupResult:
        window = TimeRange(self.window.end, group.range_s or self.window.range_s, group.step_s or self.window.step_s)
        return GroupResult(group, tuple(self.run(q, window) for q in group.queries))

    def run(self, query: CheckQuery, window: TimeRange | None = None) -> Result:
        """The query's result; *after deadline* when the run's deadline passed before it was judged whole (an
        answer cut short, or a missing series not looked into, would judge it wrongly)."""
        result = Result(query, 0, Status.AFTER_DEADLINE)
        if not self.deadline.passed:
            answer = self._judge(query, window)
            result = result if self.deadline.passed else answer
        self.judged(result)
        return result

    def _judge(self, query: CheckQuery, window: TimeRange | None) -> Result:
        window = window or self.window
        missing_vars = unresolved(query.expr)
        if missing_vars:
            return Result(query, 0, Status.ERROR, f"unknown variable {', '.join(sorted(set(missing_vars)))}")
        try:
            if query.kind == VARIABLE:
                return self._variable(query, window)
            if query.instant:
                count = series_count(self.prometheus.instant(query.expr, self.window.end))
            else:
                count = series_count(self.prometheus.range(query.expr, window))
        except QueryError as exc:
            return Result(query, 0, Status.ERROR, str(exc))
        if count:
            return Result(query, count, Status.OK)
        return self._explain_empty(query)

    # -- variables ------------------------------------------------------------------------------------

    def _variable(self, query: CheckQuery, window: TimeRange) -> Result:
        label_values = _LABEL_VALUES.match(query.expr)
        query_result = _QUERY_RESULT.match(query.expr)
        if label_values:
            match, label = label_values.group("match"), label_values.group("label")
            values = self.prometheus.label_values(label, match.strip() if match else None, window)
            if values:
                # Label values are the server's words: a server may echo a secret in them.
                shown = self.prometheus.secrets.redact(_sample(values))
                return Result(query, len(values), Status.OK, f"{label}: {shown}")
            if match and not self._has(match.strip()):
                return self._missing(query, [_as_selector(match.strip())])
            if label == self.job_label and not self._jobs_here():
                return Result(query, 0, Status.NO_JOBS, self._no_jobs())
            return Result(query, 0, Status.EMPTY, f"no series carries a {label!r} label: the variable lists nothing")
        if query_result:
            count = series_count(self.prometheus.instant(query_result.group("expr"), self.window.end))
            return Result(query, count, Status.OK) if count else self._explain_empty(query)
        return Result(query, 0, Status.SKIPPED, "only label_values() and query_result() variables are checked")

    # -- empty answers ----------------------------------------------------------------------------------

    def _has(self, selector: str) -> bool:
        if selector not in self._exists:
            try:
                self._exists[selector] = bool(series_count(
                    self.prometheus.instant(f"count({without_offsets(selector)})", self.window.end)))
            except QueryError:
                self._exists[selector] = False
        return self._exists[selector]

    def _explain_empty(self, query: CheckQuery) -> Result:
        expr = query_result.group("expr") if (query_result := _QUERY_RESULT.match(query.expr)) else query.expr
        missing = [s for s in selectors(expr) if not self._has(str(s))]
        if missing:
            return self._missing(query, missing)
        shifted = offsets(expr)
        if shifted:
            try:
                has_now = series_count(self.prometheus.instant(without_offsets(expr), self.window.end)) > 0
            except QueryError:
                has_now = False
            if has_now or filters(expr):
                return Result(query, 0, Status.NEEDS_HISTORY,
                              f"returns data without offset {', '.join(sorted(set(shifted)))}; "
                              "Prometheus holds less history than that")
        young = "" if query.kind == ALERT or filters(expr) else (
            self._younger_than_window(expr) or self._younger_than_step(expr))
        if young:
            return Result(query, 0, Status.NEEDS_HISTORY, young)
        if query.kind == ALERT:
            return Result(query, 0, Status.NOT_FIRING)
        if filters(expr) or _reads_a_list(expr):
            return Result(query, 0, Status.NOTHING_MATCHES, "every series it reads exists; none passes its filter")
        return Result(query, 0, Status.EMPTY, "returns nothing although every series it reads exists "
                                              "(labels that do not line up in a join?)")

    def _younger_than_window(self, expr: str) -> str:
        """Why an expression on existing series is empty when its windows are too short for their age, else ''."""
        found = windows(expr)
        if not found:
            return ""
        try:
            longer = series_count(self.prometheus.instant(widened(expr, self.window.range_s), self.window.end))
        except QueryError:
            return ""
        if not longer:
            return ""
        return (f"empty over {', '.join(sorted(set(found)))} but not over {self.window.range_s}s: "
                "its series are too young for that window yet")

    def _younger_than_step(self, expr: str) -> str:
        """Why a subquery on existing series is empty when they began after its last step, else ''.

        A subquery samples at multiples of its step, so series younger than one step give it nothing yet."""
        steps = subquery_steps(expr)
        if not steps:
            return ""
        step = max(steps, key=parse_seconds)
        before = self.window.end - parse_seconds(step)
        try:
            young = [s for s in selectors(expr)
                     if not series_count(self.prometheus.instant(f"count({without_offsets(str(s))})", before))]
        except QueryError:
            return ""
        if not young:
            return ""
        return (f"{', '.join(sorted({s.name for s in young}))} began less than the subquery's step ({step}) ago: "
                "it samples at multiples of that step, none since they began yet")

    def _missing(self, query: CheckQuery, missing: list[Selector]) -> Result:
        found = [self._why_missing(sel, query.kind) for sel in missing]
        worst = max((status for _, status in found), key=_SEVERITY.index)
        return Result(query, 0, worst, "; ".join(reason for reason, _ in found))

    def _why_missing(self, sel: Selector, kind: str) -> tuple[str, Status]:
        """Why a selector has no series, and what that makes of the query."""
        name = sel.name
        by_job = name in _JOB_RECORDS or re.search(rf"\b{re.escape(self.job_label)}\s*(=~|!=|=)", sel.matchers)
        if by_job and not self._jobs_here():
            return f"no {sel}: {self._no_jobs()}", Status.NO_JOBS
        if name in RECORDING_BY_NAME:
            rec = RECORDING_BY_NAME[name]
            absent = [k for k in rec.needs if not self.profile.has(k) or not self._has(self.profile.ref(k).name)]
            if not absent or (rec.any_need and len(absent) < len(rec.needs)):
                if rec.filtered and self._has(_RULES_LOADED):
                    return (f"no {name}: the recording lists only what passes its test, and nothing does now "
                            f"(the other recordings, {_RULES_LOADED} among them, are there)", Status.NOTHING_MATCHES)
                return (f"no {name}: its inputs exist, so the recording rules are not loaded or not evaluated yet",
                        Status.EMPTY)
            signals = [BY_KEY[k] for k in absent]
            return self._signals_reason(signals, f"{name} (recorded from {', '.join(self._names(signals))})")
        if name in _ALERT_SERIES:
            return f"no {sel}: no such alert active now", Status.NOT_FIRING
        if name == JOB_INFO:
            return (f"no {sel}: who holds a job is optional (the bundled exporter publishes it from Slurm's prolog "
                    "or the kubelet; dcgm-exporter does not)", Status.OPTIONAL)
        signal = self._by_name.get(name) or BY_DCGM_NAME.get(name)
        if signal is None:
            if name in _FABRIC_SERIES:
                return (f"no {sel}: no InfiniBand or RoCE port publishes it here (node_exporter's infiniband "
                        "collector; docs/fabric.md)", Status.OPTIONAL)
            if name == NODE_UNAME:
                return (f"no {sel}: node_exporter is not scraped here (the fabric's recordings read its host "
                        "names; docs/fabric.md)", Status.OPTIONAL)
            if kind == ALERT:
                return f"no {sel} (not a GPU signal; its exporter is not scraped here)", Status.OPTIONAL
            return f"no series {sel}", Status.EMPTY
        if sel.matchers and self._has(name):
            if _only_variables(sel.matchers) and not signal.optional:
                return f"{name} exists but none matches {sel.matchers}", Status.EMPTY
            return f"{name} exists, none matches {sel.matchers} now", Status.NOTHING_MATCHES
        return self._signals_reason([signal], name)

    def _jobs_here(self) -> bool:
        """Whether any GPU series carries the job label (a job is attributed somewhere)."""
        return self._has(f'{self.profile.ref("gpu_util").name}{{{self.job_label}!=""}}')

    def _no_jobs(self) -> str:
        return (f"no GPU series carries the job label {self.job_label!r}: no job is attributed here "
                "(see docs/jobs.md)")

    def _signals_reason(self, signals: list[Signal], what: str) -> tuple[str, Status]:
        if all(self._has(f'{EXPORTER_UNSUPPORTED}{{{UNSUPPORTED_FIELD_LABEL}="{s.dcgm_name}"}}') for s in signals):
            return (f"no {what}: the exporter says NVML does not support it on this node's GPUs "
                    f"({EXPORTER_UNSUPPORTED})", Status.NOT_SUPPORTED)
        if all(s.optional for s in signals):
            publishers = sorted({s.publisher.value for s in signals})
            return f"no {what}: optional signal ({', '.join(publishers)})", Status.OPTIONAL
        return (f"no {what}: every dcgm-exporter publishes it, so the exporter is not scraped or mislabelled",
                Status.EMPTY)

    def _names(self, signals: list[Signal]) -> list[str]:
        return [self.profile.ref(s.key).name if self.profile.has(s.key) else s.dcgm_name for s in signals]


def _reads_a_list(expr: str) -> bool:
    """Whether it reads a recorded list (a filtered recording): holding only what passes a test, it filters too."""
    return any(name in RECORDING_BY_NAME and RECORDING_BY_NAME[name].filtered for name in metric_names(expr))


# From least to most serious: a query with several missing selectors takes the most serious reason.
# The fabric's inputs: node_exporter's RDMA ports and the GPU-to-port map, only where a node has such ports.
_FABRIC_SERIES = frozenset({name for name, _, _ in SERIES} | {NIC_INFO})
_SEVERITY = (Status.NOT_FIRING, Status.NOTHING_MATCHES, Status.NO_JOBS, Status.NOT_SUPPORTED, Status.OPTIONAL,
             Status.EMPTY)
_JOB_RECORDS = frozenset(r.record for r in JOB_RECORDINGS)
# Present wherever the recording rules run on GPU data: a filtered recording's absence beside it is "none passes".
_RULES_LOADED = RECORDING_BY_NAME["cluster:gpu_count:count"].record
# Prometheus' own series of active alerts: none while nothing fires, which is no fault of the dashboard.
_ALERT_SERIES = frozenset((PROMETHEUS_ALERTS, PROMETHEUS_ALERTS_FOR_STATE))


def run_check(url: str, groups: Sequence[Group], q: PromQL, timeout: float = QUERY_TIMEOUT_S,
              deadline: Deadline | None = None, judged: Callable[[Result], None] = lambda result: None,
              ) -> list[GroupResult]:
    """Run every query of every group, judged by the site's query builder `q` (metric profile, job label, and its
    rule interval: the scrape interval), until `deadline` passes; raise RemoteError (one line) when the server
    cannot be reached. Each result goes to `judged` as it comes."""
    server = PrometheusClient(url, timeout, deadline=deadline)
    try:
        server.probe()
        now = server.now()
        longest = max((g.range_s for g in groups), default=3600) or 3600
        step = Interpolation(longest, q.rule_interval.seconds).interval_s
        checker = Checker(server, q, TimeRange(now, longest, step), deadline, judged)
        return [checker.run_group(group) for group in groups]
    finally:
        server.close()


def failures(results: Sequence[GroupResult]) -> list[Result]:
    return [r for g in results for r in g.failures]


def after_deadline(results: Sequence[GroupResult]) -> list[Result]:
    return [r for g in results for r in g.results if r.status is Status.AFTER_DEADLINE]


def _only_variables(matchers: str) -> bool:
    """True when every matcher is a variable's All (`=~".*"`): then no series at all is a failure."""
    inner = matchers.strip("{}").strip()
    return not inner or all(part.strip().endswith('=~".*"') for part in inner.split(","))


def _as_selector(text: str) -> Selector:
    found = selectors(text)
    return found[0] if found else Selector(text, "")


def _sample(values: list[str], limit: int = 4) -> str:
    shown = ", ".join(sorted(values)[:limit])
    return shown + (f" (+{len(values) - limit})" if len(values) > limit else "")

