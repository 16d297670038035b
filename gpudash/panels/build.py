"""Build the dashboards from their definitions (dashboards/*.py), render them deterministically, write them.

A definition file is plain Python that defines `UID`, `TITLE` and `build(ctx: BuildContext) -> Dashboard`
(a grafanalib Dashboard). The output is modern Grafana JSON (see gpudash.panels.grafanalib_fixups) with
sorted keys, written all or nothing to `<out>/<uid>.json`; two runs give identical bytes. A JSON file no
definition produces any more is deleted only when gpudash recorded writing it and it is unchanged (see
gpudash.files).
"""

from __future__ import annotations

import ast
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from grafanalib import core as G
from grafanalib._gen import DashboardEncoder

from gpudash.catalog import Profile, profile
from gpudash.config.loading import Settings
from gpudash.config.thresholds import Thresholds
from gpudash.errors import ConfigError, StaleOutputError
from gpudash.files import Outcome, stale_owned, write_owned
from gpudash.panels.grafanalib_fixups import modernize
from gpudash.promql.for_settings import promql_for
from gpudash.promql.query import Matcher, PromQL, Scope, dashboard_scope
from gpudash.repository import DEFINITIONS_DIR, GRAFANA_UID, TAG


@dataclass(frozen=True)
class BuildContext:
    settings: Settings
    profile: Profile
    recorded: bool = True

    @property
    def thresholds(self) -> Thresholds:
        return self.settings.thresholds

    @property
    def job_label(self) -> str:
        """The series label that names a job (gpudash.yaml `jobs.label`)."""
        return self.settings.site.job_label

    def promql(self, level: str) -> PromQL:
        scope = self.job_scope() if level == "job" else dashboard_scope(self.profile, level)
        return promql_for(self.settings, scope, recorded=self.recorded, profile=self.profile)

    def job_scope(self) -> Scope:
        """The job dashboard's matchers: $cluster, $job, and only series that carry a job at all."""
        matchers: tuple[Matcher, ...] = (("cluster", "=~", "$cluster"), (self.job_label, "=~", "$job"),
                                         (self.job_label, "!=", ""))
        return Scope(matchers)

    def variables(self, level: str) -> G.Templating:
        """$datasource, $cluster; on the node dashboard also $instance (by cluster) and $gpu (by instance); on
        the health dashboard $instance; on the job dashboard $job (the values of the site's job label, by
        cluster)."""
        anchor = self.profile.ref("gpu_util").name
        chain = [("cluster", "Cluster", anchor)]
        if level in ("node", "health"):
            chain += [("instance", "Node", f'{anchor}{{cluster=~"$cluster"}}')]
        if level == "node":
            chain += [(self.profile.gpu_label, "GPU", f'{anchor}{{cluster=~"$cluster",instance=~"$instance"}}')]
        elif level == "job":
            # One series per job when the recording rules run, instead of every GPU's.
            jobs = "cluster_job:gpu_count:count" if self.recorded else anchor
            chain += [(self.job_label, "Job", f'{jobs}{{cluster=~"$cluster"}}')]
        templates = [G.Template(name="datasource", label="Data source", query="prometheus", type="datasource")]
        for label, title, series in chain:
            name = {self.profile.gpu_label: "gpu", self.job_label: "job"}.get(label, label)
            templates.append(G.Template(
                name=name, label=title, query=f"label_values({series}, {label})", dataSource="${datasource}",
                includeAll=True, multi=True, allValue=".*", sort=3 if name == "gpu" else 1,
            ))
        return G.Templating(templates)

    def dashboard(self, uid: str, title: str, description: str, level: str, panels: list[G.Panel],
                  links: list[G.DashboardLink]) -> G.Dashboard:
        knobs = self.settings.thresholds.dashboards
        return G.Dashboard(
            title=title, uid=uid, description=description, tags=[TAG, "gpu", level],
            templating=self.variables(level), panels=panels, links=links, timezone="browser",
            time=G.Time(f"now-{knobs.default_range}", "now"), refresh=str(knobs.refresh),
        )


