"""The PromQL of the GPU health alerts: temperature against each GPU's own limits, ECC and row remapping,
GPUs off the bus, and XIDs by the XID table's (severity, action) groups (NVLink's: gpudash.rules.nvlink_alert).

Like every alert expression, each ends in `max by (cluster, instance, <gpu>)` (`by (cluster, instance)` for a
node missing GPUs).
"""

from __future__ import annotations

from gpudash.config.durations import Duration
from gpudash.escape import re2_any
from gpudash.health.xid import XidClass
from gpudash.promql.query import Matcher
from gpudash.promql.resets import EPISODES, card
from gpudash.rules.expressions import NL, AlertExpressions


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

    def temperature(self, key: str, limit_key: str, fallback: float, margin: float | None) -> str:
        """The median temperature at or above its GPU's own limit less `margin` (None: at the limit itself),
        and, for a GPU that publishes no limit, above the fixed fallback level.

        The limit is per GPU (an H200's memory runs to 95 C, its core to 87 C), matched `on` the GPU's labels,
        so each GPU is judged by its own number; `unless on` keeps a GPU with a limit out of the fallback.
        """
        typical = self.x.typical(key)
        fixed = f"{typical} > {fallback:g}"
        if not self.q.has(limit_key):
            return fixed
        limit = self.q.per_gpu(self.q.metric(limit_key))
        level = f"({limit} - {margin:g})" if margin else limit
        return (f"{typical}\n  >= on ({self.gpu})\n  {level}\nor\n"
                f"(\n  {fixed}\n  unless on ({self.gpu})\n  {limit}\n)")

    # -- memory errors -----------------------------------------------------------------------------------

    def ecc_uncorrectable(self) -> str | None:
        """Double-bit errors (volatile or aggregate) or rows remapped for uncorrectable errors rose in the window.

        Single-bit errors are corrected in hardware and are not here: a trickle of them is normal.
        """
        w = self.a.memory_errors.window
        keys = [k for k in ("ecc_dbe_vol", "ecc_dbe_agg", "remapped_rows_unc") if self.q.has(k)]
        return _or([self._increase(k, w, self.gpu) for k in keys])

    def row_remap_pending(self) -> str | None:
        if not self.q.has("row_remap_pending"):
            return None
        return f"{self.q.per_gpu(self.q.metric('row_remap_pending'))} > 0"

    def row_remap_failure(self) -> str | None:
        if not self.q.has("row_remap_failure"):
            return None
        return f"{self.q.per_gpu(self.q.metric('row_remap_failure'))} > 0"

    # -- off the bus -------------------------------------------------------------------------------------

    def fell_off_bus(self) -> str | None:
        """A GPU the exporter reports down (gpu_up 0), or a node publishing fewer GPUs than it expects.

        The second counts every GPU the node publishes, down ones included, so a GPU that is reported down
        fires once (per GPU), and one that vanished is counted in its node's missing number.
        """
        parts = []
        if self.q.has("gpu_up"):
            parts.append(f"{self.q.per_gpu(self.q.metric('gpu_up'))} == 0")
        if self.q.has("gpu_up", "gpus_expected"):
            node = "cluster, instance"
            expected = f"max by ({node}) ({self.q.metric('gpus_expected')})"
            seen = f"count by ({node}) ({self.q.per_gpu(self.q.metric('gpu_up'))})"
            # `or 0 * expected`: a node whose GPUs all vanished still has a count to compare, zero
            parts.append(f"{expected}\n  - on ({node})\n  ({seen} or 0 * {expected})\n  > 0")
        return _or(parts)

    # -- XIDs --------------------------------------------------------------------------------------------

    def xid(self, group: list[XidClass] | None, known: list[int]) -> str | None:
        """New XID events of the codes in `group` (None: every code not in `known`), labelled `xid`.

        From dcgm-exporter's last-code gauge (a new event changes it, or starts a series with err_code) and
        from the bundled exporter's counter per code (a new event raises it, or starts the code's series).
        """
        w = self.a.xid.window
        codes = [r.code for r in group] if group is not None else known
        parts = []
        if self.q.has("xid_last"):
            x = self.q.metric("xid_last")
            new = f"{x} > 0 and (changes({x}[{w}]) > 0 or ({x} unless {x} offset {w}))"
            match = " or ".join(f"{x} == {c}" for c in codes)
            keep = "and" if group is not None else "unless"
            parts.append(f'count_values by ({self.gpu}) ("xid",\n  ({new})\n  {keep}\n  ({match})\n)')
        if self.q.has("xid_total"):
            op = "=~" if group is not None else "!~"
            c = self.q.metric("xid_total", (("xid", op, re2_any(str(n) for n in codes)),))
            parts.append(f"max by ({self.gpu}, xid) (\n  increase({c}[{w}]) > 0\n  or\n"
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
