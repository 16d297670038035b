"""Dashboard JSON type-checked by `tsc --strict` against Grafana's published types, one release at a time.

tests/schema/package.json pins one `@grafana/schema` per supported Grafana line as an npm alias
(`grafana-schema-13` = `npm:@grafana/schema@13.2.3`) and TypeScript; `make test` runs `npm ci` there.
`check` writes, per release, one .ts per dashboard (gpudash.panels.typescript) and a tsconfig that
points `@grafana/schema` at that release, runs tsc, and names each error's dashboard file and panel.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpudash.panels.typescript import (
    PRELUDE,
    PRELUDE_FILE,
    dashboard_typescript,
    release_of,
    tsconfig_json,
)
from gpudash.panels.v2_typescript import V2_PRELUDE, V2_PRELUDE_FILE, V2_TYPES, resource_typescript
from support.paths import ROOT
from support.slack import budget

SCHEMA_DIR = ROOT / "tests" / "schema"
_ALIAS = re.compile(r"npm:@grafana/schema@(\d+\.\d+\.\d+)")
_ERROR = re.compile(r"^(?P<file>[^(\s]+\.ts)\((?P<line>\d+),(?P<col>\d+)\): (?P<message>error TS\d+: .*)$")


@dataclass(frozen=True)
class Release:
    package: str  # the alias folder under node_modules, e.g. grafana-schema-13
    version: str  # the pinned @grafana/schema (= Grafana) release, e.g. 13.2.3

    @property
    def key(self) -> tuple[int, int]:
        return release_of(self.version)


@dataclass(frozen=True)
class Finding:
    release: Release
    dashboard: str  # the JSON file name
    panel: str  # the panel comment above the error ("panel 3: title"), "" outside the panels
    message: str  # "error TS2353: ..."

    def __str__(self) -> str:
        where = f"{self.dashboard}: {self.panel}" if self.panel else self.dashboard
        return f"@grafana/schema {self.release.version}: {where}: {self.message}"


def releases(schema_dir: Path = SCHEMA_DIR) -> list[Release]:
    """Every pinned @grafana/schema release in package.json, oldest first."""
    dependencies = json.loads((schema_dir / "package.json").read_text())["dependencies"]
    found = [Release(name, match.group(1)) for name, spec in dependencies.items()
             if (match := _ALIAS.fullmatch(spec))]
    return sorted(found, key=lambda r: r.key)


def tsc(schema_dir: Path = SCHEMA_DIR) -> Path:
    return schema_dir / "node_modules" / ".bin" / "tsc"


def write_project(dashboards: dict[str, dict[str, Any]], release: Release, folder: Path,
                  schema_dir: Path = SCHEMA_DIR) -> Path:
    """One .ts per dashboard (keyed by JSON file name), the prelude and a tsconfig; the tsconfig's path."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    files = [PRELUDE_FILE]
    (folder / PRELUDE_FILE).write_text(PRELUDE)
    for name, dashboard in sorted(dashboards.items()):
        ts = Path(name).stem + ".ts"
        (folder / ts).write_text(dashboard_typescript(dashboard, name, release.key))
        files.append(ts)
    config = folder / "tsconfig.json"
    config.write_text(tsconfig_json(files, str((schema_dir / "node_modules" / release.package).resolve())))
    return config


def check(dashboards: dict[str, dict[str, Any]], work: Path, schema_dir: Path = SCHEMA_DIR) -> list[Finding]:
    """tsc --strict over every dashboard against every pinned release; every error, named."""
    findings: list[Finding] = []
    for release in releases(schema_dir):
        config = write_project(dashboards, release, work / release.package, schema_dir)
        run = subprocess.run([str(tsc(schema_dir)), "-p", str(config)], capture_output=True, text=True,
                             timeout=budget(120), check=False)
        found = _findings(run.stdout + run.stderr, release, config.parent)
        if run.returncode != 0 and not found:
            raise RuntimeError(f"tsc failed without a type error for {release.version}: {run.stdout}{run.stderr}")
        findings += found
    return findings


def v2_releases(schema_dir: Path = SCHEMA_DIR) -> list[Release]:
    """The pinned releases that publish the dashboard v2 types (13.x)."""
    return [r for r in releases(schema_dir)
            if (schema_dir / "node_modules" / r.package / f"{V2_TYPES}.d.ts").exists()]


def check_v2(resources: dict[str, dict[str, Any]], work: Path, schema_dir: Path = SCHEMA_DIR) -> list[Finding]:
    """tsc --strict over every v2 resource (keyed by file name) against each release with v2 types; every error."""
    findings: list[Finding] = []
    for release in v2_releases(schema_dir):
        folder = work / f"{release.package}-v2"
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        files = [PRELUDE_FILE, V2_PRELUDE_FILE]
        (folder / PRELUDE_FILE).write_text(PRELUDE)
        (folder / V2_PRELUDE_FILE).write_text(V2_PRELUDE)
        for name, resource in sorted(resources.items()):
            ts = Path(name).stem + ".ts"
            (folder / ts).write_text(resource_typescript(resource, name))
            files.append(ts)
        config = folder / "tsconfig.json"
        config.write_text(tsconfig_json(files, str((schema_dir / "node_modules" / release.package).resolve())))
        run = subprocess.run([str(tsc(schema_dir)), "-p", str(config)], capture_output=True, text=True,
                             timeout=budget(120), check=False)
        found = _findings(run.stdout + run.stderr, release, folder)
        if run.returncode != 0 and not found:
            raise RuntimeError(f"tsc failed without a type error for {release.version}: {run.stdout}{run.stderr}")
        findings += found
    return findings


def _findings(output: str, release: Release, folder: Path) -> list[Finding]:
    found = []
    for line in output.splitlines():
        match = _ERROR.match(line.strip())
        if not match:
            continue
        source = folder / Path(match["file"]).name
        found.append(Finding(release, source.stem + ".json", _panel_at(source, int(match["line"])),
                             match["message"]))
    return found


def _panel_at(source: Path, line: int) -> str:
    # The generator writes "// panel <id>: <title>" above each panel's declaration and the dashboard last:
    # whichever comes first above the error says where it is.
    for text in reversed(source.read_text().splitlines()[:line]):
        if text.startswith("// panel "):
            return text[3:]
        if text.startswith("export const dashboard"):
            return ""
    return ""
