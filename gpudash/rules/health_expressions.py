"""The PromQL of the GPU health alerts: temperature against each GPU's own limits, ECC and row remapping,
NVLink errors, GPUs off the bus, and XIDs by the XID table's (severity, action) groups.

Like every alert expression, each ends in `max by (cluster, instance, <gpu>)` (`link` added where the
bundled exporter publishes per-link NVLink counters; `by (cluster, instance)` for a node missing GPUs).
"""

from __future__ import annotations

from collections.abc import Sequence

from gpudash.config.durations import Duration
from gpudash.escape import re2_any
from gpudash.health.xid import XidClass
from gpudash.promql.query import Matcher
from gpudash.rules.expressions import NL, AlertExpressions

# The bundled exporter's per-link NVLink error kinds (the `error` label of the nvlink_link_errors signal).
LINK_CRC = ("crc_flit", "crc_data")
LINK_FATAL = ("replay", "recovery")  # DCGM's health check: any increase is a failure ("should be 0")
GPU_CRC = ("nvlink_crc_flit", "nvlink_crc_data")
GPU_FATAL = ("nvlink_replay", "nvlink_recovery")
_Source = tuple[str, "Matcher | None"]  # a signal key and the matcher that picks its error kinds, if any


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

    # -- NVLink ------------------------------------------------------------------------------------------

    def nvlink(self, critical: bool) -> str | None:
        """Per link where the bundled exporter publishes links; else per GPU from DCGM's totals, never both.

        Critical: any replay or recovery, or a CRC kind at or above crc_per_second_critical (DCGM's health
        rules). Warning: CRC errors that rose below that rate.
        """
        n = self.a.nvlink
        parts = []
        if self.q.has("nvlink_link_errors"):
            by = f"{self.gpu}, link"
            key = "nvlink_link_errors"
            crc: Matcher = ("error", "=~", re2_any(LINK_CRC))
            fatal: Matcher = ("error", "=~", re2_any(LINK_FATAL))
            parts.append(self._nvlink(by, [(key, fatal)], [(key, crc)], critical, n.window, n.crc_per_second_critical))
        fatal_keys: list[_Source] = [(k, None) for k in GPU_FATAL if self.q.has(k)]
        crc_keys: list[_Source] = [(k, None) for k in GPU_CRC if self.q.has(k)]
        if fatal_keys or crc_keys:
            totals = self._nvlink(self.gpu, fatal_keys, crc_keys, critical, n.window, n.crc_per_second_critical)
            if self.q.has("nvlink_link_errors"):
                links = self.q.per_gpu(self.q.metric("nvlink_link_errors"))
                totals = f"(\n{totals}\n)\nunless on ({self.gpu})\n{links}"
            parts.append(totals)
        # each source in parentheses: `unless` binds tighter than `or`, and a reader should not need to know it
        return _or([f"(\n{part}\n)" for part in parts]) if len(parts) > 1 else _or(parts)

    def _nvlink(self, by: str, fatal: Sequence[_Source], crc: Sequence[_Source], critical: bool, w: Duration,
                per_second: float) -> str:
        def sel(key: str, matcher: Matcher | None) -> str:
            return self.q.metric(key, (matcher,) if matcher else ())

        storm = [f"max by ({by}) (rate({sel(k, m)}[{w}]) >= {per_second:g})" for k, m in crc]
        if critical:
            return f"{NL}or{NL}".join(
                [f"max by ({by}) (increase({sel(k, m)}[{w}]) > 0)" for k, m in fatal] + storm)
        trickle = f"{NL}or{NL}".join(f"max by ({by}) (increase({sel(k, m)}[{w}]) > 0)" for k, m in crc)
        return f"(\n{trickle}\n)\nunless on ({by})\n(\n{f'{NL}or{NL}'.join(storm)}\n)"

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
            keep = "and" if group is not None else "unless"
            # in parentheses: `and` and `unless` bind tighter than the `or` below; a reader need not know it
            parts.append(f'(\ncount_values by ({self.gpu}) ("xid",\n  {new}\n)\n{keep} on (xid)\n{_codes(codes)}\n)')
        if self.q.has("xid_total"):
            op = "=~" if group is not None else "!~"
            c = self.q.metric("xid_total", (("xid", op, re2_any(str(n) for n in codes)),))
            parts.append(f"max by ({self.gpu}, xid) (\n  increase({c}[{w}]) > 0\n  or\n"
                         f"  ({c} unless {c} offset {w})\n)")
        return _or(parts)
