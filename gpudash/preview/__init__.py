"""Pictures of the dashboards without a Grafana: each panel drawn from live Prometheus data, one PNG each.

Pure parts decide (layout, variables and queries, units, colours, series); `fetch` is the only module that
queries Prometheus and `canvas`, `draw` and `forms_*` the only ones that import matplotlib (an optional
extra, which `previewer` loads on first use).
"""
