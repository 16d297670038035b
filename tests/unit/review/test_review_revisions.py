"""The summary between two revisions: the threshold change regenerated into the node dashboard, in words."""

from __future__ import annotations

import copy
import json
from typing import Any

from support.paths import ROOT

from gpudash.review.revisions import compare

FIXTURES = ROOT / "tests" / "fixtures" / "review"


def _load(name: str) -> dict[str, Any]:
    data = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_a_moved_memory_threshold_names_every_panel_and_step_that_moved() -> None:
    before, after = _load("gpudash-node.before.json"), _load("gpudash-node.after.json")
    result = compare({"gpudash-node.json": before}, {"gpudash-node.json": after})
    assert result.differ == 1 and result.total == 1
    assert result.lines[0] == "differs     gpudash-node.json 'GPU node': 0 panels added, 0 removed, 3 changed"
    steps = "thresholds green, 0.9 orange, 0.95 red -> green, 0.85 orange, 0.95 red"
    changed = {line.split("'", 1)[1].rsplit("': ", 1)[0] for line in result.lines[1:]}
    assert changed == {"Memory used", "Memory used per GPU", "Memory used: now and 1d ago"}
    for line in result.lines[1:]:
        assert line.endswith(steps), line


def test_added_removed_moved_and_unit_changes() -> None:
    base = _load("gpudash-node.before.json")
    new = copy.deepcopy(base)
    temp = next(p for p in new["panels"] if p.get("title") == "GPU temperature")
    temp["gridPos"] = {**temp["gridPos"], "x": 6}
    temp["fieldConfig"]["defaults"]["unit"] = "fahrenheit"
    result = compare({"node.json": base, "gone.json": base}, {"node.json": new, "new.json": base})
    assert result.differ == 3 and result.total == 3
    assert f"added       new.json 'GPU node': {len(base['panels'])} panels" in result.lines
    assert "removed     gone.json 'GPU node'" in result.lines
    line = next(x for x in result.lines if "'GPU temperature'" in x)
    assert "moved x0 y41 12x7 -> x6 y41 12x7" in line and "unit celsius -> fahrenheit" in line
    assert "also" not in line  # gridPos and unit are said in words, not as "also fieldConfig, gridPos"


def test_equal_dashboards_are_left_out() -> None:
    base = _load("gpudash-node.before.json")
    result = compare({"a.json": base}, {"a.json": copy.deepcopy(base)})
    assert result.lines == () and result.differ == 0
