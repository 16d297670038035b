"""`gpudash doctor`: the monitoring chain checked link by link, from NVML to the pager.

What is fetched once (`fetch.py`: each exporter's /metrics, Prometheus' targets, rules, Alertmanagers and a
few queries, Alertmanager's status and metrics, Grafana's data source and dashboards) is judged by small
pure functions, one module per link (`exporter.py`, `targets.py`, `labels.py`, `rules.py`, `alerting.py`,
`grafana.py`, `physics.py`), each returning `Finding`s: ok, a failure with its cause and its fix, or a hint
with its evidence. `report.py` prints them one line each, `run.py` walks the chain, `cli.py` is the command.
"""
