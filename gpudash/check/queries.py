"""What the live check runs: every query of every dashboard panel and variable, and every rule expression.

Dashboard queries are interpolated the way Grafana does before it sends them: template variables set to
All (their `allValue`, else `.*`) unless given, and the built-ins `$__range`, `$__interval` and
`$__rate_interval` computed from the dashboard's time range and the data source's scrape interval.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import yaml

from gpudash.config.durations import grafana_ms
from gpudash.config.loading import Settings
from gpudash.errors import ConfigError
from gpudash.panels.json_files import read_json_files
from gpudash.repository import DEFINITIONS_DIR

PANEL, VARIABLE, ALERT, RECORDING = "panel", "variable", "alert", "recording"
RULES_PREFIX = "rules: "
# Grafana's default "max data points" is the panel's width in pixels; ~1000 is a wide panel.
MAX_DATA_POINTS = 1000
_NICE_STEPS = (1, 2, 5, 10, 15, 20, 30, 60, 120, 300, 600, 900, 1200, 1800, 3600, 7200, 21600, 43200, 86400)


@dataclass(frozen=True)
class CheckQuery:
    """One expression to run, with where it came from."""

    source: str  # dashboard title or rule file name
    item: str  # panel title, variable name or rule name
    kind: str  # PANEL | VARIABLE | ALERT | RECORDING
    expr: str  # as sent, after interpolation
    instant: bool = True
    ref: str = ""  # the panel query's refId, to tell several queries of one panel apart


@dataclass(frozen=True)
class Group:
    """The queries of one dashboard or one rule file, shown as one table."""

    title: str
    origin: str  # file path or "(built: profile X)"
    queries: tuple[CheckQuery, ...]
    range_s: int = 0
    step_s: int = 0


@dataclass(frozen=True)
class Interpolation:
    """Values Grafana would put in place of variables."""

    range_s: int
    scrape_interval_s: int = 15

    @property
    def interval_s(self) -> int:
        raw = max(self.range_s / MAX_DATA_POINTS, self.scrape_interval_s)
        return next((s for s in _NICE_STEPS if s >= raw), int(raw))

    @property
    def rate_interval_s(self) -> int:
        # Grafana: max($__interval + scrape interval, 4 * scrape interval)
        return max(self.interval_s + self.scrape_interval_s, 4 * self.scrape_interval_s)

    def builtins(self) -> dict[str, str]:
        return {
            "__range_ms": str(self.range_s * 1000), "__range_s": str(self.range_s), "__range": f"{self.range_s}s",
            "__interval_ms": str(self.interval_s * 1000), "__interval": f"{self.interval_s}s",
            "__rate_interval": f"{self.rate_interval_s}s",
        }


_VAR = re.compile(r"\$\{(\w+)(?::[^}]*)?\}|\[\[(\w+)(?::[^\]]*)?\]\]|\$(\w+)")


def interpolate(expr: str, values: Mapping[str, str]) -> str:
    """Replace `$name`, `${name}`, `${name:fmt}` and `[[name]]`; unknown names are left as written."""

    def sub(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2) or match.group(3)
        return values.get(name, match.group(0))

    return _VAR.sub(sub, expr)


def unresolved(expr: str) -> list[str]:
    """Variables still in an expression after interpolation (Grafana would send them as text)."""
    names = []
    for match in _VAR.finditer(_strip_strings_outside_matchers(expr)):
        names.append("$" + (match.group(1) or match.group(2) or match.group(3)))
    return names


def _strip_strings_outside_matchers(expr: str) -> str:
    # "$1" (or "0$1") in label_replace's replacement is a regex group reference, not a variable.
    return re.sub(r'"[^"$]*\$\d+[^"]*"', '""', expr)


def parse_range(text: str) -> int:
    """`now-6h` / `6h` / `30m` / `2d` -> seconds."""
    ms = grafana_ms(text.strip().removeprefix("now-"), units=("s", "m", "h", "d", "w"))
    if ms is None:
        raise ConfigError(f"time range {text!r}: expected something like 6h, 30m or now-6h")
    return ms // 1000


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels") or [])  # collapsed rows keep their panels inside


def _template_values(dashboard: dict[str, Any], chosen: Mapping[str, str]) -> dict[str, str]:
    values: dict[str, str] = {}
    for var in (dashboard.get("templating") or {}).get("list") or []:
        name = var.get("name")
        if not name or var.get("type") in ("datasource",):
            continue
        if name in chosen:
            values[name] = chosen[name]
        elif var.get("type") == "custom" and not var.get("includeAll"):
            # Grafana sends the variable's current value; a custom variable's query is the list of choices.
            current = (var.get("current") or {}).get("value")
            values[name] = str(current or str(var.get("query") or "").split(",")[0].strip())
        elif var.get("type") in ("constant", "textbox") and not var.get("includeAll"):
            values[name] = str(var.get("query") or "")
        else:
            values[name] = var.get("allValue") or ".*"
    return {**values, **chosen}


def _variable_query(var: dict[str, Any]) -> str:
    query = var.get("query")
    if isinstance(query, dict):
        query = query.get("query")
    return str(query or var.get("definition") or "")


def _own_range(dashboard: dict[str, Any]) -> int:
    """The seconds of the dashboard's own default time range (`time.from`, 6 h when it has none)."""
    return parse_range(str((dashboard.get("time") or {}).get("from") or "now-6h"))


