"""The dashboard JSON as ConfigMaps that Grafana's sidecar loads (kube-prometheus-stack's `grafana_dashboard`).

The sidecar watches ConfigMaps carrying its label and writes each data key to a file Grafana provisions;
the folder annotation files them in the site's Grafana folder. The JSON is the committed file byte for
byte, so a dashboard reads the same whether pushed by `gpudash sync` or provisioned from the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpudash.config.loading import Settings
from gpudash.errors import ConfigError
from gpudash.kube.resources import metadata, slug

# A ConfigMap holds at most 1 MiB; a larger dashboard must go through `gpudash sync` instead.
CONFIG_MAP_LIMIT = 1024 * 1024


def dashboard_config_maps(settings: Settings, dashboards: Mapping[str, str]) -> list[dict[str, Any]]:
    """One ConfigMap per dashboard file (`<uid>.json` -> text), in name order."""
    kube = settings.site.kubernetes
    maps = []
    for file_name, text in sorted(dashboards.items()):
        if len(text.encode("utf-8")) > CONFIG_MAP_LIMIT:
            raise ConfigError(f"{file_name}: over the 1 MiB a ConfigMap holds; push it with `gpudash sync` instead")
        uid = file_name.removesuffix(".json")
        meta = metadata(kube, f"{kube.name_prefix}-dashboard-{slug(uid)}", (kube.dashboard_label,),
                        {kube.folder_annotation: settings.site.grafana_folder})
        maps.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {file_name: text}})
    return maps
