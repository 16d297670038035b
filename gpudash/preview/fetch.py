"""The preview's only door to Prometheus: each panel's queries, and the values of label_values variables.

Goes through the live check's client (gpudash.check.prometheus_api), so a dead or wrong URL is the same one line.
A query Prometheus refuses is kept as that panel's error text and drawn in the panel; the picture of the
rest of the dashboard is still worth having.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpudash.check.prometheus_api import PrometheusClient, QueryError, TimeRange
from gpudash.preview.panel_queries import LabelValues, PanelQuery
from gpudash.preview.series import PanelData, Series, to_series


def label_values(client: PrometheusClient, span: TimeRange) -> LabelValues:
    def lookup(label: str, selector: str | None) -> list[str]:
        try:
            return client.label_values(label, selector, span)
        except QueryError:
            return []

    return lookup


def fetch_panel(client: PrometheusClient, queries: Sequence[PanelQuery], span: TimeRange) -> PanelData:
    series: list[Series] = []
    frames: list[tuple[str, tuple[Series, ...]]] = []
    errors: list[str] = []
    for query in queries:
        try:
            result = client.instant(query.expr, at=span.end) if query.instant else client.range(query.expr, span)
        except QueryError as exc:
            errors.append(f"query {query.ref}: {exc}")
            continue
        found = to_series(result, query.legend, query.ref)
        series += found
        frames.append((query.ref, found))
    return PanelData(tuple(series), tuple(errors), tuple(frames))
