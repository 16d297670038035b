"""The site config (gpudash.yaml): metric profile, site identity, Grafana folder and data source, scrape
job, clusters and their targets, Alertmanager receivers (gpudash.config.receivers) and the other alerting
sections (gpudash.config.site_alerting); as typed immutable dataclasses, and its parsing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from gpudash.catalog import DCGM, HPC_JOB_LABEL, PROFILES
from gpudash.config.durations import Duration, parse_duration
from gpudash.config.fields import FieldReader
from gpudash.config.kubernetes import KubeSite, parse_kubernetes
from gpudash.config.receivers import Receiver, parse_receivers, unique
from gpudash.config.site_alerting import Alerting, label_name_problem, parse_alerting


@dataclass(frozen=True)
class ScrapeTarget:
    address: str
    rack: str


@dataclass(frozen=True)
class Cluster:
    name: str
    targets: tuple[ScrapeTarget, ...]


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
    grafana_schema: str = "auto"  # the dashboard schema pushed: v1, v2 or auto (v2 on 13+); gpudash.sync.schema
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
    # The gpudash_job_info label `gpudash report` groups GPU-hours by: account, user or partition on Slurm;
    # namespace or a published pod label (a queue, an owner) on Kubernetes; the job label itself works too.
    team_label: str = "account"
    clusters: tuple[Cluster, ...] = (Cluster("demo", (ScrapeTarget("127.0.0.1:9400", "rack-1"),)),)
    receivers: tuple[Receiver, ...] = (Receiver("default", "webhook", (("url", "http://127.0.0.1:9099/alerts"),)),)
    # Where alerts with action="rma" also go (a ticket queue); empty: they follow severity routing only.
    rma_receivers: tuple[Receiver, ...] = ()
    kubernetes: KubeSite = field(default_factory=KubeSite)  # the Prometheus Operator resources
    # job owners, the Watchdog's heartbeat, nodes under maintenance, racks (gpudash.config.site_alerting)
    alerting: Alerting = field(default_factory=Alerting)

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


def _parse_clusters(top: FieldReader) -> tuple[Cluster, ...]:
    clusters: list[Cluster] = []
    names: dict[str, str] = {}
    addresses: dict[str, str] = {}
    for _, c in top.items("clusters"):
        targets = []
        for _, t in c.items("targets"):
            address = t.host_port("address")
            unique(t, "address", address, addresses, "target")
            targets.append(ScrapeTarget(address, t.string("rack", "rack-1")))
            t.done()
        if not targets:
            c.fail("expected at least one target", "targets")
        name = c.string("name")
        unique(c, "name", name, names, "cluster")
        clusters.append(Cluster(name, tuple(targets)))
        c.done()
    return tuple(clusters)


GRAFANA_SCHEMAS = ("v1", "v2", "auto")


def parse_site(source: str, data: Any) -> Site:
    top = FieldReader(source, data if data is not None else {})
    defaults = Site()
    grafana = top.section("grafana", required=False)
    scrape = top.section("scrape", required=False)
    jobs = top.section("jobs", required=False)
    clusters = _parse_clusters(top)
    receivers = parse_receivers(top)
    rma_receivers = parse_receivers(top, "rma_receivers")
    site_id = top.string("site_id") if top.has("site_id") else ""
    if site_id and not SITE_ID.fullmatch(site_id):
        top.fail(f"expected 1 to 30 of a-z, 0-9 and '-', starting with a letter or digit, got {site_id!r}", "site_id")
    folder_uid = grafana.grafana_uid("folder_uid") if grafana.has("folder_uid") else ""
    site = Site(
        profile=top.string("profile", defaults.profile, tuple(PROFILES)),
        site_id=site_id,
        grafana_folder=grafana.string("folder", defaults.grafana_folder),
        grafana_folder_uid=folder_uid,
        grafana_schema=grafana.string("schema", defaults.grafana_schema, GRAFANA_SCHEMAS),
        datasource_uid=grafana.grafana_uid("datasource_uid", defaults.datasource_uid),
        datasource_name=grafana.string("datasource_name", defaults.datasource_name),
        runbook_base_url=top.url("runbook_base_url") if top.has("runbook_base_url") else "",
        scrape_job=scrape.string("job", defaults.scrape_job),
        scrape_interval=scrape.duration("interval", defaults.scrape_interval.text),
        scrape_timeout=scrape.duration("timeout", defaults.scrape_timeout.text),
        node_job=scrape.string("node_job", defaults.node_job),
        job_label=jobs.checked("label", jobs.string("label", defaults.job_label), label_name_problem),
        team_label=jobs.checked("team", jobs.string("team", defaults.team_label), label_name_problem),
        clusters=clusters or defaults.clusters,
        receivers=receivers or defaults.receivers,
        rma_receivers=rma_receivers,
        kubernetes=parse_kubernetes(top.section("kubernetes", required=False)),
        alerting=parse_alerting(top),
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
