"""A panel's rows as Grafana's own display code (@grafana/data, tests/schema/display.cjs) shows them.

`grafana_frames` shapes what the preview fetched the way Grafana's Prometheus data source frames it: one
frame per series, a `Time` field in milliseconds and a `Value` field carrying the labels, titled by the
query's legend (`displayNameFromDS`) when it has one; an empty answer is one frame without fields
(the data source keeps one to carry the query's metadata). `grafana_rows` runs the Node.js script on them.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from collections.abc import Sequence
from typing import Any

from gpudash.preview.panel_queries import PanelQuery
from gpudash.preview.series import PanelData
from support.slack import budget
from support.tsc import SCHEMA_DIR

DISPLAY = SCHEMA_DIR / "display.cjs"
GRAFANA_DATA = SCHEMA_DIR / "node_modules" / "@grafana" / "data" / "package.json"
_LEGEND = re.compile(r"\{\{\s*(\w+)\s*\}\}")
Rows = tuple[list[str], list[list[str]]]


def missing() -> str | None:
    """Why Grafana's display code cannot run here, or None."""
    if shutil.which("node") is None:
        return "node is not installed (`make deps` installs Node.js)"
    if not GRAFANA_DATA.exists():
        return "tests/schema/node_modules has no @grafana/data (`make schema-deps` installs it)"
    return None


def _legend(fmt: str | None, labels: dict[str, str]) -> str:
    """The data source's name for a series: the legend filled in; none for no legend or `__auto`."""
    if not fmt or fmt == "__auto":
        return ""
    return _LEGEND.sub(lambda m: labels.get(m.group(1), ""), fmt)


def _number(value: float) -> float | None:
    return None if math.isnan(value) else value


def grafana_frames(queries: Sequence[PanelQuery], data: PanelData) -> list[dict[str, Any]]:
    legends = {q.ref: q.legend for q in queries}
    frames: list[dict[str, Any]] = []
    for ref, series in data.frames:
        if not series:  # Grafana answers an empty result with one frame without fields, to carry its metadata
            frames.append({"refId": ref, "name": "", "fields": []})
        for one in series:
            labels = dict(one.labels)
            name = _legend(legends.get(ref), labels)
            value: dict[str, Any] = {"name": "Value", "type": "number", "labels": labels,
                                     "config": {"displayNameFromDS": name} if name else {},
                                     "values": [_number(v) for v in one.values]}
            frames.append({"refId": ref, "name": name, "fields": [
                {"name": "Time", "type": "time", "config": {}, "values": [round(t * 1000) for t in one.times]},
                value]})
    return frames


def _display(panel: dict[str, Any], frames: list[dict[str, Any]], now_s: float) -> dict[str, Any]:
    node = shutil.which("node")
    assert node is not None
    done = subprocess.run([node, str(DISPLAY)], input=json.dumps({"panel": panel, "frames": frames,
                                                                  "now": round(now_s * 1000)}),
                          capture_output=True, text=True, timeout=budget(60), check=False)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert isinstance(answer, dict)
    return answer


def grafana_rows(panel: dict[str, Any], frames: list[dict[str, Any]], now_s: float) -> Rows:
    """The header and rows Grafana shows for `panel` given `frames`, at `now_s`."""
    answer = _display(panel, frames, now_s)
    if not answer["rows"]:  # a table without rows: Grafana shows the noValue, whatever its columns
        return [], []
    return list(answer["header"]), [list(row) for row in answer["rows"]]


def grafana_links(panel: dict[str, Any], frames: list[dict[str, Any]], now_s: float
                  ) -> list[tuple[list[str], list[str]]]:
    """Each row of a table as Grafana shows it, with the URLs of its data links as Grafana fills them in."""
    answer = _display(panel, frames, now_s)
    return [(list(row), list(links)) for row, links in zip(answer["rows"], answer["links"], strict=True)]


def disagreement(title: str, preview: Rows, grafana: Rows) -> str:
    """'' when the preview shows what Grafana shows; else the first difference, by row."""
    if preview[0] != grafana[0]:
        return f"{title}: columns {preview[0]} in the preview, {grafana[0]} in Grafana"
    for index, (mine, theirs) in enumerate(zip(preview[1], grafana[1], strict=False)):
        if mine != theirs:
            return f"{title}: row {index + 1} is {mine} in the preview, {theirs} in Grafana"
    if len(preview[1]) != len(grafana[1]):
        return f"{title}: {len(preview[1])} rows in the preview, {len(grafana[1])} in Grafana"
    return ""
