"""GPU health as data: what each XID means and what to do about it (gpudash/health/xid_catalog.csv).

Standard library (and gpudash.errors) only, so the exporter, the rules and the dashboards can all read it.
"""
