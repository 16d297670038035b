"""One dashboard JSON as text a reviewer reads: what `git diff` shows through gpudash's diff driver.

Panel by panel, in the order Grafana lays them out: title, type, place on the grid, unit, thresholds as
steps, each query's expression and legend; then the variables. Whatever else a panel or the dashboard
holds is one sorted compact JSON line, so no change is ever invisible in the rendering. The output is a
pure function of the JSON (stable across runs), which is what a textconv driver must be.
"""

from __future__ import annotations

import json
from typing import Any

from gpudash.compare.diffing import flat_panels

# Named on lines of their own; anything else in a panel goes on its "other" line.
_PANEL_NAMED = ("title", "type", "gridPos", "targets", "panels", "id", "description")
_DEFAULTS_NAMED = ("unit", "thresholds", "min", "max")
_DASHBOARD_NAMED = ("panels", "templating", "title", "uid")


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _place(panel: dict[str, Any]) -> str:
    grid = _dict(panel.get("gridPos"))
    return f"x={grid.get('x')} y={grid.get('y')} w={grid.get('w')} h={grid.get('h')}"


def steps_text(steps: Any) -> str:
    """Threshold steps as `base green | 80 orange | 85 red`."""
    parts = []
    for step in steps if isinstance(steps, list) else []:
        if isinstance(step, dict):
            value = step.get("value")
            parts.append(f"base {step.get('color')}" if value is None else f"{_compact(value)} {step.get('color')}")
    return " | ".join(parts) or "none"


def _indented(label: str, text: str, indent: str) -> list[str]:
    lines = str(text).splitlines() or [""]
    return [f"{indent}{label}{lines[0]}", *(f"{indent}{' ' * len(label)}{line}" for line in lines[1:])]


def _panel_lines(panel: dict[str, Any]) -> list[str]:
    out = [f"panel {panel.get('title', '')!r} ({panel.get('type', '?')}) {_place(panel)}"]
    if panel.get("description"):
        out += _indented("description: ", str(panel["description"]), "    ")
    config = _dict(panel.get("fieldConfig"))
    defaults = _dict(config.get("defaults"))
    if "unit" in defaults:
        out.append(f"    unit: {defaults['unit']}")
    if "min" in defaults or "max" in defaults:
        out.append(f"    range: {_compact(defaults.get('min'))} .. {_compact(defaults.get('max'))}")
    if isinstance(defaults.get("thresholds"), dict):
        thresholds = defaults["thresholds"]
        mode = f" ({thresholds['mode']})" if thresholds.get("mode", "absolute") != "absolute" else ""
        out.append(f"    thresholds{mode}: {steps_text(thresholds.get('steps'))}")
    for index, target in enumerate(panel.get("targets") or []):
        if not isinstance(target, dict):
            continue
        ref = target.get("refId", index)
        text = target.get("expr", target.get("rawSql", target.get("query", "")))
        out += _indented(f"    query {ref}: ", str(text), "")
        if target.get("legendFormat"):
            out.append(f"    legend {ref}: {target['legendFormat']}")
        rest = {k: v for k, v in target.items() if k not in ("expr", "refId", "legendFormat", "datasource")}
        if rest:
            out.append(f"    query {ref} options: {_compact(rest)}")
    rest_defaults = {k: v for k, v in defaults.items() if k not in _DEFAULTS_NAMED}
    rest_config = {k: v for k, v in config.items() if k != "defaults"}
    if rest_defaults or rest_config:
        out.append(f"    field config: {_compact({**rest_config, 'defaults': rest_defaults})}")
    if isinstance(panel.get("options"), dict):
        out.append(f"    options: {_compact(panel['options'])}")
    rest = {k: v for k, v in panel.items() if k not in (*_PANEL_NAMED, "fieldConfig", "options")}
    if rest:
        out.append(f"    other: {_compact(rest)}")
    return out


def _variable_lines(variable: dict[str, Any]) -> list[str]:
    query = variable.get("query")
    if isinstance(query, dict):
        query = query.get("query")
    flags = [str(variable.get("type", "?"))]
    if variable.get("multi"):
        flags.append("multi")
    if variable.get("includeAll"):
        flags.append(f"All={variable.get('allValue') or '(every value)'}")
    out = _indented(f"variable ${variable.get('name')} ({', '.join(flags)}): ", str(query or ""), "")
    rest = {k: v for k, v in variable.items() if k not in ("name", "type", "multi", "includeAll", "allValue",
                                                           "query", "definition", "current", "options")}
    if rest:
        out.append(f"    other: {_compact(rest)}")
    return out


def render(dashboard: dict[str, Any]) -> str:
    """The whole dashboard as text, one fact per line (see the module docstring)."""
    lines = [f"dashboard {dashboard.get('uid', '?')} {dashboard.get('title', '')!r}"]
    settings = {k: v for k, v in dashboard.items() if k not in _DASHBOARD_NAMED}
    lines += [f"  {key}: {_compact(settings[key])}" for key in sorted(settings)]
    for panel in flat_panels(dashboard.get("panels")):
        lines += ["", *_panel_lines(panel)]
    variables = [v for v in _dict(dashboard.get("templating")).get("list") or [] if isinstance(v, dict)]
    if variables:
        lines.append("")
    for variable in variables:
        lines += _variable_lines(variable)
    return "\n".join(lines) + "\n"
