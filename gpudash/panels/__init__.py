"""Building the dashboards: panel builders, grafanalib's output fixed to current Grafana JSON, the command."""