def definition_files(definitions: Path) -> list[Path]:
    if not definitions.is_dir():
        raise ConfigError(f"{definitions}: no such directory of dashboard definitions")
    files = sorted(p for p in definitions.glob("*.py") if not p.name.startswith("_"))
    if not files:
        raise ConfigError(f"{definitions}: no dashboard definitions (*.py) found")
    return files


# What a definition written for an earlier layout of gpudash imports, and where it lives now.
RENAMED_MODULES = {
    "gpudash.dashboards.panels": "gpudash.panels.visualizations",
    "gpudash.dashboards.health_alerts": "gpudash.panels.health_actions",
    "gpudash.dashboards": "gpudash.panels",
    "gpudash.layout": "gpudash.repository",
}
RENAMED_NAMES = {"Layout": "PanelGrid"}


def _renamed_imports(path: Path) -> list[str]:
    """`line N: old is now new` for each import of a module or name gpudash has renamed since."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        for name in modules:
            old = next((o for o in RENAMED_MODULES if name == o or name.startswith(o + ".")), None)
            if old is not None:
                found.append(f"line {node.lineno}: {name} is now {RENAMED_MODULES[old] + name[len(old):]}")
        if isinstance(node, ast.ImportFrom):
            found += [f"line {node.lineno}: {a.name} is now {RENAMED_NAMES[a.name]}"
                      for a in node.names if a.name in RENAMED_NAMES]
    return found


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"gpudash_dashboard_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{path}: cannot load as a Python module")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ImportError:
        moved = _renamed_imports(path)
        if not moved:
            raise
        raise ConfigError(f"{path}: imports what gpudash has renamed ({'; '.join(moved)})") from None
    for attribute in ("UID", "build"):
        if not hasattr(module, attribute):
            raise ConfigError(f"{path}: a dashboard definition must define {attribute}")
    return module


def to_json(dashboard: G.Dashboard) -> dict[str, Any]:
    raw = json.loads(json.dumps(dashboard.to_json_data(), cls=DashboardEncoder))
    return modernize(raw)


def build_all(settings: Settings, definitions: Path = DEFINITIONS_DIR, recorded: bool = True,
              profile_name: str | None = None) -> dict[str, dict[str, Any]]:
    """Every dashboard, keyed by output file name (`<uid>.json`)."""
    ctx = BuildContext(settings, profile(profile_name or settings.site.profile), recorded)
    built: dict[str, dict[str, Any]] = {}
    for path in definition_files(definitions):
        module = _load(path)
        data = to_json(module.build(ctx))
        if data.get("uid") != module.UID:
            raise ConfigError(f"{path}: build() returned uid {data.get('uid')!r}, expected UID {module.UID!r}")
        if not isinstance(module.UID, str) or not GRAFANA_UID.fullmatch(module.UID):
            raise ConfigError(f"{path}: UID {module.UID!r}: expected 1-40 letters, digits, '-' or '_' (Grafana's rule)")
        name = f"{module.UID}.json"
        if name in built:
            raise ConfigError(f"{path}: uid {module.UID!r} is used by another definition")
        built[name] = data
    return built


def render(dashboard: dict[str, Any]) -> bytes:
    return (json.dumps(dashboard, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def write_all(built: dict[str, dict[str, Any]], out: Path) -> Outcome:
    """Write every dashboard all or nothing; delete the JSON files gpudash wrote that no definition produces."""
    return write_owned(out, {name: render(d) for name, d in built.items()}, "*.json")


def check_all(built: dict[str, dict[str, Any]], out: Path) -> None:
    """Raise StaleOutputError naming everything `write_all` would change; files gpudash did not write are ignored."""
    stale = stale_owned(out, {name: render(d) for name, d in built.items()}, "*.json")
    if stale:
        raise StaleOutputError(f"stale dashboards, run `make dashboards`: {', '.join(stale)}")
