"""The preview lays a table's columns out as Grafana does: a `custom.width` column at its width, the others an
equal share, none under 150 px; a header too wide for its column cut with "…", so no two headers overlap (the
health ledger's many narrow columns drew theirs over each other)."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest
from support.paths import ROOT

from gpudash.config.loading import load_settings
from gpudash.panels.build import build_all
from gpudash.preview.table_columns import DEFAULT_MIN_WIDTH, ELLIPSIS, PADDING_PX, column_widths, fitted, layout


def _per_char(px: float) -> Any:
    return lambda text: px * len(text)


def _extents(columns: list[Any], measure: Any) -> list[tuple[float, float]]:
    return [(c.x + PADDING_PX, c.x + PADDING_PX + measure(c.header)) for c in columns]


def test_a_long_header_in_a_narrow_column_is_cut_and_ends_in_an_ellipsis() -> None:
    measure = _per_char(7)
    panel = {"fieldConfig": {"overrides": [{"matcher": {"id": "byName", "options": "XIDs for restart_job"},
                                            "properties": [{"id": "custom.width", "value": 80}]}]}}
    columns = layout(panel, ["UUID", "XIDs for restart_job", "worst action"], 1000, measure)
    assert [c.w for c in columns] == [460, 80, 460]  # the fixed width; the rest shared equally
    cut = columns[1].header
    assert cut.endswith(ELLIPSIS) and "XIDs for restart_job".startswith(cut[:-1])
    assert measure(cut) <= 80 - 2 * PADDING_PX
    assert [columns[0].header, columns[2].header] == ["UUID", "worst action"]  # they fit: whole


def test_no_column_is_narrower_than_grafanas_minimum_and_those_past_the_edge_are_not_drawn() -> None:
    header = [f"column {i}" for i in range(12)]
    assert column_widths({}, header, 1200) == [DEFAULT_MIN_WIDTH] * 12
    columns = layout({}, header, 1200, _per_char(7))
    assert len(columns) == 8 and columns[-1].x + columns[-1].w == 1200  # Grafana scrolls the other four


def test_fitted_keeps_what_fits_and_gives_nothing_where_not_even_the_ellipsis_does() -> None:
    measure = _per_char(10)
    assert fitted("GPU-hours", 90, measure) == "GPU-hours"
    assert fitted("GPU-hours held", 60, measure) == "GPU-h" + ELLIPSIS
    assert fitted("GPU-hours held", 5, measure) == ""


@pytest.fixture(scope="module")
def ledger() -> dict[str, Any]:
    health = build_all(load_settings(ROOT / "thresholds.yaml"), ROOT / "dashboards")["gpudash-health.json"]
    return next(p for p in health["panels"] if p["type"] == "table" and p["title"].startswith("GPU ledger by UUID"))


@pytest.mark.parametrize("char_px", [6.5, 8.0, 11.0])
def test_the_health_ledgers_headers_do_not_overlap(ledger: dict[str, Any], char_px: float) -> None:
    rename = ledger["transformations"][-1]["options"]["renameByName"]
    header = ["UUID", "cluster", "gpu", "instance", *rename.values()]
    width = 24 * 64 - 8 - 8  # the preview's 24 grid columns, less the panel's and the table's margins
    measure = _per_char(char_px)
    columns = layout(ledger, header, width, measure)
    assert any(c.header.endswith(ELLIPSIS) for c in columns)  # its headers are longer than its columns
    extents = _extents(columns, measure)
    assert all(end <= c.x + c.w - PADDING_PX for (_, end), c in zip(extents, columns, strict=True))
    assert all(a_end < b_start for (_, a_end), (b_start, _) in pairwise(extents))


def test_drawn_headers_measured_in_the_pictures_font_do_not_overlap() -> None:
    from gpudash.preview.canvas import Canvas  # matplotlib: a dev dependency

    canvas = Canvas(64, 64)
    header = ["XIDs for restart_job", "XIDs for reset_gpu", "ECC double-bit (volatile)", "remapped rows pending"]
    measure = lambda text: canvas.text_width(text, 12, bold=True)  # noqa: E731
    wide = measure(header[0])
    columns = layout({"fieldConfig": {"defaults": {"custom": {"width": 100}}}}, header, 400, measure)
    assert wide > 100 and all(c.header.endswith(ELLIPSIS) for c in columns)
    extents = _extents(columns, measure)
    assert all(a_end < b_start for (_, a_end), (b_start, _) in pairwise(extents))
