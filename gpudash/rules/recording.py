"""The recording rule file, rendered from the registry in gpudash.promql.recordings that the dashboards read too.

The rules evaluated at the site's scrape interval come in four groups (`Recording.group`): the cluster, node and
job aggregates the dashboards draw, the per-GPU states the job alerts read, the per-GPU health states, and the
fabric's. Prometheus evaluates groups side by side, so what must fit in the interval is each group's evaluation,
not the sum of them. The hourly ones (`Recording.hourly`, the health ledger's rises) come last, in a group of
their own evaluated once an hour, so they are not read again at every rule interval only to write a point once
an hour.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpudash.config.durations import Duration
from gpudash.config.loading import Settings
from gpudash.escape import yaml_scalar
from gpudash.promql.for_settings import recording_rules
from gpudash.promql.query import AGGREGATES, FABRIC, HEALTH_STATES, HOURLY, JOB_STATES, Recording
from gpudash.yamltext import dump

GROUP_NAME = "gpudash-gpu-recording"
LEDGER_GROUP_NAME = "gpudash-gpu-ledger"
# Each rule-interval group's name, in the file's order.
GROUP_NAMES = {AGGREGATES: GROUP_NAME, JOB_STATES: "gpudash-gpu-job-states",
               HEALTH_STATES: "gpudash-gpu-health-states", FABRIC: "gpudash-fabric-recording"}
# Every group the recording file may hold, in its order: the rule-interval groups, then the hourly one.
ALL_GROUP_NAMES = (*GROUP_NAMES.values(), LEDGER_GROUP_NAME)


@dataclass(frozen=True)
class RecordingGroup:
    name: str
    interval: Duration
    rules: tuple[tuple[Recording, str], ...]


def recording_groups(settings: Settings) -> list[RecordingGroup]:
    """The rule file's groups, each with its rules and their expressions; a group with no rule is left out."""
    rules = recording_rules(settings)
    every = settings.site.scrape_interval
    groups = [RecordingGroup(name, every, tuple(r for r in rules if not r[0].hourly and r[0].group == part))
              for part, name in GROUP_NAMES.items()]
    groups.append(RecordingGroup(LEDGER_GROUP_NAME, HOURLY, tuple(r for r in rules if r[0].hourly)))
    return [group for group in groups if group.rules]


def recording_rule_file(settings: Settings) -> str:
    """The rule file text; each rule is preceded by a comment with its help line."""
    lines = ["groups:"]
    for group in recording_groups(settings):
        # The interval is explicit: the GPU-seconds and XID-event recordings are built for the scrape interval,
        # the hourly ones for an hour, whatever evaluation_interval the Prometheus that loads them has.
        lines += [f"  - name: {yaml_scalar(group.name)}", f"    interval: {group.interval}", "    rules:"]
        for rec, expr in group.rules:
            lines.append(f"      # {rec.help}")
            item = dump([{"record": rec.record, "expr": expr}])
            lines.extend("      " + line if line else line for line in item.splitlines())
    return "\n".join(lines) + "\n"
