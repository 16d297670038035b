"""The scrape config snippet for the GPU exporters, with cluster and rack labels from the site config, and the
`alert_relabel_configs` that give every alert Prometheus sends the `rack` of its node.

The alert rules keep only the labels that name a GPU or a job (`max by (cluster, instance, gpu)`), so the
scrape target's `rack` does not reach the alert; Alertmanager groups pages by rack, so Prometheus adds it
to each alert on its way out, from the same map: the rack of each scrape target (matched on cluster and
instance) and the `racks:` of gpudash.yaml (node names, for targets found by Kubernetes or file_sd, whose
instance is the node's name or name:port). An alert of an instance no entry names has no `rack`.
"""

from __future__ import annotations

from typing import Any

from gpudash.config.loading import Settings
from gpudash.escape import re2_any

_PORT = "(?::[0-9]+)?"


def _racks_of_targets(settings: Settings) -> dict[tuple[str, str], list[str]]:
    """The scrape targets' addresses by (cluster, rack), in site order."""
    groups: dict[tuple[str, str], list[str]] = {}
    for cluster in settings.site.clusters:
        for target in cluster.targets:
            groups.setdefault((cluster.name, target.rack), []).append(target.address)
    return groups


def alert_relabel_configs(settings: Settings) -> list[dict[str, Any]]:
    """One `replace` of `rack` per rack of the site config; a later one wins, so `racks:` overrides a target."""
    relabel = [
        {"source_labels": ["cluster", "instance"], "separator": ";",
         "regex": f"{re2_any([cluster])};({re2_any(addresses)})", "target_label": "rack", "replacement": rack}
        for (cluster, rack), addresses in _racks_of_targets(settings).items()
    ]
    relabel += [
        {"source_labels": ["instance"], "regex": f"({re2_any(rack.nodes)}){_PORT}", "target_label": "rack",
         "replacement": rack.name}
        for rack in settings.site.alerting.racks
    ]
    return relabel


def scrape_config(settings: Settings) -> dict[str, Any]:
    """`scrape_configs` with one job, one static group per (cluster, rack), in site order; and `alerting`'s
    `alert_relabel_configs` (merge both into prometheus.yml)."""
    site = settings.site
    static = [
        {"targets": targets, "labels": {"cluster": cluster, "rack": rack}}
        for (cluster, rack), targets in _racks_of_targets(settings).items()
    ]
    job = {
        "job_name": site.scrape_job,
        "scrape_interval": str(site.scrape_interval),
        "scrape_timeout": str(site.scrape_timeout),
        "static_configs": static,
    }
    return {"scrape_configs": [job], "alerting": {"alert_relabel_configs": alert_relabel_configs(settings)}}
