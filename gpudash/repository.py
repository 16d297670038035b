"""Where a gpudash repository keeps its parts, and the names that tie the parts together.

Paths are relative to the repository root, where the commands run. The uids link the dashboards to each
other (and are the file names of their JSON); the tag marks a dashboard in Grafana as gpudash's, which is
what `sync --prune` looks for before it deletes anything.
"""

from __future__ import annotations

import re
from pathlib import Path

DEFINITIONS_DIR = Path("dashboards")  # one grafanalib definition (*.py) per dashboard
JSON_DIR_NAME = "json"  # the generated dashboard JSON, inside the definitions folder
DASHBOARDS_JSON_DIR = DEFINITIONS_DIR / JSON_DIR_NAME
V2_DIR_NAME = "v2"  # the same dashboards as dashboard.grafana.app/v2 resources, beside the JSON

GENERATED_DIR = Path("generated")  # `gpudash rules` output; the file names below are relative to it
ALERTS_FILE = "prometheus/gpu-alerts.rules.yml"
RECORDING_FILE = "prometheus/gpu-recording.rules.yml"
ALERTING_FILE = "prometheus/gpu-alerting.rules.yml"  # Watchdog and GPUNodeDrained: about the alerting itself
SCRAPE_FILE = "prometheus/scrape-gpu.yml"
ALERTMANAGER_FILE = "alertmanager/alertmanager.yml"
RULES_DIR = GENERATED_DIR / Path(ALERTS_FILE).parent  # where the rule files above lie
PROVISIONING_DIR = GENERATED_DIR / "grafana-provisioning"  # `gpudash provision` output

# What Grafana accepts as a uid; it also keeps <uid>.json a plain file name inside an output folder.
GRAFANA_UID = re.compile(r"[A-Za-z0-9_-]{1,40}")
FLEET_UID = "gpudash-fleet"
NODE_UID = "gpudash-node"
JOB_UID = "gpudash-job"
HEALTH_UID = "gpudash-health"
FABRIC_UID = "gpudash-fabric"

TAG = "gpudash"  # on every dashboard gpudash builds; prune deletes only dashboards that carry it
