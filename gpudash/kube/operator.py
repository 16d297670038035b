"""The Prometheus Operator's resources, from the same rules and routes as the plain files.

kube-prometheus-stack runs Prometheus and Alertmanager from resources, not files: rules as `PrometheusRule`,
routes and inhibitions as `AlertmanagerConfig`, scrape targets as a `ServiceMonitor`. The rule groups here
are the plain rule files read back, so the two formats cannot hold different rules; the routes are
alertmanager.yml's, read back the same way, with each matcher written as the resource's {name, value,
matchType}. Receivers'
secrets live in one Kubernetes Secret (`kubernetes.receivers_secret`), one key per receiver and option,
never in the resources. The dashboards go alongside as ConfigMaps for Grafana's sidecar
(gpudash.kube.dashboards). Names, namespace and the labels the operator selects on come from the site
config's `kubernetes:` section (gpudash.config.kubernetes).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import yaml

from gpudash.config.kubernetes import KubeSite
from gpudash.config.loading import Settings
from gpudash.config.receivers import Receiver
from gpudash.config.site import Cluster
from gpudash.config.site_alerting import receiver_sets
from gpudash.errors import ConfigError
from gpudash.kube.dashboards import dashboard_config_maps
from gpudash.kube.resources import documents, metadata, slug
from gpudash.repository import ALERTING_FILE, ALERTMANAGER_FILE, ALERTS_FILE, RECORDING_FILE

API_V1 = "monitoring.coreos.com/v1"
API_V1ALPHA1 = "monitoring.coreos.com/v1alpha1"

OPERATOR_DIR = "kubernetes"  # beside prometheus/ and alertmanager/ in the output folder
RULES_FILE = f"{OPERATOR_DIR}/prometheus-rules.yaml"
ALERTMANAGER_CONFIG_FILE = f"{OPERATOR_DIR}/alertmanager-config.yaml"
MONITOR_FILE = OPERATOR_DIR + "/service-monitor-{cluster}.yaml"  # one per cluster: each Prometheus applies its own
DASHBOARDS_FILE = f"{OPERATOR_DIR}/grafana-dashboards.yaml"
# The sidecar provisions files, and Grafana 13's file provisioning refuses schema v2: the classic JSON goes there.
SIDECAR_NOTE = ("# ConfigMaps for Grafana's dashboard sidecar, one per dashboard, holding the classic JSON\n"
                "# (dashboards/json): Grafana 13 refuses schema v2 files there; dashboards/v2 is for /apis\n"
                "# and Git Sync.\n")

# alertmanager.yml's matcher text, as gpudash.escape.am_matcher writes it.
_MATCHER = re.compile(r'(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?P<op>=~|!~|!=|=)"(?P<value>(?:[^"\\]|\\.)*)"')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}
_TIMING = {"group_wait": "groupWait", "group_interval": "groupInterval", "repeat_interval": "repeatInterval",
           "group_by": "groupBy"}


def _rule_groups(text: str) -> list[Any]:
    groups = yaml.safe_load(text)["groups"]
    assert isinstance(groups, list)
    return groups


def prometheus_rules(kube: KubeSite, plain: Mapping[str, str]) -> list[dict[str, Any]]:
    """One PrometheusRule per plain rule file (recording rules, GPU alerts, the alerting's own), read back."""
    return [
        {"apiVersion": API_V1, "kind": "PrometheusRule",
         "metadata": metadata(kube, f"{kube.name_prefix}-{what}", kube.rule_labels),
         "spec": {"groups": _rule_groups(plain[rel])}}
        for what, rel in (("gpu-recording", RECORDING_FILE), ("gpu-alerts", ALERTS_FILE), ("alerting", ALERTING_FILE))
    ]


def matcher(text: str) -> dict[str, str]:
    """`cluster="a\\"b"` as the resource's {name, value, matchType}."""
    found = _MATCHER.fullmatch(text)
    if found is None:
        raise ValueError(f"not an Alertmanager matcher: {text!r}")
    value = re.sub(r"\\.", lambda m: _UNESCAPE.get(m.group(0), m.group(0)[1]), found["value"])
    return {"name": found["name"], "value": value, "matchType": found["op"]}


def _route(route: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in route.items():
        if key == "matchers":
            out["matchers"] = [matcher(m) for m in value]
        elif key == "routes":
            out["routes"] = [_route(child) for child in value]
        else:
            out[_TIMING.get(key, key)] = value
    return out


def secret_key(receiver: Receiver, option: str) -> str:
    """The key of one receiver secret in the receivers' Secret: `<receiver>-<option>`, as a Secret key."""
    return re.sub(r"[^-._a-zA-Z0-9]+", "-", f"{receiver.name}-{option.replace('_', '-')}")


def _secret(kube: KubeSite, receiver: Receiver, option: str) -> dict[str, str]:
    return {"name": kube.receivers_secret, "key": secret_key(receiver, option)}


# alertmanager.yml's notifier keys -> the resource's; a `*_file` secret becomes a key of the receivers' Secret.
_NOTIFIER_KEYS = {"send_resolved": "sendResolved", "auth_username": "authUsername"}
_SECRET_KEYS = {"url_file": ("urlSecret", "url"), "api_url_file": ("apiURL", "api_url"),
                "auth_password_file": ("authPassword", "auth_password")}
_KINDS = {"webhook_configs": ("webhook", "webhookConfigs"), "slack_configs": ("slack", "slackConfigs"),
          "email_configs": ("email", "emailConfigs")}


def _notifier(kube: KubeSite, receiver: Receiver, plain: Mapping[str, Any]) -> dict[str, Any]:
    """One notifier of alertmanager.yml in the resource's spelling, its secret file as a Secret reference."""
    out: dict[str, Any] = {}
    for key, value in plain.items():
        if key in _SECRET_KEYS:
            field, option = _SECRET_KEYS[key]
            out[field] = _secret(kube, receiver, option)
        else:
            out[_NOTIFIER_KEYS.get(key, key)] = value
    return out


def _receivers(kube: KubeSite, plain: list[dict[str, Any]], sets: Mapping[str, tuple[Receiver, ...]]) -> list[Any]:
    """alertmanager.yml's receivers; the notifiers of each kind are the site's receivers of that kind it names,
    in order (`sets`: gpudash.config.site_alerting.receiver_sets)."""
    out = []
    for named in plain:
        receiver: dict[str, Any] = {"name": named["name"]}
        of_site = sets[named["name"]]
        for plain_key, (kind, key) in _KINDS.items():
            of_kind = [r for r in of_site if r.kind == kind]
            configs = named.get(plain_key, [])
            if configs:
                receiver[key] = [_notifier(kube, r, c) for r, c in zip(of_kind, configs, strict=True)]
        out.append(receiver)
    return out


def receiver_secret_keys(settings: Settings) -> list[str]:
    """The keys the receivers' Secret must hold, in site order (what docs/adopt.md has you create)."""
    keys = []
    site = settings.site
    sets = receiver_sets(site.receivers, site.rma_receivers, site.alerting)
    every = dict.fromkeys(r for receivers in sets.values() for r in receivers)
    for receiver in every:
        for option in ("url", "api_url", "auth_password"):
            if receiver.option(f"{option}_file") or receiver.option(f"{option}_env"):
                keys.append(secret_key(receiver, option))
    return keys


def alertmanager_resource(settings: Settings, alertmanager_yml: str) -> dict[str, Any]:
    """alertmanager.yml's route tree, inhibitions and receivers (its text, read back) as one AlertmanagerConfig."""
    site = settings.site
    kube = site.kubernetes
    sets = receiver_sets(site.receivers, site.rma_receivers, site.alerting)
    plain = yaml.safe_load(alertmanager_yml)
    inhibit = [
        {"sourceMatch": [matcher(m) for m in rule["source_matchers"]],
         "targetMatch": [matcher(m) for m in rule["target_matchers"]],
         "equal": rule["equal"]}
        for rule in plain["inhibit_rules"]
    ]
    return {
        "apiVersion": API_V1ALPHA1, "kind": "AlertmanagerConfig",
        "metadata": metadata(kube, f"{kube.name_prefix}-alerts", kube.alertmanager_config_labels),
        "spec": {"route": _route(plain["route"]), "inhibitRules": inhibit,
                 "receivers": _receivers(kube, plain["receivers"], sets)},
    }


def _relabel(target: str, replacement: str) -> dict[str, Any]:
    return {"action": "replace", "targetLabel": target, "replacement": replacement}


def service_monitor(settings: Settings, cluster: Cluster) -> dict[str, Any]:
    """The exporters of one cluster, labelled as the plain scrape config labels them (cluster, job)."""
    site = settings.site
    kube = site.kubernetes
    endpoint = {
        "port": kube.exporter_port,
        "scheme": kube.exporter_scheme,
        "interval": str(site.scrape_interval),
        "scrapeTimeout": str(site.scrape_timeout),
        # The exporter's own pod/namespace labels (job attribution) win over the target's.
        "honorLabels": True,
        "relabelings": [
            _relabel("cluster", cluster.name),
            _relabel("job", site.scrape_job),
            # One series per node, named as the node is, not by the pod's changing address.
            {"action": "replace", "sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "instance"},
        ],
    }
    return {
        "apiVersion": API_V1, "kind": "ServiceMonitor",
        "metadata": metadata(kube, f"{kube.name_prefix}-exporter-{slug(cluster.name)}", kube.monitor_labels),
        "spec": {
            "selector": {"matchLabels": dict(kube.exporter_selector)},
            "namespaceSelector": {"matchNames": [kube.namespace]},
            "endpoints": [endpoint],
        },
    }


def _monitors(settings: Settings, header: str) -> dict[str, str]:
    """One file per cluster, named by the cluster's slug; two clusters with one slug are refused."""
    files: dict[str, str] = {}
    names: dict[str, str] = {}
    for cluster in settings.site.clusters:
        key = slug(cluster.name)
        if key in names:
            raise ConfigError(f"clusters {names[key]!r} and {cluster.name!r} both give the ServiceMonitor name "
                              f"{settings.site.kubernetes.name_prefix}-exporter-{key}: rename one")
        names[key] = cluster.name
        note = f"# The ServiceMonitor of cluster {cluster.name!r}: apply it where that cluster's Prometheus runs.\n"
        files[MONITOR_FILE.format(cluster=key)] = header + note + documents([service_monitor(settings, cluster)])
    return files


def operator_files(settings: Settings, plain: Mapping[str, str], dashboards: Mapping[str, str],
                   header: str) -> dict[str, str]:
    """The operator's files by path relative to the output folder, each starting with `header`.

    `plain` is the plain rendering (gpudash.rules.generated_files.render_all: the rule files and
    alertmanager.yml), `dashboards` the dashboard JSON by file name. Every cluster has its own ServiceMonitor
    file: apply the one of the cluster a Prometheus runs in.
    """
    kube = settings.site.kubernetes
    apply = f"# kubectl apply --server-side -f <this file>   (namespace {kube.namespace})\n"
    routes = alertmanager_resource(settings, plain[ALERTMANAGER_FILE])
    return {
        RULES_FILE: header + apply + documents(prometheus_rules(kube, plain)),
        ALERTMANAGER_CONFIG_FILE: header + apply + documents([routes]),
        DASHBOARDS_FILE: header + SIDECAR_NOTE
        + documents(dashboard_config_maps(settings, dashboards)),
        **_monitors(settings, header),
    }