def dashboard_group(dashboard: dict[str, Any], origin: str, interp: Interpolation | None = None,
                    chosen: Mapping[str, str] | None = None) -> Group:
    """Every query of one dashboard's variables and panels, interpolated."""
    chosen = dict(chosen or {})
    if interp is None:
        interp = Interpolation(_own_range(dashboard))
    values = {**_template_values(dashboard, chosen), **interp.builtins()}
    title = str(dashboard.get("title") or origin)
    queries: list[CheckQuery] = []
    for var in (dashboard.get("templating") or {}).get("list") or []:
        if var.get("type") == "query":
            queries.append(CheckQuery(title, f"${var.get('name')}", VARIABLE,
                                      interpolate(_variable_query(var), values)))
    for panel in _panels(dashboard.get("panels") or []):
        for target in panel.get("targets") or []:
            expr = target.get("expr")
            if not expr or target.get("hide"):
                continue
            instant = bool(target.get("instant")) and not target.get("range")
            queries.append(CheckQuery(title, str(panel.get("title") or f"panel {panel.get('id')}"), PANEL,
                                 interpolate(str(expr), values), instant, str(target.get("refId") or "")))
    return Group(title, origin, tuple(queries), interp.range_s, interp.interval_s)


def load_dashboards(paths: list[Path]) -> list[tuple[dict[str, Any], str]]:
    """Dashboard JSON from files and directories (*.json), with the path each came from."""
    found: list[tuple[dict[str, Any], str]] = []
    for path in paths:
        read = 0
        for file, data in read_json_files(path, _unreadable_dashboard):
            read += 1
            if isinstance(data, dict) and isinstance(data.get("dashboard"), dict):
                data = data["dashboard"]  # an export wrapped the way Grafana's API returns it
            if not isinstance(data, dict) or "panels" not in data:
                raise ConfigError(f"{file}: not a Grafana dashboard (no panels)")
            found.append((data, str(file)))
        if path.is_dir() and not read:
            raise ConfigError(f"{path}: no dashboard JSON files (*.json)")
    return found


def _unreadable_dashboard(file: Path, exc: Exception) -> NoReturn:
    if isinstance(exc, FileNotFoundError):
        raise ConfigError(f"{file}: no such dashboard file (run `gpudash dashboards` first?)") from None
    raise ConfigError(f"{file}: not a readable dashboard JSON file: {exc}") from None


def dashboard_groups(dashboards: Sequence[tuple[dict[str, Any], str]], scrape_interval_s: int,
                     variables: dict[str, str] | None = None, range_s: int | None = None) -> list[Group]:
    """One group per dashboard; the range is each dashboard's own unless `range_s` is given."""
    groups = []
    for dashboard, origin in dashboards:
        span = range_s or _own_range(dashboard)
        groups.append(dashboard_group(dashboard, origin, Interpolation(span, scrape_interval_s),
                                      variables))
    return groups


def built_dashboards(settings: Settings, profile_name: str, definitions: Path = DEFINITIONS_DIR
                     ) -> list[tuple[dict[str, Any], str]]:
    """The dashboards generated in memory for a metric profile (what `gpudash dashboards --profile` writes)."""
    from gpudash.panels.build import build_all

    built = build_all(settings, definitions, profile_name=profile_name)
    return [(data, f"{definitions}/ (profile {profile_name})") for _, data in sorted(built.items())]


def rule_groups(paths: list[Path]) -> list[Group]:
    """Every alerting and recording rule of Prometheus rule files (and *.yml / *.yaml in directories)."""
    groups: list[Group] = []
    for path in paths:
        files = sorted([*path.glob("*.rules.yml"), *path.glob("*.rules.yaml")]) if path.is_dir() else [path]
        if path.is_dir() and not files:
            raise ConfigError(f"{path}: no rule files (*.rules.yml); run `gpudash rules` first")
        for file in files:
            try:
                data = yaml.safe_load(file.read_text(encoding="utf-8"))
            except FileNotFoundError:
                raise ConfigError(f"{file}: no such rule file (run `gpudash rules` first?)") from None
            except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError, ValueError) as exc:
                # RecursionError: nesting thousands deep; ValueError: an integer of thousands of digits
                raise ConfigError(f"{file}: not a readable rule file: {exc}") from None
            queries = []
            for group in (data or {}).get("groups") or []:
                for rule in group.get("rules") or []:
                    if "alert" in rule:
                        queries.append(CheckQuery(file.name, str(rule["alert"]), ALERT, str(rule.get("expr", ""))))
                    elif "record" in rule:
                        queries.append(CheckQuery(file.name, str(rule["record"]), RECORDING, str(rule.get("expr", ""))))
            if not queries:
                raise ConfigError(f"{file}: no rules found (expected groups: [{{rules: [...]}}])")
            groups.append(Group(f"{RULES_PREFIX}{file.name}", str(file), tuple(queries)))
    return groups


def one_line(expr: str) -> str:
    return " ".join(expr.split())
