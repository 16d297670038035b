"""The PromQL of the GPU health alerts: temperature against each GPU's own limits, ECC and row remapping,
GPUs off the bus, the driver's recovery action, and XIDs by the XID table's groups (NVLink's:
gpudash.rules.nvlink_alert).

Like every alert expression, each ends in `max by (cluster, instance, <gpu>)` (`by (cluster, instance)` for a
node missing GPUs), plus the labels `keep` names: what the page must carry (the card, or the job).

A latched expression (an alert whose action is reset_gpu, reboot_node, drain or rma) reads state the
exporters keep until the remedy, not a window: a gauge still reading the code or flag, a counter that exists
since the exporter started (a reset or reboot restarts the exporter and its counters), a volatile count that
a GPU reset zeroes, and node_exporter's boot time later than the event where the event's time is published.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpudash.config.durations import Duration
from gpudash.escape import promql_matcher, re2_any
from gpudash.health.xid import XidClass
from gpudash.promql.query import Matcher
from gpudash.promql.recordings import TEMPERATURE_SENSORS
from gpudash.promql.resets import EPISODES, XID_NEW, card
from gpudash.rules.expressions import NL, NODE_BOOT_TIME, AlertExpressions


def _codes(codes: Sequence[int]) -> str:
    """One constant series per XID code, labelled `xid`: matching the codes on that label costs one join,
    where comparing the gauge with each code would read every GPU's series once per code."""
    return "(" + " or ".join(f'label_replace(vector(1), "xid", "{c}", "", "")' for c in codes) + ")"


def _or(parts: list[str]) -> str | None:
    return f"{NL}or{NL}".join(parts) or None


