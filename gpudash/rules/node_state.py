"""Alerts about the alerting, not about a GPU: `Watchdog` (always firing, a heartbeat through the whole path)
and `GPUNodeDrained` (a node taken out of service, whose GPU alerts Alertmanager then holds back).

GPUNodeDrained has one rule per source of "out of service", each carrying the GPU exporter's `cluster` and
`instance` of that node (what Alertmanager's inhibition compares) and a `source` label:

- `slurm`: `gpudash_slurm_node_drained{node} == 1`, written for node_exporter's textfile collector by
  deploy/slurm/gpudash-slurm-node-state.sh (Slurm's DRAIN and MAINT flags);
- `kubernetes`: kube-state-metrics' `kube_node_spec_unschedulable{node} == 1` (a cordoned node);
- `site`: the nodes listed under `maintenance:` in gpudash.yaml.

Each also carries `host`, the GPU exporter's `instance` without its port: the node's InfiniBand port alerts,
which carry node_exporter's `instance`, carry the same `host` (`fabric_recordings.HOST`), and Alertmanager holds
them back on cluster and host.

A node is named there as Slurm or Kubernetes names it; the GPU exporter's `instance` is that name, or
host:port of a scrape target. The join takes the GPU exporters' `up` series, whose instance without its port
(or its short host name, before the first dot) is the node's name.
"""

from __future__ import annotations

from collections.abc import Callable

from gpudash.escape import promql_matcher, re2_any
from gpudash.promql.fabric_recordings import HOST_FROM_INSTANCE
from gpudash.rules.alert_spec import AlertContext, AlertSpec, RuleSpec
from gpudash.rules.expressions import UP

WATCHDOG = "Watchdog"
NODE_DRAINED = "GPUNodeDrained"

SLURM_NODE_DRAINED = "gpudash_slurm_node_drained"  # deploy/slurm/gpudash-slurm-node-state.sh writes it
KUBE_NODE_UNSCHEDULABLE = "kube_node_spec_unschedulable"  # kube-state-metrics, per node

# The node's name in the GPU exporter's instance: all of it without the port, or its short host name.
_NODE_FROM_INSTANCE = ('"node", "$1", "instance", "(.+?)(?::[0-9]+)?"',
                       '"node", "$1", "instance", "([^.:\\\\[]+)[^:]*(?::[0-9]+)?"')
_PORT = "(?::[0-9]+)?"


def _on_node(c: AlertContext, per_node: str) -> str:
    """The GPU exporter targets (cluster, instance) of the nodes `per_node` (one series per `node`) names."""
    named = "\n  or\n  ".join(f"label_replace({c.x.up()}, {args})" for args in _NODE_FROM_INSTANCE)
    return (f"max by (cluster, instance) (\n  (\n  {named}\n  )\n"
            f"  * on (node) group_left ()\n  max by (node) ({per_node})\n)")


def slurm_drained(c: AlertContext) -> str:
    return _on_node(c, f"{SLURM_NODE_DRAINED} == 1")


def kubernetes_cordoned(c: AlertContext) -> str:
    return _on_node(c, f"{KUBE_NODE_UNSCHEDULABLE} == 1")


def in_maintenance(c: AlertContext) -> str | None:
    """The GPU exporter targets of the nodes under `maintenance:`; None when it lists none."""
    nodes = c.settings.site.alerting.maintenance
    if not nodes:
        return None
    job = promql_matcher("job", "=", c.settings.site.scrape_job)
    instance = promql_matcher("instance", "=~", f"({re2_any(nodes)}){_PORT}")
    return f"max by (cluster, instance) ({UP}{{{job}, {instance}}})"


def _with_host(expr: Callable[[AlertContext], str | None]) -> Callable[[AlertContext], str | None]:
    """The drained nodes' GPU exporter targets, each labelled `host` (its instance without the port)."""
    def build(c: AlertContext) -> str | None:
        drained = expr(c)
        return None if drained is None else f"label_replace(\n{drained},\n{HOST_FROM_INSTANCE}\n)"
    return build


def _drained(source: str, expr: Callable[[AlertContext], str | None], why: str) -> RuleSpec:
    return RuleSpec(
        "info", "none", _with_host(expr),
        "Node {{{{ $labels.instance }}}} ({{{{ $labels.cluster }}}}) is out of service: its GPU alerts are held back",
        why + " Alertmanager holds back every GPU alert of {{{{ $labels.instance }}}} in cluster "
        "{{{{ $labels.cluster }}}} while this fires (inhibition on cluster and instance), and its InfiniBand port "
        "alerts (on cluster and host {{{{ $labels.host }}}}); this alert itself "
        "reaches nobody. When the node returns to service, its alerts still firing notify again.",
        for_=None, labels=(("source", source),))


WATCHDOG_ALERT = AlertSpec(WATCHDOG, "", (RuleSpec(
    "info", "none", lambda c: "vector(1)",
    "Alerting works: Prometheus evaluates the rules and Alertmanager delivers",
    "Always firing. Alertmanager sends it to the heartbeat receivers (gpudash.yaml `heartbeat_receivers`) "
    "every alertmanager.heartbeat.repeat_interval; a dead man's switch there raises the alarm when the "
    "heartbeats stop: Prometheus, its rules, Alertmanager or the path between them is down.",
    for_=None),))

NODE_DRAINED_ALERT = AlertSpec(NODE_DRAINED, "", (
    _drained("slurm", slurm_drained, f"Slurm has the node drained or in maintenance ({SLURM_NODE_DRAINED} is 1)."),
    _drained("kubernetes", kubernetes_cordoned,
             f"Kubernetes has the node cordoned ({KUBE_NODE_UNSCHEDULABLE} is 1)."),
    _drained("site", in_maintenance, "gpudash.yaml lists the node under `maintenance:`."),
))
