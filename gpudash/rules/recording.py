"""The recording rule file, rendered from the registry in gpudash.promql.builders that the dashboards read too."""

from __future__ import annotations

from gpudash.catalog import profile as catalog_profile
from gpudash.config.loading import Settings
from gpudash.escape import yaml_scalar
from gpudash.promql.builders import recording_rules
from gpudash.rules.yamltext import dump

GROUP_NAME = "gpudash-gpu-recording"


def recording_rule_file(settings: Settings) -> str:
    """The rule file text; each rule is preceded by a comment with its help line."""
    rules = recording_rules(catalog_profile(settings.site.profile), settings.thresholds, settings.site.job_label)
    lines = ["groups:", f"  - name: {yaml_scalar(GROUP_NAME)}", "    rules:"]
    for rec, expr in rules:
        lines.append(f"      # {rec.help}")
        item = dump([{"record": rec.record, "expr": expr}])
        lines.extend("      " + line if line else line for line in item.splitlines())
    return "\n".join(lines) + "\n"
