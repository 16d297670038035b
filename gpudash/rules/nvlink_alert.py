"""GPUNVLinkErrors: its rules and their PromQL, per link where the bundled exporter publishes its per-link
counters (labels `link`, `error`), else per GPU from dcgm-exporter's totals, never both for one GPU.

Severity follows what each counter means (docs/alerts.md#gpunvlinkerrors says more):
- A replay is a link-level retry that succeeded, and CRC errors are what replays correct: a trickle of either
  is wear and never pages. Warning, action none, only when a window's count reaches a rate per hour (CRC
  errors of one kind, or replays) and stays there for `for:`.
- Critical, reset_gpu, for a recovery (the link went down and retrained) and for a CRC storm (DCGM's FAIL
  level, 100/s): XID 74's workflow, where a GPU reset clears the link's error state and a fault that comes
  back after it goes to the vendor. The page carries the card (UUID, host name).
- Latched: a recovery while the recovery counter is above 0 (a GPU reset, driver reload or reboot zeroes it);
  a storm for keep_firing_for after its last storming evaluation (once it stops, no counter tells a past storm
  from wear).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from gpudash.catalog import NVLINK_ERROR_KINDS
from gpudash.config.durations import Duration
from gpudash.escape import re2_any
from gpudash.rules.alert_spec import AlertContext, AlertSpec, RuleSpec, target_labels
from gpudash.rules.expressions import NL

LINKS = "nvlink_link_errors"
# what each rule reads, by the bundled exporter's `error` label; the catalog names each one's per-GPU total
LINK_KINDS = {"crc": ("crc_flit", "crc_data"), "replay": ("replay",), "recovery": ("recovery",)}
GPU_KINDS = {k: tuple(dict(NVLINK_ERROR_KINDS)[e] for e in errors) for k, errors in LINK_KINDS.items()}
_ON_LINK = "{{{{ if $labels.link }}}} link {{{{ $labels.link }}}}{{{{ end }}}}"


@dataclass(frozen=True)
class _Source:
    """One source's selectors per kind (a kind it lacks: none) and the labels its alerts keep."""

    by: str  # the labels of one link (or one GPU), card labels included when the rule carries them
    each: str  # `by` and the label that tells kinds apart within one metric ("error"), if any
    kinds: dict[str, tuple[str, ...]]
    yields_to: str | None  # per-link series of the same GPU, which win over these totals


def _sources(c: AlertContext, card: bool) -> list[_Source]:
    q, gpu = c.x.q, c.x.gpu
    carried = ", ".join(target_labels(c.settings, ("card",))) if card else ""
    keep = f", {carried}" if carried else ""
    out = []
    if q.has(LINKS):
        by = f"{gpu}, link{keep}"
        kinds: dict[str, tuple[str, ...]] = {
            k: (q.metric(LINKS, (("error", "=~", re2_any(errors)),)),) for k, errors in LINK_KINDS.items()}
        out.append(_Source(by, f"{by}, error", kinds, None))
    totals = {k: tuple(q.metric(key) for key in keys if q.has(key)) for k, keys in GPU_KINDS.items()}
    if any(totals.values()):
        links = q.per_gpu(q.metric(LINKS)) if q.has(LINKS) else None
        out.append(_Source(f"{gpu}{keep}", f"{gpu}{keep}", totals, links))
    return out


def _join(parts: list[str]) -> str:
    return f"{NL}or{NL}".join(parts)


def _combine(c: AlertContext, card: bool, build: Callable[[_Source], list[str]]) -> str | None:
    """`build`'s parts for each source, the per-GPU totals giving way to a GPU's per-link series."""
    parts = []
    for s in _sources(c, card):
        body = _join(build(s))
        if body:
            parts.append(f"(\n{body}\n)\nunless on ({c.x.gpu})\n{s.yields_to}" if s.yields_to else body)
    if len(parts) > 1:  # each source in parentheses: `unless` binds tighter than `or`
        parts = [f"(\n{p}\n)" for p in parts]
    return _join(parts) or None


def _recoveries(s: _Source) -> list[str]:
    return [f"max by ({s.by}) ({sel}) > 0" for sel in s.kinds["recovery"]]


def _storms(window: Duration, per_second: float, s: _Source) -> list[str]:
    return [f"max by ({s.by}) (rate({sel}[{window}]) >= {per_second:g})" for sel in s.kinds["crc"]]


