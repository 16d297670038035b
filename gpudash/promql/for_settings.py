"""The one way to bind the query builder to a site: its settings give the metric profile, the thresholds, the
job label and the rule interval (the scrape interval, at which the recording rules are evaluated)."""

from __future__ import annotations

from gpudash.catalog import Profile
from gpudash.catalog import profile as catalog_profile
from gpudash.config.durations import Duration
from gpudash.config.loading import Settings
from gpudash.promql.query import NO_SCOPE, PromQL, Recording, Scope
from gpudash.promql.recordings import RECORDING_BY_NAME, RECORDINGS


def promql_for(settings: Settings, scope: Scope = NO_SCOPE, *, recorded: bool = True,
               profile: Profile | None = None, rule_interval: Duration | None = None,
               rule_file: bool = False) -> PromQL:
    """The site's query builder; `profile` and `rule_interval` override the site's own."""
    site = settings.site
    return PromQL(profile or catalog_profile(site.profile), settings.thresholds, RECORDING_BY_NAME, scope,
                  recorded, site.job_label, rule_interval or site.scrape_interval, rule_file)


def recording_rules(settings: Settings, *, profile: Profile | None = None,
                    rule_interval: Duration | None = None) -> list[tuple[Recording, str]]:
    """Every recording rule the site's profile can fill, with its expression as it goes into a rule file."""
    q = promql_for(settings, recorded=False, profile=profile, rule_interval=rule_interval, rule_file=True)
    return [(rec, rec.build(q)) for rec in RECORDINGS if rec.possible(q)]
