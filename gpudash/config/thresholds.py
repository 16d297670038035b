"""thresholds.yaml: every number a person tunes (colour steps, alert levels, windows, `for:` durations,
Alertmanager timings), as typed immutable dataclasses, and its parsing.

Every error names the file, the key path and what was expected, e.g.
``thresholds.yaml: memory.warning_ratio: expected a number between 0 and 1, got 'high'``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpudash.config.durations import Duration
from gpudash.config.reader import Reader


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
    gpu: Levels
    hbm: Levels


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
    critical_codes: tuple[int, ...]


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
    top = Reader(source, data)

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


def _parse_alerts(alerts: Reader) -> Alerts:
    def sub(name: str) -> Reader:
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
    xid = XidAlert(r.duration("window"), r.int_list("critical_codes", 1, 1000))
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
    alerts.done()
    return Alerts(temperature, throttling, pressure, leak, stalled, loader, xid, down, straggler, allocated_idle)


def _timing(r: Reader) -> NotificationTiming:
    timing = NotificationTiming(r.duration("group_wait"), r.duration("group_interval"), r.duration("repeat_interval"))
    # Alertmanager resends only on a group_interval tick: a shorter repeat_interval would not mean what it says.
    if timing.repeat_interval < timing.group_interval:
        r.fail(f"repeat_interval ({timing.repeat_interval}) must not be below group_interval "
               f"({timing.group_interval})")
    r.done()
    return timing


def _levels(reader: Reader, warning_key: str, critical_key: str, lo: float, hi: float) -> tuple[float, float]:
    warning = reader.number(warning_key, lo, hi)
    critical = reader.number(critical_key, lo, hi)
    if warning > critical:
        reader.fail(f"{warning_key} ({warning:g}) must not be above {critical_key} ({critical:g})")
    return warning, critical
