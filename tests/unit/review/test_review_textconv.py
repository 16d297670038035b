"""The diff driver's rendering: one fact per line, stable, nothing of the JSON left unseen."""

from __future__ import annotations

import copy
import json
from typing import Any

from support.paths import ROOT

from gpudash.review.textconv import render, steps_text

NODE = ROOT / "tests" / "fixtures" / "review" / "gpudash-node.before.json"


def _node() -> dict[str, Any]:
    data = json.loads(NODE.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def _panel(dashboard: dict[str, Any], title: str) -> dict[str, Any]:
    return next(p for p in dashboard["panels"] if p.get("title") == title)


def test_rendering_names_each_panel_with_its_place_unit_steps_queries_and_legend() -> None:
    text = render(_node())
    assert text.startswith("dashboard gpudash-node 'GPU node'\n")
    block = text.split("\npanel 'Memory used per GPU' (bargauge) ", 1)[1].split("\n\n", 1)[0]
    assert block.startswith("x=0 y=24 w=8 h=9\n")
    assert "    unit: percentunit\n" in block
    assert "    thresholds: base green | 0.9 orange | 0.95 red\n" in block
    assert "    query A: max by (cluster, instance, gpu) (cluster_instance_gpu:gpu_fb_used:ratio{" in block
    assert "    legend A: GPU {{gpu}}\n" in block
    variable = 'variable $instance (query, multi): label_values(DCGM_FI_DEV_GPU_UTIL{cluster=~"$cluster"}, instance)'
    assert variable in text


def test_rendering_is_stable_and_ignores_key_order() -> None:
    data = _node()
    shuffled = json.loads(json.dumps(data, sort_keys=False))
    shuffled["panels"][1] = dict(reversed(list(shuffled["panels"][1].items())))
    assert render(data) == render(shuffled) == render(_node())


def test_a_change_outside_the_named_fields_still_shows() -> None:
    data = _node()
    changed = copy.deepcopy(data)
    _panel(changed, "GPU temperature")["options"]["showThresholdLabels"] = True
    before, after = render(data).splitlines(), render(changed).splitlines()
    moved = [line for line in after if line not in before]
    assert len(moved) == 1 and '"showThresholdLabels":true' in moved[0]


def test_multi_line_queries_keep_their_lines_indented_under_the_query() -> None:
    data = _node()
    _panel(data, "Tensor core activity")["targets"][0]["expr"] = "sum(\n  up\n)"
    text = render(data)
    indent = " " * len("    query A: ")
    assert f"    query A: sum(\n{indent}  up\n{indent})\n" in text


def test_steps_text() -> None:
    assert steps_text([{"color": "green", "value": None}, {"color": "red", "value": 85}]) == "base green | 85 red"
    assert steps_text(None) == "none"
