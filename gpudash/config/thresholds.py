"""thresholds.yaml: every number a person tunes (colour steps, alert levels, windows, `for:` durations,
Alertmanager timings), as typed immutable dataclasses, and its parsing.

Every error names the file, the key path and what was expected, e.g.
``thresholds.yaml: memory.warning_ratio: expected a number between 0 and 1, got 'high'``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpudash.config.durations import Duration
from gpudash.config.fields import FieldReader
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


@dataclass(frozen=True)
class TemperatureAlert:
    window: Duration
    for_: Duration


@dataclass(frozen=True)
class ThrottlingAlert:
    window: Duration
    for_: Duration


@dataclass(frozen=True)
class MemoryPressureAlert:
    growth_window: Duration
    for_: Duration


@dataclass(frozen=True)
class MemoryLeakAlert:
    window: Duration
    horizon: Duration
    for_: Duration


@dataclass(frozen=True)
class JobStalledAlert:
    window: Duration
    util_below_percent: float
    memory_above_ratio: float
    for_: Duration


@dataclass(frozen=True)
class DataLoaderAlert:
    window: Duration
    util_below_percent: float
    cpu_load_ratio: float
    for_: Duration


@dataclass(frozen=True)
class XidAlert:
    window: Duration
    overrides: tuple[tuple[int, str], ...] = ()  # (code, action): a site's departures from the XID table

    @property
    def table(self) -> dict[int, XidClass]:
        """gpudash/health/xid_catalog.csv with the site's overrides applied."""
        return with_overrides(XID_TABLE, dict(self.overrides))


@dataclass(frozen=True)
class MemoryErrorsAlert:
    window: Duration  # an uncorrectable ECC error or remapped row within this window fires (and keeps firing)
    pending_for: Duration  # a row remap pending this long fires


@dataclass(frozen=True)
class NVLinkAlert:
    window: Duration  # error counters' increase and rate are taken over this window
    crc_per_second_critical: float  # a CRC error rate at or above this is critical (DCGM's health check: 100/s)
    for_: Duration


@dataclass(frozen=True)
class FellOffBusAlert:
    for_: Duration  # a GPU reported down, or missing from its node's expected count, this long


@dataclass(frozen=True)
class ExporterDownAlert:
    for_: Duration
    lookback: Duration  # a GPU seen within this long that reports nothing now has "stopped reporting"


@dataclass(frozen=True)
class JobStragglerAlert:
    min_gpus: int  # jobs with fewer GPUs have no meaningful median
    busy_above_percent: float  # the job's median utilization must be above this
    clock_below_ratio: float  # SM clock this far below the job's median clock
    activity_points: float  # SM activity (or utilization) this many points away from the job's median
    window: Duration
    for_: Duration


@dataclass(frozen=True)
class AllocatedIdleAlert:
    util_below_percent: float  # a job's GPU under this is held idle (also the fleet's "GPU-hours idle")
    window: Duration
    for_: Duration


@dataclass(frozen=True)
class Alerts:
    temperature: TemperatureAlert
    throttling: ThrottlingAlert
    memory_pressure: MemoryPressureAlert
    memory_leak: MemoryLeakAlert
    job_stalled: JobStalledAlert
    data_loader: DataLoaderAlert
    xid: XidAlert
    exporter_down: ExporterDownAlert
    job_straggler: JobStragglerAlert
    allocated_idle: AllocatedIdleAlert
    memory_errors: MemoryErrorsAlert
    nvlink: NVLinkAlert
    fell_off_bus: FellOffBusAlert


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
    )
    dash.done()

    alerts = _parse_alerts(top.section("alerts"))
    am = top.section("alertmanager")
    timings = AlertmanagerTimings(_timing(am.section("critical")), _timing(am.section("digest")))
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
    def sub(name: str) -> FieldReader:
        return alerts.section(name)

    r = sub("temperature")
    temperature = TemperatureAlert(r.duration("window"), r.duration("for"))
    r.done()
    r = sub("throttling")
    throttling = ThrottlingAlert(r.duration("window"), r.duration("for"))
    r.done()
    r = sub("memory_pressure")
    pressure = MemoryPressureAlert(r.duration("growth_window"), r.duration("for"))
    r.done()
    r = sub("memory_leak")
    leak = MemoryLeakAlert(r.duration("window"), r.duration("horizon"), r.duration("for"))
    r.done()
    r = sub("job_stalled")
    stalled = JobStalledAlert(
        r.duration("window"), r.number("util_below_percent", 0, 100), r.ratio("memory_above_ratio"),
        r.duration("for"),
    )
    r.done()
    r = sub("data_loader")
    loader = DataLoaderAlert(
        r.duration("window"), r.number("util_below_percent", 0, 100), r.number("cpu_load_ratio", 0, 10),
        r.duration("for"),
    )
    r.done()
    r = sub("xid")
    if r.has("critical_codes"):
        r.fail("is gone: each XID's severity and action now come from the XID table "
               "(gpudash/health/xid_catalog.csv, docs/alerts.md#xid-classes); remove critical_codes and "
               "tune single codes with alerts.xid.overrides (code: action)", "critical_codes")
    xid = XidAlert(r.duration("window"), _xid_overrides(r))
    r.done()
    r = sub("exporter_down")
    down = ExporterDownAlert(r.duration("for"), r.duration("lookback"))
    if down.lookback <= down.for_:
        r.fail(f"lookback ({down.lookback}) must be above for ({down.for_}), or a silent GPU never fires")
    r.done()
    r = sub("job_straggler")
    straggler = JobStragglerAlert(
        r.integer("min_gpus", 2, 1 << 20), r.number("busy_above_percent", 0, 100),
        r.number("clock_below_ratio", 0.01, 0.99), r.number("activity_points", 1, 100),
        r.duration("window"), r.duration("for"),
    )
    r.done()
    r = sub("allocated_idle")
    allocated_idle = AllocatedIdleAlert(r.number("util_below_percent", 0, 100), r.duration("window"),
                                        r.duration("for"))
    r.done()
    r = sub("memory_errors")
    memory_errors = MemoryErrorsAlert(r.duration("window"), r.duration("pending_for"))
    r.done()
    r = sub("nvlink")
    nvlink = NVLinkAlert(r.duration("window"), r.number("crc_per_second_critical", 0.001, 1e9), r.duration("for"))
    r.done()
    r = sub("fell_off_bus")
    fell_off_bus = FellOffBusAlert(r.duration("for"))
    r.done()
    alerts.done()
    return Alerts(temperature, throttling, pressure, leak, stalled, loader, xid, down, straggler, allocated_idle,
                  memory_errors, nvlink, fell_off_bus)


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
