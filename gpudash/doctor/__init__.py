"""`gpudash doctor`: the monitoring chain checked link by link, from NVML to the pager.

What is fetched once (`observed.py`: each exporter's /metrics, Prometheus' targets, rules, Alertmanagers and
a few queries, Alertmanager's status and metrics, Grafana's data source and dashboards) is judged by small
pure functions, one module per link (`exporter.py`, `scrape_targets.py`, `labels.py`, `loaded_rules.py`,
`alerting.py`, `grafana.py`, `physics.py`), each returning `Finding`s (`findings.py`): ok, a failure with its
cause and its fix, or a hint with its evidence. `diagnose.py` walks the chain, `findings_text.py` prints the
findings one line each, `cli.py` is the command.
"""
