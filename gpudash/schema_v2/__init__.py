"""Grafana's dashboard schema v2 (`dashboard.grafana.app/v2`), converted from the classic JSON gpudash builds.

`resource.to_v2` is the one entry point: a classic dashboard (what `panels.build.build_all` gives) in, the full
resource envelope out. `elements.py` converts panels, `layout.py` rows and grid positions, `controls.py`
variables, annotations, links and time settings. The shapes are @grafana/schema 13.2's
`dashboard/v2/types.spec.gen.d.ts`, which `make types` checks every generated resource against;
`panels/formats.py` writes them beside the classic JSON.
"""
