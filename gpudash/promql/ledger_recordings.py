"""The health ledger's recordings: each health counter's rise per GPU (by UUID), one point an hour.

The ledger (gpudash/panels/health_ledger.py) counts 30 or 90 days of events per GPU. Read raw, that is every
GPU's counters at every hour of the window, on every load: seconds at a thousand GPUs. Recorded, it is a
`sum_over_time` of these series, which hold a point only for a GPU whose counter rose in that hour, so a
healthy fleet's ledger reads next to nothing.

Evaluated once an hour, in a rule group of its own (`interval: 1h`, `query.HOURLY`), each counter's rise over
the hour before the evaluation, per GPU and slot: its highest value now less its highest value one hour before,
over the GPU's job-labelled copies. Prometheus evaluates a group at a fixed offset within its interval, so the
hours abut and every moment is counted once. A counter that fell (a GPU reset clears the volatile ECC counts,
a driver reload every count) counts 0 for that hour and its rises after count again, so the errors a reset
cleared still count, unless the reset came within the hour they appeared. A series new within the hour counts
from its first value (a GPU moved in, an exporter deployed), except the bundled exporter's per-code XID counter,
which it creates at the GPU's first event of that code: that one counts from 0. Flags (a pending or failed row
remap) are recorded at the same hourly evaluations while set. A third sparse recording, in the rule-interval
group, notes where a GPU stopped reporting, so the ledger can name the node a GPU left the fleet from without
reading weeks of utilization.

The hourly points cost one instant read of each counter now and one hour ago per hour, and they make the
ledger's resolution one hour: an event shows at the next hourly evaluation. An evaluation Prometheus misses
(it was down then) loses that hour's rises.
"""

from __future__ import annotations

from collections.abc import Callable

from gpudash.promql.query import HOURLY, PromQL, Recording, Scope

# Counters the bundled exporter creates at a GPU's first event (at 1, not 0): a series new within the hour
# counts from 0. DCGM's run for the GPU's life or since the driver loaded: a new series counts from its first value.
FROM_ZERO = frozenset({"xid_total"})
# Labels a counter's rises are recorded apart by (the ledger groups XID codes by the action they call for).
KEPT = {"xid_total": ("xid",)}
# Counters with several series per GPU (one per NVLink link and kind): each series' rise, then their sum.
PER_SERIES = {"nvlink_link_errors": ("link", "error")}
COUNTERS = ("ecc_dbe_vol", "ecc_dbe_agg", "ecc_sbe_vol", "ecc_sbe_agg", "remapped_rows_unc", "remapped_rows_cor",
            "xid_total", "nvlink_crc_flit", "nvlink_crc_data", "nvlink_replay", "nvlink_recovery",
            "nvlink_link_errors", "thermal_violation", "power_violation")
FLAGS = ("row_remap_pending", "row_remap_failure")
STOPPED = "cluster_instance_gpu_uuid:gpu_reporting:stopped_at"


def slot(q: PromQL) -> str:
    """The labels a GPU's ledger points are recorded by: where it sat, and its UUID."""
    return ", ".join(dict.fromkeys(("cluster", "instance", q.gpu, q.profile.uuid_label)))


def record_name(key: str) -> str:
    """The recorded series of one counter's hourly rises, or of one flag's hourly points."""
    level = "cluster_instance_gpu_uuid" + "".join(f"_{label}" for label in KEPT.get(key, ()))
    return f"{level}:gpu_{key}:{'hourly_increase' if key in COUNTERS else 'hourly_set'}"


def _rise(key: str) -> Callable[[PromQL], str]:
    def build(q: PromQL) -> str:
        by = ", ".join((slot(q), *KEPT.get(key, ()), *PER_SERIES.get(key, ())))
        before = q.with_scope(Scope(q.scope.matchers, str(HOURLY)))
        now, then = f"max by ({by}) ({q.metric(key)})", f"max by ({by}) ({before.metric(key)})"
        rise = f"({now} - {then}) > 0"
        if key in FROM_ZERO:
            rise = f"{rise}\nor\n({now} unless {then}) > 0"
        if key in PER_SERIES:
            rise = f"sum by ({', '.join((slot(q), *KEPT.get(key, ())))}) (\n{rise}\n)"
        return rise

    return build


def _flag(key: str) -> Callable[[PromQL], str]:
    return lambda q: f"max by ({slot(q)}) ({q.metric(key)}) > 0"


def _stopped_at(q: PromQL) -> str:
    """The evaluation's time, per GPU and slot, at the evaluation where its utilization stops being there."""
    before = q.with_scope(Scope(q.scope.matchers, str(q.rule_interval)))
    # `> 0` keeps every such GPU; it tells the live check an empty answer is "none passes the filter"
    return (f"(\nmax by ({slot(q)}) ({before.metric('gpu_util')})\nunless\n"
            f"max by ({slot(q)}) ({q.metric('gpu_util')})\n) * 0 + time() > 0")


LEDGER_RECORDINGS: tuple[Recording, ...] = (
    *(Recording(record_name(key), (key,), _rise(key),
                f"Per GPU (by UUID) and slot, evaluated hourly: how much {key} rose over the hour before (only "
                "GPUs where it rose); sum_over_time adds up a range's rises.", filtered=True, hourly=True)
      for key in COUNTERS),
    *(Recording(record_name(key), (key,), _flag(key),
                f"Per GPU (by UUID) and slot, evaluated hourly: {key} while set (only such GPUs).", filtered=True,
                hourly=True)
      for key in FLAGS),
    Recording(STOPPED, ("gpu_util",), _stopped_at,
              "Per GPU (by UUID) and slot: the evaluation's time where the GPU stops reporting utilization there "
              "(moved, removed, or its exporter gone); last_over_time finds where a GPU reported last.",
              filtered=True),
)
