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

from functools import partial

from gpudash.promql import nvlink_sources as nvlink
from gpudash.promql.alert_states import NVLINK_RECOVERED, NVLINK_STORM
from gpudash.rules.alert_spec import AlertContext, AlertSpec, RuleSpec

_ON_LINK = "{{{{ if $labels.link }}}} link {{{{ $labels.link }}}}{{{{ end }}}}"


def _recorded(c: AlertContext, record: str) -> str | None:
    """A critical condition as its recording holds it, per link (or GPU), the card kept."""
    q = c.x.q
    if not q.available(record):
        return None
    card = "".join(f", {label}" for label in nvlink.card_labels(q))
    return f"max by ({nvlink.link_labels(q)}{card}) ({q.recorded_series(record)})"


def recovery(c: AlertContext) -> str | None:
    """A link (or GPU) whose recovery counter is above 0 (`alert_states.nvlink_recovered`)."""
    return _recorded(c, NVLINK_RECOVERED)


def storm(c: AlertContext) -> str | None:
    """CRC errors of one kind at or above crc_per_second_critical over storm_window (`alert_states.nvlink_storm`)."""
    return _recorded(c, NVLINK_STORM)


def wear(c: AlertContext) -> str | None:
    """CRC errors of one kind, or replays, counted over the window at or above their rate per hour, where
    no recovery or storm is critical already (their recordings: the sparse links in them, not every link's
    counters again).

    Counted as the counter now less its value a window ago, each taken per GPU (and link, and kind) first, so
    a job label that changes on the series does not break the count, and a counter reset (the GPU reset) is
    no rise. Two instant lookups per series, where an increase over a window reads every sample in it."""
    q, n = c.x.q, c.t.alerts.nvlink
    hours = n.window.seconds / 3600
    levels = {"crc": n.crc_per_hour_warning * hours, "replay": n.replay_per_hour_warning * hours}
    rising = nvlink.combine(q, (), partial(nvlink.rises, n.window, levels))
    if rising is None:
        return None
    critical = [q.recorded_series(r) for r in (NVLINK_RECOVERED, NVLINK_STORM) if q.available(r)]
    return "".join([f"(\n{rising}\n)", *(f"\nunless on ({nvlink.link_labels(q)})\n{r}" for r in critical)])


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
