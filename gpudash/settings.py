"""thresholds.yaml and the optional site config (gpudash.yaml), loaded once into typed immutable settings.

Every error names the file, the key path and what was expected, e.g.
``thresholds.yaml: memory.warning_ratio: expected a number between 0 and 1, got 'high'``.
Loading happens before anything is written, so a bad file never leaves half-written output.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpudash.errors import ConfigError

DEFAULT_THRESHOLDS = Path("thresholds.yaml")
DEFAULT_SITE = Path("gpudash.yaml")
PROFILES = ("dcgm", "nvidia_smi")

_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+)s)?$")
_UNIT_SECONDS = (86400, 3600, 60, 1)


@dataclass(frozen=True, order=True)
class Duration:
    """A positive Prometheus duration; `str()` gives the text PromQL and rule files take."""

    seconds: int
    text: str = field(compare=False)

    def __str__(self) -> str:
        return self.text


def parse_duration(text: str) -> Duration:
    """Parse `30s`, `5m`, `1h30m`, `1d`; raise ValueError for anything else (negatives, zero, ms)."""
    match = _DURATION.match(text.strip())
    if not text.strip() or not match or not any(match.groups()):
        raise ValueError(text)
    seconds = sum(int(g) * unit for g, unit in zip(match.groups(), _UNIT_SECONDS, strict=True) if g)
    if seconds <= 0:
        raise ValueError(text)
    return Duration(seconds, text.strip())


class _Reader:
    """Walks one YAML mapping, checking types and remembering which keys were used."""

    def __init__(self, source: str, data: Any, path: str = "") -> None:
        self.source = source
        self.path = path
        if not isinstance(data, dict):
            self.fail(f"expected a mapping, got {_show(data)}")
        self.data: dict[str, Any] = data
        self.used: set[str] = set()

    def where(self, key: str | None = None) -> str:
        parts = [p for p in (self.path, key) if p]
        return ".".join(parts) or "(top level)"

    def fail(self, message: str, key: str | None = None) -> None:
        raise ConfigError(f"{self.source}: {self.where(key)}: {message}")

    def has(self, key: str) -> bool:
        return key in self.data

    def _get(self, key: str, default: Any) -> Any:
        self.used.add(key)
        if key not in self.data:
            if default is _REQUIRED:
                self.fail("is required but missing", key)
            return default
        return self.data[key]

    def section(self, key: str, required: bool = True) -> _Reader:
        value = self._get(key, _REQUIRED if required else {})
        return _Reader(self.source, value, self.where(key))

    def number(self, key: str, lo: float | None = None, hi: float | None = None, default: Any = None) -> float:
        value = self._get(key, _REQUIRED if default is None else default)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(f"expected {_range_text(lo, hi)}, got {_show(value)}", key)
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            self.fail(f"expected {_range_text(lo, hi)}, got {value}", key)
        return float(value)

    def ratio(self, key: str, default: Any = None) -> float:
        return self.number(key, 0.0, 1.0, default)

    def integer(self, key: str, lo: int = 0, hi: int | None = None, default: Any = None) -> int:
        value = self._get(key, _REQUIRED if default is None else default)
        if isinstance(value, bool) or not isinstance(value, int):
            bound = f" from {lo}" + (f" to {hi}" if hi is not None else "")
            self.fail(f"expected a whole number{bound}, got {_show(value)}", key)
        if value < lo or (hi is not None and value > hi):
            self.fail(f"expected a whole number from {lo}" + (f" to {hi}" if hi else "") + f", got {value}", key)
        return int(value)

    def duration(self, key: str, default: str | None = None) -> Duration:
        value = self._get(key, _REQUIRED if default is None else default)
        if not isinstance(value, str):
            self.fail(f"expected a positive duration such as 5m or 1h, got {_show(value)}", key)
        try:
            return parse_duration(value)
        except ValueError:
            self.fail(f"expected a positive duration such as 5m or 1h, got {value!r}", key)
            raise  # unreachable: fail() raises

    def string(self, key: str, default: str | None = None, choices: tuple[str, ...] = ()) -> str:
        value = self._get(key, _REQUIRED if default is None else default)
        if not isinstance(value, str) or not value:
            self.fail(f"expected a non-empty string, got {_show(value)}", key)
        if choices and value not in choices:
            self.fail(f"expected one of {', '.join(choices)}, got {value!r}", key)
        return str(value)

    def int_list(self, key: str, lo: int = 0, hi: int = 1 << 31) -> tuple[int, ...]:
        value = self._get(key, _REQUIRED)
        if not isinstance(value, list) or not value:
            self.fail(f"expected a non-empty list of whole numbers, got {_show(value)}", key)
        for item in value:
            if isinstance(item, bool) or not isinstance(item, int) or not lo <= item <= hi:
                self.fail(f"expected whole numbers from {lo} to {hi}, got {_show(item)}", key)
        return tuple(sorted(set(value)))

    def items(self, key: str) -> Iterator[tuple[int, _Reader]]:
        value = self._get(key, [])
        if not isinstance(value, list):
            self.fail(f"expected a list, got {_show(value)}", key)
        for index, item in enumerate(value):
            yield index, _Reader(self.source, item, f"{self.where(key)}[{index}]")

    def raw(self, key: str, default: Any = None) -> Any:
        return self._get(key, default)

    def done(self) -> None:
        """Reject keys nobody asked for: a typo must not silently fall back to a default."""
        unknown = sorted(set(self.data) - self.used, key=str)
        if unknown:
            known = ", ".join(sorted(self.used))
            self.fail(f"unknown key {unknown[0]!r} (known keys: {known})", None)


_REQUIRED = object()


def _range_text(lo: float | None, hi: float | None) -> str:
    if lo == 0.0 and hi == 1.0:
        return "a number between 0 and 1"
    if lo is not None and hi is not None:
        return f"a number from {lo:g} to {hi:g}"
    if lo is not None:
        return f"a number of at least {lo:g}"
    return "a number"


def _show(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value)


def _levels(reader: _Reader, warning_key: str, critical_key: str, lo: float, hi: float) -> tuple[float, float]:
    warning = reader.number(warning_key, lo, hi)
    critical = reader.number(critical_key, lo, hi)
    if warning > critical:
        reader.fail(f"{warning_key} ({warning:g}) must not be above {critical_key} ({critical:g})")
    return warning, critical


# --------------------------------------------------------------------------------------------- thresholds


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
class Alerts:
    temperature: TemperatureAlert
    throttling: ThrottlingAlert
    memory_pressure: MemoryPressureAlert
    memory_leak: MemoryLeakAlert
    job_stalled: JobStalledAlert
    data_loader: DataLoaderAlert
    xid: XidAlert
    exporter_down: ExporterDownAlert


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


def _parse_thresholds(source: str, data: Any) -> Thresholds:
    top = _Reader(source, data)

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


def _parse_alerts(alerts: _Reader) -> Alerts:
    def sub(name: str) -> _Reader:
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
    alerts.done()
    return Alerts(temperature, throttling, pressure, leak, stalled, loader, xid, down)


def _timing(r: _Reader) -> NotificationTiming:
    timing = NotificationTiming(r.duration("group_wait"), r.duration("group_interval"), r.duration("repeat_interval"))
    # Alertmanager resends only on a group_interval tick: a shorter repeat_interval would not mean what it says.
    if timing.repeat_interval < timing.group_interval:
        r.fail(f"repeat_interval ({timing.repeat_interval}) must not be below group_interval "
               f"({timing.group_interval})")
    r.done()
    return timing


# --------------------------------------------------------------------------------------------- site


@dataclass(frozen=True)
class ScrapeTarget:
    address: str
    rack: str


@dataclass(frozen=True)
class Cluster:
    name: str
    targets: tuple[ScrapeTarget, ...]


@dataclass(frozen=True)
class Receiver:
    """An Alertmanager receiver. Secrets are named by file or environment variable, never held as text."""

    name: str
    kind: str  # webhook | slack | email
    options: tuple[tuple[str, str], ...]

    def option(self, key: str, default: str = "") -> str:
        return dict(self.options).get(key, default)


SITE_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,29}$")


def derived_site_id(clusters: tuple[Cluster, ...]) -> str:
    """A stable id from the clusters: their names as a slug, then 6 hex of a hash of (name, address) pairs."""
    slug = re.sub(r"[^a-z0-9-]+", "-", "-".join(c.name for c in clusters).lower())[:20].strip("-")
    pairs = sorted((c.name, t.address) for c in clusters for t in c.targets)
    digest = hashlib.sha256(json.dumps(pairs).encode("utf-8")).hexdigest()[:6]
    return f"{slug or 'site'}-{digest}"


@dataclass(frozen=True)
class Site:
    """The site config. An empty `site_id` or `grafana_folder_uid` is derived from the clusters."""

    profile: str = "dcgm"
    site_id: str = ""
    grafana_folder: str = "GPU"
    grafana_folder_uid: str = ""
    datasource_uid: str = "gpudash-prometheus"
    datasource_name: str = "Prometheus (gpudash)"
    runbook_base_url: str = "https://github.com/gpudash/gpudash/blob/main/docs/alerts.md"
    scrape_job: str = "gpu-exporter"
    scrape_interval: Duration = field(default_factory=lambda: parse_duration("15s"))
    scrape_timeout: Duration = field(default_factory=lambda: parse_duration("10s"))
    node_job: str = "node"
    clusters: tuple[Cluster, ...] = (Cluster("demo", (ScrapeTarget("127.0.0.1:9400", "rack-1"),)),)
    receivers: tuple[Receiver, ...] = (Receiver("default", "webhook", (("url", "http://127.0.0.1:9099/alerts"),)),)

    def __post_init__(self) -> None:
        # Frozen: the derived values are set once here, so Site() and a parsed site agree.
        if not self.site_id:
            object.__setattr__(self, "site_id", derived_site_id(self.clusters))
        if not self.grafana_folder_uid:
            object.__setattr__(self, "grafana_folder_uid", f"gpudash-{self.site_id}"[:40])


_RECEIVER_OPTIONS = {
    "webhook": ("url", "url_file", "url_env"),
    "slack": ("api_url_file", "api_url_env", "channel"),
    "email": ("to", "from", "smarthost", "auth_username", "auth_password_file", "auth_password_env"),
}


def _parse_site(source: str, data: Any) -> Site:
    top = _Reader(source, data if data is not None else {})
    defaults = Site()
    grafana = top.section("grafana", required=False)
    scrape = top.section("scrape", required=False)
    clusters = []
    for _, c in top.items("clusters"):
        targets = []
        for _, t in c.items("targets"):
            targets.append(ScrapeTarget(t.string("address"), t.string("rack", "rack-1")))
            t.done()
        if not targets:
            c.fail("expected at least one target", "targets")
        clusters.append(Cluster(c.string("name"), tuple(targets)))
        c.done()
    receivers = []
    for _, r in top.items("receivers"):
        kind = r.string("type", choices=tuple(_RECEIVER_OPTIONS))
        name = r.string("name")
        options = []
        for key in _RECEIVER_OPTIONS[kind]:
            value = r.raw(key)
            if value is not None:
                if not isinstance(value, str):
                    r.fail(f"expected a string, got {_show(value)}", key)
                options.append((key, value))
        if kind == "slack" and not {"api_url_file", "api_url_env"} & {k for k, _ in options}:
            r.fail("a slack receiver needs api_url_file or api_url_env (the webhook URL is a secret)")
        r.done()
        receivers.append(Receiver(name, kind, tuple(options)))
    site_id = top.string("site_id") if top.has("site_id") else ""
    if site_id and not SITE_ID.match(site_id):
        top.fail(f"expected 1 to 30 of a-z, 0-9 and '-', starting with a letter or digit, got {site_id!r}", "site_id")
    site = Site(
        profile=top.string("profile", defaults.profile, PROFILES),
        site_id=site_id,
        grafana_folder=grafana.string("folder", defaults.grafana_folder),
        grafana_folder_uid=grafana.string("folder_uid") if grafana.has("folder_uid") else "",
        datasource_uid=grafana.string("datasource_uid", defaults.datasource_uid),
        datasource_name=grafana.string("datasource_name", defaults.datasource_name),
        runbook_base_url=top.string("runbook_base_url", defaults.runbook_base_url),
        scrape_job=scrape.string("job", defaults.scrape_job),
        scrape_interval=scrape.duration("interval", defaults.scrape_interval.text),
        scrape_timeout=scrape.duration("timeout", defaults.scrape_timeout.text),
        node_job=scrape.string("node_job", defaults.node_job),
        clusters=tuple(clusters) or defaults.clusters,
        receivers=tuple(receivers) or defaults.receivers,
    )
    if site.scrape_timeout > site.scrape_interval:
        scrape.fail(f"timeout ({site.scrape_timeout}) must not be above interval ({site.scrape_interval})")
    grafana.done()
    scrape.done()
    top.done()
    return site


# --------------------------------------------------------------------------------------------- loading


@dataclass(frozen=True)
class Settings:
    thresholds: Thresholds
    site: Site
    thresholds_path: Path


def _read_yaml(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found (pass --thresholds PATH or run from the repository root)") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}: {where}invalid YAML: {problem}") from None


def load_thresholds(path: Path) -> Thresholds:
    data = _read_yaml(path)
    if data is None:
        raise ConfigError(f"{path}: the file is empty")
    return _parse_thresholds(str(path), data)


def load_site(path: Path | None) -> Site:
    if path is None:
        return Site()
    return _parse_site(str(path), _read_yaml(path))


def load_settings(thresholds: Path | None = None, site: Path | None = None) -> Settings:
    """Load thresholds.yaml and the site config (gpudash.yaml when present), or raise ConfigError.

    The environment may point elsewhere: GPUDASH_THRESHOLDS and GPUDASH_SITE.
    """
    thresholds_path = thresholds or Path(os.environ.get("GPUDASH_THRESHOLDS", DEFAULT_THRESHOLDS))
    site_path = site or (Path(os.environ["GPUDASH_SITE"]) if os.environ.get("GPUDASH_SITE") else None)
    if site_path is None and DEFAULT_SITE.exists():
        site_path = DEFAULT_SITE
    return Settings(load_thresholds(thresholds_path), load_site(site_path), thresholds_path)
