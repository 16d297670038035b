"""Dashboards into Grafana over its HTTP API: push, diff, sync (with drift detection and prune), provision.

One way through: load the local JSON (`local`), read the remote side (`remote`), decide what to do
(`plan`, pure), write it (`apply`). Everything that talks HTTP goes through `grafana_api.Grafana`, which wraps
grafana-client and turns every failure into one line.
"""
