"""The site config (gpudash.yaml): metric profile, site identity, Grafana folder and data source, scrape
job, clusters and their targets, Alertmanager receivers; as typed immutable dataclasses, and its parsing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from gpudash.catalog import DCGM, HPC_JOB_LABEL, PROFILES
from gpudash.config.durations import Duration, parse_duration
from gpudash.config.fields import FieldReader
from gpudash.config.kubernetes import KubeSite, parse_kubernetes


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


# A Prometheus label name that a site may name (not one of Prometheus' reserved `__` names).
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")

SITE_ID_TEXT = r"[a-z0-9][a-z0-9-]{0,29}"  # also how version messages name the site (gpudash.sync.local)
SITE_ID = re.compile(SITE_ID_TEXT)


@dataclass(frozen=True)
class Site:
    """The site config. `site_id` is "" while the config names none: gpudash.sync.identity settles it (and
    writes it into the config) before anything is pushed. An empty `grafana_folder_uid` is `gpudash-<site_id>`."""

    profile: str = DCGM.name
    site_id: str = ""
    grafana_folder: str = "GPU"
    grafana_folder_uid: str = ""
    datasource_uid: str = "gpudash-prometheus"
    datasource_name: str = "Prometheus (gpudash)"
    # The site's published copy of docs/alerts.md; empty: rules name the section in this repository instead.
    runbook_base_url: str = ""
    scrape_job: str = "gpu-exporter"
    scrape_interval: Duration = field(default_factory=lambda: parse_duration("15s"))
    scrape_timeout: Duration = field(default_factory=lambda: parse_duration("10s"))
    node_job: str = "node"
    # The series label that names a job: dcgm-exporter's (and gpudash's) `hpc_job` on Slurm; on Kubernetes a
    # pod label the exporter publishes (e.g. training_kubeflow_org_job_name), or `namespace`.
    job_label: str = HPC_JOB_LABEL
    clusters: tuple[Cluster, ...] = (Cluster("demo", (ScrapeTarget("127.0.0.1:9400", "rack-1"),)),)
    receivers: tuple[Receiver, ...] = (Receiver("default", "webhook", (("url", "http://127.0.0.1:9099/alerts"),)),)
    # Where alerts with action="rma" also go (a ticket queue); empty: they follow severity routing only.
    rma_receivers: tuple[Receiver, ...] = ()
    kubernetes: KubeSite = field(default_factory=KubeSite)  # the Prometheus Operator resources

    def __post_init__(self) -> None:
        # Frozen: the derived value is set once here, so Site(site_id=...) and a parsed site agree.
        if self.site_id and not self.grafana_folder_uid:
            object.__setattr__(self, "grafana_folder_uid", f"gpudash-{self.site_id}"[:40])

    def identified(self, site_id: str) -> Site:
        """This site as `site_id`, its default folder following the id; a config's own site_id never changes."""
        if self.site_id:
            if self.site_id != site_id:
                raise ValueError(f"site {self.site_id!r} cannot become {site_id!r}")
            return self
        return replace(self, site_id=site_id)


_Check = Callable[[FieldReader, str], str]
# Each receiver's options and how each is read: a secret is named by a file or an environment variable.
_RECEIVER_OPTIONS: dict[str, dict[str, _Check]] = {
    "webhook": {"url": FieldReader.url, "url_file": FieldReader.string, "url_env": FieldReader.env_name},
    "slack": {"api_url_file": FieldReader.string, "api_url_env": FieldReader.env_name, "channel": FieldReader.string},
    "email": {"to": FieldReader.string, "from": FieldReader.string, "smarthost": FieldReader.host_port,
              "auth_username": FieldReader.string, "auth_password_file": FieldReader.string,
              "auth_password_env": FieldReader.env_name},
}


def _unique(reader: FieldReader, key: str, value: str, seen: dict[str, str], what: str) -> None:
    """Fail when `value` was given before (two routes, two scrapes or two receivers for one thing)."""
    if value in seen:
        reader.fail(f"{what} {value!r} is given twice (first at {seen[value]})", key)
    seen[value] = reader.where(key)


def _parse_clusters(top: FieldReader) -> tuple[Cluster, ...]:
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


def _label_name_problem(value: str) -> str | None:
    if not LABEL_NAME.fullmatch(value) or value.startswith("__"):
        return f"expected a Prometheus label name (letters, digits, _; not starting with a digit or __), got {value!r}"
    return None


def _receiver_problem(kind: str, given: set[str]) -> str | None:
    """What a receiver of this kind lacks to be written out, or None."""
    if kind == "webhook" and not {"url", "url_file", "url_env"} & given:
        return "a webhook receiver needs url, url_file or url_env"
    if kind == "slack" and not {"api_url_file", "api_url_env"} & given:
        return "a slack receiver needs api_url_file or api_url_env (the webhook URL is a secret)"
    missing = [k for k in ("to", "from", "smarthost") if k not in given] if kind == "email" else []
    return f"an email receiver needs {', '.join(missing)}" if missing else None


def _parse_receivers(top: FieldReader, key: str = "receivers") -> tuple[Receiver, ...]:
    receivers: list[Receiver] = []
    names: dict[str, str] = {}
    for _, r in top.items(key):
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


def parse_site(source: str, data: Any) -> Site:
    top = FieldReader(source, data if data is not None else {})
    defaults = Site()
    grafana = top.section("grafana", required=False)
    scrape = top.section("scrape", required=False)
    jobs = top.section("jobs", required=False)
    clusters = _parse_clusters(top)
    receivers = _parse_receivers(top)
    rma_receivers = _parse_receivers(top, "rma_receivers")
    site_id = top.string("site_id") if top.has("site_id") else ""
    if site_id and not SITE_ID.fullmatch(site_id):
        top.fail(f"expected 1 to 30 of a-z, 0-9 and '-', starting with a letter or digit, got {site_id!r}", "site_id")
    folder_uid = grafana.grafana_uid("folder_uid") if grafana.has("folder_uid") else ""
    site = Site(
        profile=top.string("profile", defaults.profile, tuple(PROFILES)),
        site_id=site_id,
        grafana_folder=grafana.string("folder", defaults.grafana_folder),
        grafana_folder_uid=folder_uid,
        datasource_uid=grafana.grafana_uid("datasource_uid", defaults.datasource_uid),
        datasource_name=grafana.string("datasource_name", defaults.datasource_name),
        runbook_base_url=top.url("runbook_base_url") if top.has("runbook_base_url") else "",
        scrape_job=scrape.string("job", defaults.scrape_job),
        scrape_interval=scrape.duration("interval", defaults.scrape_interval.text),
        scrape_timeout=scrape.duration("timeout", defaults.scrape_timeout.text),
        node_job=scrape.string("node_job", defaults.node_job),
        job_label=jobs.checked("label", jobs.string("label", defaults.job_label), _label_name_problem),
        clusters=clusters or defaults.clusters,
        receivers=receivers or defaults.receivers,
        rma_receivers=rma_receivers,
        kubernetes=parse_kubernetes(top.section("kubernetes", required=False)),
    )
    if site.scrape_timeout > site.scrape_interval:
        scrape.fail(f"timeout ({site.scrape_timeout}) must not be above interval ({site.scrape_interval})")
    if site.node_job == site.scrape_job:
        scrape.fail(f"node_job ({site.node_job!r}) must not be the GPU exporters' job: the two are scraped apart")
    grafana.done()
    scrape.done()
    jobs.done()
    top.done()
    return site
