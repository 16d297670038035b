"""The query builder the tests judge live answers with: the repository's thresholds and a default site, with the
metric profile, the scrape interval and the job label a test's stack uses."""

from __future__ import annotations

from dataclasses import replace

from gpudash.catalog import profile
from gpudash.config.durations import parse_duration
from gpudash.config.loading import load_settings
from gpudash.promql.for_settings import promql_for
from gpudash.promql.query import PromQL
from support.paths import ROOT


def site_promql(profile_name: str = "dcgm", interval_s: int = 15, job_label: str | None = None) -> PromQL:
    settings = load_settings(ROOT / "thresholds.yaml")
    if job_label is not None:
        settings = replace(settings, site=replace(settings.site, job_label=job_label))
    return promql_for(settings, profile=profile(profile_name), rule_interval=parse_duration(f"{interval_s}s"))
