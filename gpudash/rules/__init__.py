"""Prometheus alerting and recording rules, the Alertmanager config and the scrape config.

Everything here is a pure function of the settings (thresholds.yaml, the site config) and the metric
catalog; `generated_files.render_all` turns it into the files under generated/, byte for byte the same each time.
"""
