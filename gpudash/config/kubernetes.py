"""The site config's `kubernetes:` section: where the Prometheus Operator resources go and the labels the
operator and Grafana's sidecar select on.

kube-prometheus-stack's Prometheus picks PrometheusRule and ServiceMonitor resources by label (by default
`release: <helm release name>`), its Alertmanager picks AlertmanagerConfig resources by label, and its
Grafana sidecar loads every ConfigMap that carries `grafana_dashboard`, filed in the folder its annotation
names. Every one of those names is a knob here, with kube-prometheus-stack's defaults.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpudash.config.fields import FieldReader

# RFC 1123 names: what Kubernetes accepts for a namespace and most resource names.
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
# A label or annotation key: an optional DNS-subdomain prefix and a name of up to 63 characters.
_KEY_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
# A label value: empty, or up to 63 characters of alphanumerics, '-', '_' and '.', alphanumeric at both ends.
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")


def key_problem(key: str) -> str | None:
    """Why `key` cannot be a Kubernetes label or annotation key, or None."""
    prefix, _, name = key.rpartition("/")
    if (prefix and not DNS_SUBDOMAIN.fullmatch(prefix)) or not _KEY_NAME.fullmatch(name):
        return f"expected a Kubernetes label key ([prefix/]name, name up to 63 of A-Z a-z 0-9 - _ .), got {key!r}"
    return None


def value_problem(value: str) -> str | None:
    if not _LABEL_VALUE.fullmatch(value):
        return f"expected a Kubernetes label value (up to 63 of A-Z a-z 0-9 - _ ., alphanumeric at both ends), " \
               f"got {value!r}"
    return None


def name_problem(value: str) -> str | None:
    if not DNS_LABEL.fullmatch(value):
        return f"expected a Kubernetes name (1 to 63 of a-z, 0-9 and '-', alphanumeric at both ends), got {value!r}"
    return None


Labels = tuple[tuple[str, str], ...]
_RELEASE: Labels = (("release", "kube-prometheus-stack"),)


@dataclass(frozen=True)
class KubeSite:
    """Names, namespace and selector labels of the resources `gpudash rules --format prometheus-operator` writes."""

    namespace: str = "monitoring"
    name_prefix: str = "gpudash"  # every resource is named <prefix>-<what>
    rule_labels: Labels = _RELEASE  # Prometheus' ruleSelector
    monitor_labels: Labels = _RELEASE  # Prometheus' serviceMonitorSelector
    alertmanager_config_labels: Labels = _RELEASE  # Alertmanager's alertmanagerConfigSelector
    exporter_selector: Labels = (("app.kubernetes.io/name", "gpudash-exporter"),)  # the exporter Service's labels
    exporter_port: str = "metrics"  # the Service's port name the ServiceMonitor scrapes
    exporter_scheme: str = "http"  # https when the exporter's web-config turns TLS on
    dashboard_label: tuple[str, str] = ("grafana_dashboard", "1")  # the sidecar's `label` and `labelValue`
    folder_annotation: str = "grafana_folder"  # the sidecar's `folderAnnotation`
    receivers_secret: str = "gpudash-alertmanager-receivers"  # holds the receivers' secrets, in `namespace`


def _labels(reader: FieldReader, key: str, default: Labels) -> Labels:
    if not reader.has(key):
        reader.used.add(key)
        return default
    section = reader.section(key)
    pairs = []
    for name in sorted(section.data, key=str):
        if not isinstance(name, str):
            section.fail(f"expected a label key, got {name!r}")
        section.checked(name, name, key_problem)
        value = section.data[name]
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            section.fail(f"expected a label value (text), got {value!r}", name)
        pairs.append((name, section.checked(name, str(value), value_problem)))
    if not pairs:
        reader.fail("expected at least one label", key)
    return tuple(pairs)


def parse_kubernetes(reader: FieldReader) -> KubeSite:
    """The section as read by `reader` (an empty mapping gives every default); unknown keys fail."""
    d = KubeSite()
    dashboard = reader.section("dashboards", required=False)
    label_key = dashboard.checked("label", dashboard.string("label", d.dashboard_label[0]), key_problem)
    label_value = dashboard.checked("label_value", dashboard.string("label_value", d.dashboard_label[1]),
                                    value_problem)
    site = KubeSite(
        namespace=reader.checked("namespace", reader.string("namespace", d.namespace), name_problem),
        name_prefix=reader.checked("name_prefix", reader.string("name_prefix", d.name_prefix), name_problem),
        rule_labels=_labels(reader, "rule_labels", d.rule_labels),
        monitor_labels=_labels(reader, "monitor_labels", d.monitor_labels),
        alertmanager_config_labels=_labels(reader, "alertmanager_config_labels", d.alertmanager_config_labels),
        exporter_selector=_labels(reader, "exporter_selector", d.exporter_selector),
        exporter_port=reader.checked("exporter_port", reader.string("exporter_port", d.exporter_port), name_problem),
        exporter_scheme=reader.string("exporter_scheme", d.exporter_scheme, ("http", "https")),
        dashboard_label=(label_key, label_value),
        folder_annotation=dashboard.checked("folder_annotation",
                                            dashboard.string("folder_annotation", d.folder_annotation), key_problem),
        receivers_secret=reader.checked("receivers_secret", reader.string("receivers_secret", d.receivers_secret),
                                        name_problem),
    )
    dashboard.done()
    reader.done()
    return site
