"""The scrape config snippet for the GPU exporters, with cluster and rack labels from the site config."""

from __future__ import annotations

from typing import Any

from gpudash.config.loading import Settings


def scrape_config(settings: Settings) -> dict[str, Any]:
    """`scrape_configs` with one job; one static group per (cluster, rack), in site order."""
    site = settings.site
    groups: dict[tuple[str, str], list[str]] = {}
    for cluster in site.clusters:
        for target in cluster.targets:
            groups.setdefault((cluster.name, target.rack), []).append(target.address)
    static = [
        {"targets": targets, "labels": {"cluster": cluster, "rack": rack}}
        for (cluster, rack), targets in groups.items()
    ]
    job = {
        "job_name": site.scrape_job,
        "scrape_interval": str(site.scrape_interval),
        "scrape_timeout": str(site.scrape_timeout),
        "static_configs": static,
    }
    return {"scrape_configs": [job]}