def _rises(window: Duration, levels: dict[str, float], s: _Source) -> list[str]:
    def rise(sel: str, level: float) -> str:
        now, before = f"max by ({s.each}) ({sel})", f"max by ({s.each}) ({sel} offset {window})"
        return f"max by ({s.by}) ({now} - {before} >= {level:g})"

    return [rise(sel, level) for kind, level in levels.items() for sel in s.kinds[kind]]


def recovery(c: AlertContext) -> str | None:
    """A link (or GPU) whose recovery counter is above 0: it went down and retrained since the counter last
    restarted. The counter is the latch: a GPU reset, driver reload or reboot zeroes it."""
    return _combine(c, True, _recoveries)


def storm(c: AlertContext) -> str | None:
    """CRC errors of one kind at or above crc_per_second_critical over storm_window (DCGM's FAIL)."""
    n = c.t.alerts.nvlink
    return _combine(c, True, partial(_storms, n.storm_window, n.crc_per_second_critical))


def wear(c: AlertContext) -> str | None:
    """CRC errors of one kind, or replays, counted over the window at or above their rate per hour, where
    no recovery or storm is critical already.

    Counted as the counter now less its value a window ago, each taken per GPU (and link, and kind) first, so
    a job label that changes on the series does not break the count, and a counter reset (the GPU reset) is
    no rise. Two instant lookups per series, where an increase over a window reads every sample in it."""
    n = c.t.alerts.nvlink
    hours = n.window.seconds / 3600
    levels = {"crc": n.crc_per_hour_warning * hours, "replay": n.replay_per_hour_warning * hours}
    rising = _combine(c, False, partial(_rises, n.window, levels))
    storms = partial(_storms, n.storm_window, n.crc_per_second_critical)
    critical = _combine(c, False, lambda s: _recoveries(s) + storms(s))
    if rising is None or critical is None:
        return rising
    return f"(\n{rising}\n)\nunless on ({c.x.gpu}{', link' if c.x.q.has(LINKS) else ''})\n(\n{critical}\n)"


NVLINK = AlertSpec("GPUNVLinkErrors", "nvlink", (
    RuleSpec(
        "critical", "reset_gpu", recovery,
        "NVLink" + _ON_LINK + " recovered from a failure on {where}: reset the GPU",
        "NVLink" + _ON_LINK + " of {where} has counted {{{{ $value | printf \"%.0f\" }}}} recovery error(s) since "
        "its counters last restarted: the link went down and retrained. The fault may be this GPU, its peer "
        "or the NVSwitch (XID 74): {to_do}; the reset zeroes the counter and ends this alert. If it comes back "
        "after the reset, run field diagnostics and check the peer.",
        for_=None, labels=(("nvlink_error", "recovery"),), carries=("card",)),
    RuleSpec(
        "critical", "reset_gpu", storm,
        "NVLink" + _ON_LINK + " CRC error storm on {where}: reset the GPU",
        "NVLink" + _ON_LINK + " of {where} counts {{{{ $value | printf \"%.0f\" }}}} CRC errors a second over "
        "{k.storm_window}, at or above {k.crc_per_second_critical:g}/s (DCGM's failure level): the link's "
        "signal is failing; {to_do}, and check the connection (field diagnostics) if it comes back after the "
        "reset. The alert stays {k.storm_keep_firing_for} after the storm stops.",
        for_=None, keep_firing_for="storm_keep_firing_for", labels=(("nvlink_error", "crc_storm"),),
        carries=("card",)),
    RuleSpec(
        "warning", "none", wear,
        "NVLink" + _ON_LINK + " errors rising on {where}",
        "NVLink" + _ON_LINK + " of {where} counted {{{{ $value | printf \"%.0f\" }}}} CRC errors of one kind, or "
        "replays, within the last {k.window}, at or above {k.crc_per_hour_warning:g} CRC errors or "
        "{k.replay_per_hour_warning:g} replays an hour, for {k.for_}: the link corrects them and the work "
        "runs on; {to_do} now. Watch for a rise toward {k.crc_per_second_critical:g}/s, and check the link "
        "(nvidia-smi nvlink -e) in the next service window.",
        labels=(("nvlink_error", "wear"),)),
))