class HealthExpressions:
    """Builds the health alerts' expressions on top of the shared alert helpers."""

    def __init__(self, x: AlertExpressions) -> None:
        self.x = x
        self.q = x.q
        self.a = x.a
        self.gpu = x.gpu  # "cluster, instance, <gpu label>"

    def _increase(self, key: str, window: Duration, by: str, *matchers: Matcher) -> str:
        return f"max by ({by}) (increase({self.q.metric(key, matchers)}[{window}]) > 0)"

    # -- temperature -------------------------------------------------------------------------------------

    def temperature(self, key: str, limit_key: str, critical: float | None, keep: Sequence[str] = ()) -> str:
        """The GPUs near their temperature limit (`critical` None: the warning), read from their recording; at
        or above the limit itself (`critical`: the fixed level for a GPU that publishes no limit).

        The limit is per GPU (an H200's memory runs to 95 C, its core to 87 C), matched `on` the GPU's labels,
        so each GPU is judged by its own number; `unless on` keeps a GPU with a limit out of the fallback. The
        recording holds the medians of the GPUs near their limits only: the critical compares those.
        """
        near = self.q.per_gpu(self.q.use(TEMPERATURE_SENSORS[key][2]), *keep)
        if critical is None:
            return near
        fixed = f"{near} > {critical:g}"
        if not self.q.has(limit_key):
            return fixed
        limit = self.q.gpu_once(limit_key)
        return (f"{near}\n  >= on ({self.gpu})\n  {limit}\nor\n"
                f"(\n  {fixed}\n  unless on ({self.gpu})\n  {limit}\n)")

    # -- memory errors -----------------------------------------------------------------------------------

    def ecc_uncorrectable(self, keep: Sequence[str] = ()) -> str | None:
        """Latched on the volatile double-bit count (a GPU reset or driver reload zeroes it) where the GPU
        publishes it; elsewhere, double-bit errors (aggregate) or rows remapped for them rose in the window.

        Single-bit errors are corrected in hardware and are not here: a trickle of them is normal.
        """
        w = self.a.memory_errors.window
        by = ", ".join((self.gpu, *keep))
        windowed = _or([self._increase(k, w, by) for k in ("ecc_dbe_agg", "remapped_rows_unc") if self.q.has(k)])
        if not self.q.has("ecc_dbe_vol"):
            return windowed
        volatile = self.q.metric("ecc_dbe_vol")
        latched = f"max by ({by}) ({volatile} > 0)"
        if windowed is None:
            return latched
        return f"{latched}\nor\n(\n{windowed}\n)\nunless on ({self.gpu})\n{volatile}"

    def flag(self, key: str, keep: Sequence[str] = ()) -> str | None:
        """A per-GPU flag (row remap pending, row remap failure) while it is set: the flag is the state."""
        if not self.q.has(key):
            return None
        return f"{self.q.per_gpu(self.q.metric(key), *keep)} > 0"

    # -- the driver's verdict ----------------------------------------------------------------------------

    def recovery_action(self, values: Sequence[int] | None, named: Sequence[int], keep: Sequence[str]) -> str | None:
        """The GPU's recovery action field while it reads one of `values` (None: any non-zero value not in
        `named`). The field stays set until the action is done, so this is its own latch."""
        if not self.q.has("recovery_action"):
            return None
        field = self.q.metric("recovery_action")
        if values is not None:
            return self.q.per_gpu(" or ".join(f"{field} == {v}" for v in values), *keep)
        others = " or ".join(f"{field} == {v}" for v in named)
        return self.q.per_gpu(f"{field} > 0 unless ({others})" if others else f"{field} > 0", *keep)

    # -- off the bus -------------------------------------------------------------------------------------

    def fell_off_bus(self, keep: Sequence[str] = ()) -> str | None:
        """A GPU the exporter reports down (gpu_up 0), or a node publishing fewer GPUs than it expects.

        The second counts every GPU the node publishes, down ones included, so a GPU that is reported down
        fires once (per GPU), and one that vanished is counted in its node's missing number. Both are state:
        they hold until the node's restart brings the GPU back.
        """
        parts = []
        if self.q.has("gpu_up"):
            parts.append(f"{self.q.per_gpu(self.q.metric('gpu_up'), *keep)} == 0")
        if self.q.has("gpu_up", "gpus_expected"):
            node = "cluster, instance"
            expected = f"max by ({node}) ({self.q.metric('gpus_expected')})"
            seen = f"count by ({node}) ({self.q.per_gpu(self.q.metric('gpu_up'))})"
            # `or 0 * expected`: a node whose GPUs all vanished still has a count to compare, zero
            parts.append(f"{expected}\n  - on ({node})\n  ({seen} or 0 * {expected})\n  > 0")
        return _or(parts)

    # -- XIDs --------------------------------------------------------------------------------------------

    def xid(self, group: list[XidClass] | None, known: list[int], keep: Sequence[str] = (),
            latched: bool = False) -> str | None:
        """XID events of the codes in `group` (None: every code not in `known`), labelled `xid`.

        Not latched: new events within the window, from dcgm-exporter's last-code gauge (a new event changes
        it, or starts a series with err_code) and from the bundled exporter's counter per code (a new event
        raises it, or starts the code's series). Latched: while the gauge still reads the code, or the
        counter of the code exists (the exporter's restart at a reset or reboot starts it afresh), unless the
        node booted after the GPU's last XID (the bundled exporter publishes its time).
        """
        w = self.a.xid.window
        codes = [r.code for r in group] if group is not None else known
        by = ", ".join((self.gpu, *keep))
        parts = []
        if self.q.has("xid_last"):
            x = self.q.metric("xid_last")
            shown = f'count_values by ({by}) ("xid",\n  {x} > 0\n)'
            if not latched and self.q.available(XID_NEW):
                # the codes shown now that the recorded events noted within the window: the sparse events,
                # where testing the gauge's changes would read every GPU's gauge over the window again
                new = self.q.recorded_over_time("sum", XID_NEW, w)
                shown = f"(\n{_indent(shown, 2)}\n  and on ({self.gpu}, xid)\n  {new} > 0\n)"
            elif not latched:
                shown = (f'count_values by ({by}) ("xid",\n'
                         f"  {x} > 0 and (changes({x}[{w}]) > 0 or ({x} unless {x} offset {w}))\n)")
            op = "and" if group is not None else "unless"
            # in parentheses: `and` and `unless` bind tighter than the `or` below; a reader need not know it
            parts.append(f"(\n{shown}\n{op} on (xid)\n{_codes(codes)}\n)")
        if self.q.has("xid_total"):
            op = "=~" if group is not None else "!~"
            c = self.q.metric("xid_total", (("xid", op, re2_any(str(n) for n in codes)),))
            if latched:
                body = f"{c} > 0"
                if self.q.has("xid_last_time"):
                    booted = self.x.on_node(self.q.metric("xid_last_time"), "<", self._boot_time())
                    body += f"\n  unless on ({self.gpu})\n  (\n{_indent(booted, 4)}\n  )"
                parts.append(f"max by ({by}, xid) (\n  {body}\n)")
            else:
                parts.append(f"max by ({by}, xid) (\n  increase({c}[{w}]) > 0\n  or\n"
                             f"  ({c} unless {c} offset {w})\n)")
        return _or(parts)

    # -- repeat offenders --------------------------------------------------------------------------------

    def repeat_offender(self) -> str | None:
        """A GPU (by UUID) with at least `resets` reset episodes within the window, wherever they happened.

        Named where its last reset was (the episodes are valued at their time: the latest per UUID), read from
        the sparse episodes alone: a card moved since keeps its alert as it was, and no GPU's dense series is
        read (where it reports now would read every GPU's series at every evaluation).
        """
        if not self.q.available(EPISODES):
            return None
        r = self.a.repeat_offender
        uuid, where = self.q.profile.uuid_label, card(self.q)
        episodes = self.q.recordings[EPISODES].record
        place = [label for label in where.split(", ") if label != uuid]
        last = f"topk by ({uuid}) (1, max_over_time({episodes}[{r.window}]))"
        return (f"(sum by ({uuid}) (count_over_time({episodes}[{r.window}])) >= {r.resets})\n"
                f"* on ({uuid}) group_left ({', '.join(place)})\n"
                f"group by ({where}) ({last})")

    def _boot_time(self) -> str:
        return f"{NODE_BOOT_TIME}{{{promql_matcher('job', '=', self.x.site.node_job)}}}"

    def where_published(self, expr: str | None, key: str, published: bool) -> str | None:
        """`expr` for the GPUs that publish `key` (published) or for those that do not, decided at evaluation
        time: dcgm-exporter publishes an optional field only where its counters file enables it."""
        if expr is None or not self.q.has(key):
            return None if published else expr
        return f"(\n{_indent(expr, 2)}\n)\n{'and' if published else 'unless'} on ({self.gpu})\n{self.q.metric(key)}"


def _indent(text: str, spaces: int) -> str:
    return NL.join(" " * spaces + line if line else line for line in text.splitlines())
