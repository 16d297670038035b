"""The recording rule file, rendered from the registry in gpudash.promql.recordings that the dashboards read too."""

from __future__ import annotations

from gpudash.config.loading import Settings
from gpudash.escape import yaml_scalar
from gpudash.promql.for_settings import recording_rules
from gpudash.yamltext import dump

GROUP_NAME = "gpudash-gpu-recording"


def recording_rule_file(settings: Settings) -> str:
    """The rule file text; each rule is preceded by a comment with its help line."""
    site = settings.site
    rules = recording_rules(settings)
    # The interval is explicit: the GPU-seconds and XID-event recordings are built for it, whatever
    # evaluation_interval the Prometheus that loads them has.
    lines = ["groups:", f"  - name: {yaml_scalar(GROUP_NAME)}", f"    interval: {site.scrape_interval}", "    rules:"]
    for rec, expr in rules:
        lines.append(f"      # {rec.help}")
        item = dump([{"record": rec.record, "expr": expr}])
        lines.extend("      " + line if line else line for line in item.splitlines())
    return "\n".join(lines) + "\n"
