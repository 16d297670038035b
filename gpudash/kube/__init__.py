"""Kubernetes resources that gpudash writes: the common metadata and YAML, and the dashboards as ConfigMaps."""
