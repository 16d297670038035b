"""docs/architecture.md names only what exists: every path, Python name, thresholds.yaml key, recording rule and
make target it writes in backticks.

What is read: the inline code spans (`...`) of the document, outside fenced blocks (the pipeline picture is
drawn, not checked). A span is checked as the first of these it is, and otherwise not at all:

- a path: only letters, digits, `_ . - *` and `/`, with a `/` in it or a name ending in .py, .md, .yaml, .yml,
  .csv or .json (`gpudash/promql/query.py`, `promql/query.py`, `dashboards/fleet.py`, `tests/rules/`,
  `catalog.py`). It is written from the repository root or from the package folder gpudash/, and must exist
  under exactly one of the two: `promql/query.py` is gpudash/promql/query.py, `dashboards/fleet.py` the
  definition at the root, and a path found under both is ambiguous (write it from the root). A trailing `/`
  asks for a folder; a `*` makes a glob, which must match at least one file.
- a dotted name (`catalog.SIGNALS`, `PromQL.per_gpu`, `alerts.xid.overrides`): a key path of thresholds.yaml,
  or a Python object: the first part is a module or package of gpudash by its own name (`typescript`, `sim`,
  `gpudash`) or a class defined at the top of one (`PromQL`), each further part a submodule or an attribute (a
  dataclass field counts). One reading that exists is enough. Only dotted names that start with one of
  GRAFANA_NAMES (Grafana's JSON and types: `fieldConfig.defaults.custom`) are not checked.
- a recording rule (`cluster:gpu_sm_active:avg`): one of gpudash.promql.recordings' rules.
- `make TARGET ...`: a target of the Makefile.

PromQL, URLs, `$cluster`, `@grafana/schema` and shell commands are none of these: a space, `$`, `{`, `:`, `@`
or a parenthesis keeps a span from being a path or a name. Every missing one is reported at once.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections import Counter, defaultdict
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from gpudash.promql.recordings import RECORDING_BY_NAME

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "gpudash"
DOC = ROOT / "docs" / "architecture.md"

FENCED = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
SPAN = re.compile(r"`([^`]+)`")
PATH = re.compile(r"[\w.*-]+(?:/[\w.*-]+)*/?", re.ASCII)
FILE_ENDINGS = (".py", ".md", ".yaml", ".yml", ".csv", ".json")
DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+", re.ASCII)
RECORDING = re.compile(r"[a-z_]+:[a-z_]+:[a-z_]+")
MAKE = re.compile(r"make ([a-z][a-z-]*)(?: .*)?")
# Dotted names the document quotes from Grafana's dashboard JSON and TypeScript types, not from this repository.
GRAFANA_NAMES = frozenset({"custom", "fieldConfig", "filterValues", "LegendDisplayMode", "timepicker"})


# -- paths ------------------------------------------------------------------------------------------------


def _ours(path: Path) -> bool:
    return "__pycache__" not in path.parts


def _exists(base: Path, token: str) -> bool:
    rel = token.rstrip("/")
    if "*" in rel:
        return any(_ours(p) and p.is_file() for p in base.glob(rel))
    path = base / rel
    if token.endswith("/") or path.is_dir():
        # a folder counts when it holds a file of ours (not only the caches a moved module leaves behind)
        return path.is_dir() and any(p.is_file() and _ours(p.relative_to(path)) for p in path.rglob("*"))
    return path.is_file()


def path_problem(token: str) -> str | None:
    found = [base for base in (ROOT, PACKAGE) if _exists(base, token)]
    if not found:
        return f"`{token}`: no such path in the repository or in gpudash/"
    if len(found) > 1:
        return f"`{token}`: ambiguous, it exists in the repository root and in gpudash/: write it from the root"
    return None


# -- Python names -----------------------------------------------------------------------------------------


def _package_modules() -> dict[str, Path]:
    """Every module and package of gpudash by its dotted name (what the symlinked site template holds is not)."""
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if not _ours(path) or not path.resolve().is_relative_to(PACKAGE.resolve()):
            continue
        parts = ("gpudash", *path.relative_to(PACKAGE).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


MODULES = _package_modules()


def _readings() -> dict[str, list[tuple[str, tuple[str, ...]]]]:
    """First part of a dotted name -> (module to import, attributes to look up first): by module and class name."""
    readings: dict[str, list[tuple[str, tuple[str, ...]]]] = defaultdict(list)
    for module, path in MODULES.items():
        readings[module.rsplit(".", 1)[-1]].append((module, ()))
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                readings[node.name].append((module, (node.name,)))
    return readings


READINGS = _readings()


def _lookup(module: str, attributes: tuple[str, ...]) -> bool:
    """Whether module.attribute... exists: a submodule is imported, anything else looked up."""
    obj: Any = importlib.import_module(module)
    for i, attribute in enumerate(attributes):
        if isinstance(obj, ModuleType) and f"{obj.__name__}.{attribute}" in MODULES:
            obj = importlib.import_module(f"{obj.__name__}.{attribute}")
        elif hasattr(obj, attribute):
            obj = getattr(obj, attribute)
        else:
            fields = getattr(obj, "__dataclass_fields__", {}) if isinstance(obj, type) else {}
            return attribute in fields and i == len(attributes) - 1
    return True


THRESHOLDS: dict[str, Any] = yaml.safe_load((ROOT / "thresholds.yaml").read_text(encoding="utf-8"))


def _in_thresholds(parts: list[str]) -> bool:
    data: Any = THRESHOLDS
    for part in parts:
        if not isinstance(data, dict) or part not in data:
            return False
        data = data[part]
    return True


def name_problem(token: str) -> str | None:
    first, *rest = token.split(".")
    if _in_thresholds([first, *rest]):
        return None
    for module, attributes in READINGS.get(first, []):
        try:
            if _lookup(module, (*attributes, *rest)):
                return None
        except ImportError as exc:
            return f"`{token}`: {module} does not import: {exc}"
    return f"`{token}`: no such Python name in gpudash, nor key path of thresholds.yaml"


# -- the document -----------------------------------------------------------------------------------------


def spans(text: str) -> list[str]:
    """The inline code spans of a Markdown text, fenced blocks left out, each with its line breaks as spaces."""
    return [" ".join(span.split()) for span in SPAN.findall(FENCED.sub("", text))]


def kind(span: str) -> str | None:
    """What a span is checked as: path, name, recording or make; None for anything else."""
    if PATH.fullmatch(span) and ("/" in span or span.endswith(FILE_ENDINGS)):
        return "path"
    if DOTTED.fullmatch(span):
        return None if span.split(".")[0] in GRAFANA_NAMES else "name"
    if RECORDING.fullmatch(span):
        return "recording"
    if MAKE.fullmatch(span):
        return "make"
    return None


def _make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([a-z][a-z-]*):", text, re.MULTILINE))


def problems(text: str) -> tuple[list[str], Counter[str]]:
    """Every span of `text` that names what does not exist, and how many of each kind were checked."""
    targets = _make_targets()
    found: list[str] = []
    counted: Counter[str] = Counter()
    for span in dict.fromkeys(spans(text)):
        what = kind(span)
        problem = None
        if what == "path":
            problem = path_problem(span)
        elif what == "name":
            problem = name_problem(span)
        elif what == "recording" and span not in RECORDING_BY_NAME:
            problem = f"`{span}`: no such recording rule in gpudash.promql.recordings"
        elif what == "make" and (target := MAKE.fullmatch(span)) and target.group(1) not in targets:
            problem = f"`{span}`: no such target in the Makefile"
        if what is not None:
            counted[what] += 1
        if problem:
            found.append(problem)
    return found, counted


def test_every_path_and_name_in_the_architecture_doc_exists() -> None:
    found, counted = problems(DOC.read_text(encoding="utf-8"))
    assert not found, "docs/architecture.md names what does not exist:\n" + "\n".join(found)
    # the spans were found: the document names far more than this
    assert counted["path"] >= 100 and counted["name"] >= 60, counted
    assert counted["recording"] >= 4 and counted["make"] >= 8, counted


def test_only_paths_and_names_are_taken_for_them() -> None:
    assert [kind(s) for s in ("gpudash/promql/query.py", "promql/query.py", "tests/rules/", "catalog.py",
                              "dashboards/*.py", "init/template/")] == ["path"] * 6
    assert [kind(s) for s in ("catalog.SIGNALS", "PromQL.per_gpu", "alerts.xid.overrides")] == ["name"] * 3
    assert kind("cluster:gpu_sm_active:avg") == "recording" and kind("make demo ONCE=1") == "make"
    for other in ("$cluster", "https://grafana.example/d/x", "sum by (band)", "@grafana/schema", "13.2.3",
                  "ALERTS{alertstate=\"firing\"}", "${__data.fields.X:percentencode}", "tsc --strict --noEmit",
                  "dashboards/<name>.py", "x - x offset $__interval", "-12", "gpudash check --prometheus URL"):
        assert kind(other) is None, other
    # Grafana's own names are left alone; any other dotted span is a name of this repository
    assert kind("fieldConfig.defaults.custom") is None and kind("LegendDisplayMode.List") is None
    assert problems("`fieldConfig.defaults.custom` `renamed_module.NAME`")[0] == [
        "`renamed_module.NAME`: no such Python name in gpudash, nor key path of thresholds.yaml"]


def test_every_missing_one_is_reported_not_only_the_first() -> None:
    text = ("`promql/builders.py` `promql/query.py` `gpudash/dashboards/` `tests/nothing/*.py` `preview/forms_*.py`\n"
            "`catalog.SIGNALS` `catalog.NO_SUCH` `PromQL.per_gpu` `PromQL.no_such` `alerts.xid.overrides` "
            "`alerts.xid.no_such` `Recording.record` `typescript.PANEL_MODULES.x`\n"
            "```\n`inside/a/fence.py`\n```\n"
            "`cluster:gpu_sm_active:avg` `cluster:no_such:avg` `make generate` `make no-such`")
    found, counted = problems(text)
    assert [f.split("`")[1] for f in found] == [
        "promql/builders.py", "gpudash/dashboards/", "tests/nothing/*.py", "catalog.NO_SUCH", "PromQL.no_such",
        "alerts.xid.no_such", "typescript.PANEL_MODULES.x", "cluster:no_such:avg", "make no-such"]
    assert counted == Counter(path=5, name=8, recording=2, make=2)
