"""thresholds.yaml: every number a person tunes (colour steps, alert levels, windows, `for:` durations,
Alertmanager timings), as typed immutable dataclasses, and its parsing.

Every error names the file, the key path and what was expected, e.g.
``thresholds.yaml: memory.warning_ratio: expected a number between 0 and 1, got 'high'``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Annotated, Any, get_type_hints

from gpudash.config.durations import Duration
from gpudash.config.fields import FieldReader
from gpudash.config.knobs import Number, Percent, Ratio, Span, Whole, read_knobs
from gpudash.health.xid import ACTIONS, XID_TABLE, XidClass, with_overrides


@dataclass(frozen=True)
class Utilization:
    idle_below_percent: float
    saturated_above_percent: float


@dataclass(frozen=True)
class Levels:
    """A warning and a critical level of one signal, warning <= critical."""

    warning: float
    critical: float


@dataclass(frozen=True)
class Temperature:
    """Fixed levels (the fallback, and the dashboards' colour steps) and the margins below each GPU's own limits."""

    gpu: Levels
    hbm: Levels
    gpu_margin: float  # warning within this many degrees of the GPU's max operating temperature
    hbm_margin: float  # ... of its memory's max operating temperature


@dataclass(frozen=True)
class DashboardKnobs:
    refresh: Duration
    default_range: Duration
    comparison_offset: Duration
    fleet_topk: int
    expected_lookback: Duration  # where no exporter publishes the GPUs a node expects: the most seen at once within


# The alert sections: each field's annotation is its key's type and bounds (gpudash.config.knobs).


@dataclass(frozen=True)
class TemperatureAlert:
    window: Span
    for_: Span


@dataclass(frozen=True)
class ThrottlingAlert:
    window: Span
    for_: Span


@dataclass(frozen=True)
class MemoryPressureAlert:
    growth_window: Span
    for_: Span


@dataclass(frozen=True)
class MemoryLeakAlert:
    window: Span
    horizon: Span
    for_: Span


@dataclass(frozen=True)
class JobStalledAlert:
    window: Span
    util_below_percent: Percent
    memory_above_ratio: Ratio
    for_: Span


@dataclass(frozen=True)
class JobHungAlert:
    window: Span  # every reading of the window must show the hang
    util_above_percent: Percent  # busy by utilization: its lowest reading over the window at or above this ...
    tensor_below_ratio: Ratio  # ... while its highest tensor activity stays under this ...
    dram_below_ratio: Ratio  # ... and its highest DRAM activity under this (where profiling is published) ...
    power_below_ratio: Ratio  # ... and its highest power draw under this share of its power limit ...
    power_below_watts: Annotated[float, Number(1, 10000)]  # ... or under this where no power limit is published
    gpus_ratio: Ratio  # a job is hung when at least this share of its GPUs is
    for_: Span
    keep_firing_for: Span


@dataclass(frozen=True)
class DataLoaderAlert:
    window: Span
    util_below_percent: Percent
    cpu_load_ratio: Annotated[float, Number(0, 10)]
    for_: Span


@dataclass(frozen=True)
class XidAlert:
    window: Span
    overrides: tuple[tuple[int, str], ...] = ()  # (code, action): a site's departures from the XID table

    @property
    def table(self) -> dict[int, XidClass]:
        """gpudash/health/xid_catalog.csv with the site's overrides applied."""
        return with_overrides(XID_TABLE, dict(self.overrides))


@dataclass(frozen=True)
class RecoveryActionAlert:
    for_: Span  # the driver's recovery action set this long


@dataclass(frozen=True)
class MemoryErrorsAlert:
    window: Span  # without a volatile count: an uncorrectable error or remapped row within this window fires
    pending_for: Span  # a row remap pending this long fires


@dataclass(frozen=True)
class NVLinkAlert:
    # warning: CRC errors of one kind, or replays, counted over the window at or above these rates per hour
    window: Span
    crc_per_hour_warning: Annotated[float, Number(0.001, 1e12)]
    replay_per_hour_warning: Annotated[float, Number(0.001, 1e12)]
    for_: Span
    # critical: CRC errors a second at or above this over storm_window (DCGM's health check: 100/s) ...
    storm_window: Span
    crc_per_second_critical: Annotated[float, Number(0.001, 1e9)]
    storm_keep_firing_for: Span  # ... and this long after the storm stops


@dataclass(frozen=True)
class FellOffBusAlert:
    for_: Span  # a GPU reported down, or missing from its node's expected count, this long


@dataclass(frozen=True)
class RepeatOffenderAlert:
    resets: Annotated[int, Whole(2, 1000)]  # a GPU (by UUID) that needed this many resets within the window: RMA
    window: Span
    merge_within: Span  # reset-class events of one GPU this close together are one episode


@dataclass(frozen=True)
class ExporterDownAlert:
    for_: Span
    lookback: Span  # a GPU seen within this long that reports nothing now has "stopped reporting"


@dataclass(frozen=True)
class JobStragglerAlert:
    min_gpus: Annotated[int, Whole(2, 1 << 20)]  # jobs with fewer GPUs have no meaningful median
    busy_above_percent: Percent  # the job's median utilization must be above this
    clock_below_ratio: Annotated[float, Number(0.01, 0.99)]  # SM clock this far below the job's median clock
    # SM activity (or utilization) this many points away from the job's median
    activity_points: Annotated[float, Number(1, 100)]
    window: Span
    for_: Span


@dataclass(frozen=True)
class AllocatedIdleAlert:
    util_below_percent: Percent  # a job's GPU under this is held idle (also the fleet's "GPU-hours idle")
    window: Span
    for_: Span


@dataclass(frozen=True)
class FabricAlert:
    """The InfiniBand / RoCE ports (node_exporter's infiniband collector) and each GPU's NVSwitch fabric state."""

    down_for: Span  # a port that was active within down_lookback and is not active now, this long: drain
    down_lookback: Span  # ... (a port never active within it, an unused second port, is no alarm)
    flap_window: Span  # the link went down this many times (flaps) within flap_window: drain
    flaps: Annotated[int, Whole(2, 10000)]
    error_window: Span  # symbol errors counted over this window at or above their rate an hour: warning
    symbol_errors_per_hour_warning: Annotated[float, Number(0.001, 1e12)]
    link_integrity_per_hour_warning: Annotated[float, Number(0.001, 1e12)]  # ... or link-integrity errors
    errors_for: Span
    speed_below_ratio: Annotated[float, Number(0.01, 0.99)]  # active at under this share of its top speed ...
    speed_lookback: Span  # ... the highest it ran at within this lookback, this long: drain
    degraded_for: Span
    congestion_ratio: Ratio  # a straggler's port waiting in this share of its transmit slots ...
    congestion_for: Span  # ... this long: warning naming the job and the port
    state_for: Span  # a GPU's fabric not ready (not started, in progress) or failed this long: drain


@dataclass(frozen=True)
class Alerts:
    """The `alerts:` sections, in the order they are read."""

    temperature: TemperatureAlert
    throttling: ThrottlingAlert
    memory_pressure: MemoryPressureAlert
    memory_leak: MemoryLeakAlert
    job_stalled: JobStalledAlert
    job_hung: JobHungAlert
    data_loader: DataLoaderAlert
    xid: XidAlert
    exporter_down: ExporterDownAlert
    job_straggler: JobStragglerAlert
    allocated_idle: AllocatedIdleAlert
    memory_errors: MemoryErrorsAlert
    nvlink: NVLinkAlert
    fell_off_bus: FellOffBusAlert
    repeat_offender: RepeatOffenderAlert
    recovery_action: RecoveryActionAlert
    fabric: FabricAlert


@dataclass(frozen=True)
class NotificationTiming:
    """One Alertmanager route's timing: first wait, then between updates, then between repeats."""

    group_wait: Duration
    group_interval: Duration
    repeat_interval: Duration


@dataclass(frozen=True)
class AlertmanagerTimings:
    critical: NotificationTiming
    digest: NotificationTiming
    job_owner: NotificationTiming  # restart_job and audience=job_owner alerts, to the job's owner
    heartbeat: NotificationTiming  # the Watchdog, to the heartbeat receivers


@dataclass(frozen=True)
class Thresholds:
    utilization: Utilization
    memory: Levels
    temperature: Temperature
    power: Levels
    throttle_drop_ratio: float
    dashboards: DashboardKnobs
    alerts: Alerts
    alertmanager: AlertmanagerTimings


def parse_thresholds(source: str, data: Any) -> Thresholds:
    top = FieldReader(source, data)

    util = top.section("utilization")
    idle, saturated = _levels(util, "idle_below_percent", "saturated_above_percent", 0, 100)
    util.done()

    mem = top.section("memory")
    memory = Levels(*_levels(mem, "warning_ratio", "critical_ratio", 0, 1))
    mem.done()

    temp = top.section("temperature")
    temperature = Temperature(
        gpu=Levels(*_levels(temp, "gpu_warning_celsius", "gpu_critical_celsius", 0, 150)),
        hbm=Levels(*_levels(temp, "hbm_warning_celsius", "hbm_critical_celsius", 0, 150)),
        gpu_margin=temp.number("gpu_margin_celsius", 0, 50),
        hbm_margin=temp.number("hbm_margin_celsius", 0, 50),
    )
    temp.done()

    pwr = top.section("power")
    power = Levels(*_levels(pwr, "warning_ratio", "critical_ratio", 0, 1.5))
    pwr.done()

    clocks = top.section("clocks")
    drop = clocks.number("throttle_drop_ratio", 0.01, 0.99)
    clocks.done()

    dash = top.section("dashboards")
    knobs = DashboardKnobs(
        refresh=dash.duration("refresh"),
        default_range=dash.duration("default_range"),
        comparison_offset=dash.duration("comparison_offset"),
        fleet_topk=dash.integer("fleet_topk", 1, 200),
        expected_lookback=dash.duration("expected_lookback", "1d"),
    )
    dash.done()

    alerts = _parse_alerts(top.section("alerts"))
    am = top.section("alertmanager")
    timings = AlertmanagerTimings(*(_timing(am.section(f.name)) for f in fields(AlertmanagerTimings)))
    am.done()
    top.done()
    return Thresholds(
        utilization=Utilization(idle, saturated),
        memory=memory,
        temperature=temperature,
        power=power,
        throttle_drop_ratio=drop,
        dashboards=knobs,
        alerts=alerts,
        alertmanager=timings,
    )


def _parse_alerts(alerts: FieldReader) -> Alerts:
    sections = get_type_hints(Alerts)
    values = {}
    for name in (f.name for f in fields(Alerts)):
        r = alerts.section(name)
        values[name] = _SECTION_PARSERS.get(name, read_knobs)(r, sections[name])
        r.done()
    alerts.done()
    return Alerts(**values)


def _xid(r: FieldReader, cls: type[XidAlert]) -> XidAlert:
    if r.has("critical_codes"):
        r.fail("is gone: each XID's severity and action now come from the XID table "
               "(gpudash/health/xid_catalog.csv, docs/alerts.md#xid-classes); remove critical_codes and "
               "tune single codes with alerts.xid.overrides (code: action)", "critical_codes")
    window = read_knobs(r, cls).window
    return cls(window, _xid_overrides(r))


def _exporter_down(r: FieldReader, cls: type[ExporterDownAlert]) -> ExporterDownAlert:
    down = read_knobs(r, cls)
    if down.lookback <= down.for_:
        r.fail(f"lookback ({down.lookback}) must be above for ({down.for_}), or a silent GPU never fires")
    return down


def _repeat_offender(r: FieldReader, cls: type[RepeatOffenderAlert]) -> RepeatOffenderAlert:
    offender = read_knobs(r, cls)
    if offender.merge_within >= offender.window:
        r.fail(f"merge_within ({offender.merge_within}) must be below window ({offender.window}), or a GPU's "
               "resets within the window are one episode and it never fires")
    return offender


# The sections with a rule across their keys, or a key that is not a plain knob.
_SECTION_PARSERS: dict[str, Callable[[FieldReader, Any], Any]] = {
    "xid": _xid, "exporter_down": _exporter_down, "repeat_offender": _repeat_offender}


def _xid_overrides(r: FieldReader) -> tuple[tuple[int, str], ...]:
    """alerts.xid.overrides: XID code -> one of the actions; optional."""
    section = r.section("overrides", required=False)
    out: list[tuple[int, str]] = []
    code: Any  # YAML reads `13:` as an int key; anything else is refused below
    for code, action in section.data.items():
        key = str(code)
        if isinstance(code, bool) or not isinstance(code, int) or not 1 <= code <= 999:
            section.fail(f"expected an XID code (a whole number from 1 to 999) as the key, got {code!r}", key)
        if action not in ACTIONS:
            section.fail(f"expected one of {', '.join(ACTIONS)}, got {action!r}", key)
        out.append((int(code), str(action)))
    return tuple(sorted(out))


def _timing(r: FieldReader) -> NotificationTiming:
    timing = NotificationTiming(r.duration("group_wait"), r.duration("group_interval"), r.duration("repeat_interval"))
    # Alertmanager resends only on a group_interval tick: a shorter repeat_interval would not mean what it says.
    if timing.repeat_interval < timing.group_interval:
        r.fail(f"repeat_interval ({timing.repeat_interval}) must not be below group_interval "
               f"({timing.group_interval})")
    r.done()
    return timing


def _levels(reader: FieldReader, warning_key: str, critical_key: str, lo: float, hi: float) -> tuple[float, float]:
    warning = reader.number(warning_key, lo, hi)
    critical = reader.number(critical_key, lo, hi)
    if warning > critical:
        reader.fail(f"{warning_key} ({warning:g}) must not be above {critical_key} ({critical:g})")
    return warning, critical
