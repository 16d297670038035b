"""The live check: every dashboard and rule query run against a Prometheus-compatible server."""
