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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpudash.config.reader import Duration, Reader, parse_duration
from gpudash.errors import ConfigError
from gpudash.yamlfile import YamlError, parse_yaml

DEFAULT_THRESHOLDS = Path("thresholds.yaml")
DEFAULT_SITE = Path("gpudash.yaml")
PROFILES = ("dcgm", "nvidia_smi")

def _levels(reader: Reader, warning_key: str, critical_key: str, lo: float, hi: float) -> tuple[float, float]:
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
    alerts.done()
    return Alerts(temperature, throttling, pressure, leak, stalled, loader, xid, down)


def _timing(r: Reader) -> NotificationTiming:
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


_Check = Callable[[Reader, str], str]
# Each receiver's options and how each is read: a secret is named by a file or an environment variable.
_RECEIVER_OPTIONS: dict[str, dict[str, _Check]] = {
    "webhook": {"url": Reader.url, "url_file": Reader.string, "url_env": Reader.env_name},
    "slack": {"api_url_file": Reader.string, "api_url_env": Reader.env_name, "channel": Reader.string},
    "email": {"to": Reader.string, "from": Reader.string, "smarthost": Reader.host_port,
              "auth_username": Reader.string, "auth_password_file": Reader.string,
              "auth_password_env": Reader.env_name},
}


def _unique(reader: Reader, key: str, value: str, seen: dict[str, str], what: str) -> None:
    """Fail when `value` was given before (two routes, two scrapes or two receivers for one thing)."""
    if value in seen:
        reader.fail(f"{what} {value!r} is given twice (first at {seen[value]})", key)
    seen[value] = reader.where(key)


def _parse_clusters(top: Reader) -> tuple[Cluster, ...]:
    clusters: list[Cluster] = []
    names: dict[str, str] = {}
    addresses: dict[str, str] = {}
    for _, c in top.items("clusters"):
        targets = []
        for _, t in c.items("targets"):
            address = t.host_port("address")
            _unique(t, "address", address, addresses, "target")
            targets.append(ScrapeTarget(address, t.string("rack", "rack-1")))
            t.done()
        if not targets:
            c.fail("expected at least one target", "targets")
        name = c.string("name")
        _unique(c, "name", name, names, "cluster")
        clusters.append(Cluster(name, tuple(targets)))
        c.done()
    return tuple(clusters)


def _receiver_problem(kind: str, given: set[str]) -> str | None:
    """What a receiver of this kind lacks to be written out, or None."""
    if kind == "webhook" and not {"url", "url_file", "url_env"} & given:
        return "a webhook receiver needs url, url_file or url_env"
    if kind == "slack" and not {"api_url_file", "api_url_env"} & given:
        return "a slack receiver needs api_url_file or api_url_env (the webhook URL is a secret)"
    missing = [k for k in ("to", "from", "smarthost") if k not in given] if kind == "email" else []
    return f"an email receiver needs {', '.join(missing)}" if missing else None


def _parse_receivers(top: Reader) -> tuple[Receiver, ...]:
    receivers: list[Receiver] = []
    names: dict[str, str] = {}
    for _, r in top.items("receivers"):
        kind = r.string("type", choices=tuple(_RECEIVER_OPTIONS))
        name = r.string("name")
        _unique(r, "name", name, names, "receiver")
        options = tuple((key, read(r, key)) for key, read in _RECEIVER_OPTIONS[kind].items() if r.has(key))
        r.used.update(_RECEIVER_OPTIONS[kind])  # so a misspelt option's message lists them all
        problem = _receiver_problem(kind, {k for k, _ in options})
        if problem:
            r.fail(problem)
        r.done()
        receivers.append(Receiver(name, kind, options))
    return tuple(receivers)


def _parse_site(source: str, data: Any) -> Site:
    top = Reader(source, data if data is not None else {})
    defaults = Site()
    grafana = top.section("grafana", required=False)
    scrape = top.section("scrape", required=False)
    clusters = _parse_clusters(top)
    receivers = _parse_receivers(top)
    site_id = top.string("site_id") if top.has("site_id") else ""
    if site_id and not SITE_ID.fullmatch(site_id):
        top.fail(f"expected 1 to 30 of a-z, 0-9 and '-', starting with a letter or digit, got {site_id!r}", "site_id")
    folder_uid = grafana.grafana_uid("folder_uid") if grafana.has("folder_uid") else ""
    site = Site(
        profile=top.string("profile", defaults.profile, PROFILES),
        site_id=site_id,
        grafana_folder=grafana.string("folder", defaults.grafana_folder),
        grafana_folder_uid=folder_uid,
        datasource_uid=grafana.grafana_uid("datasource_uid", defaults.datasource_uid),
        datasource_name=grafana.string("datasource_name", defaults.datasource_name),
        runbook_base_url=top.url("runbook_base_url", defaults.runbook_base_url),
        scrape_job=scrape.string("job", defaults.scrape_job),
        scrape_interval=scrape.duration("interval", defaults.scrape_interval.text),
        scrape_timeout=scrape.duration("timeout", defaults.scrape_timeout.text),
        node_job=scrape.string("node_job", defaults.node_job),
        clusters=clusters or defaults.clusters,
        receivers=receivers or defaults.receivers,
    )
    if site.scrape_timeout > site.scrape_interval:
        scrape.fail(f"timeout ({site.scrape_timeout}) must not be above interval ({site.scrape_interval})")
    if site.node_job == site.scrape_job:
        scrape.fail(f"node_job ({site.node_job!r}) must not be the GPU exporters' job: the two are scraped apart")
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
        return parse_yaml(text)
    except YamlError as exc:
        raise ConfigError(f"{path}: {exc}") from None


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
