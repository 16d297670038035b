"""The imports, read from the source: they go one way between modules and between packages, and the exporter
stays light. The source read is gpudash/, bench/ and the tests' shared helpers (tests/support,
tests/grafana_standin), each module named as it is imported."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import gpudash

PACKAGE = Path(gpudash.__file__).parent
ROOT = PACKAGE.parent
# (folder, the name its modules are imported under): bench/ from the repository root, the helpers from tests/
SOURCES = ((PACKAGE, "gpudash"), (ROOT / "bench", "bench"), (ROOT / "tests" / "support", "support"),
           (ROOT / "tests" / "grafana_standin", "grafana_standin"))
# The exporter runs on every GPU node with only prometheus-client, nvidia-ml-py, click and pyyaml.
NOT_FOR_THE_EXPORTER = ("gpudash.config.loading", "gpudash.config.site", "gpudash.config.thresholds",
                        "gpudash.config.fields", "gpudash.panels", "gpudash.promql", "gpudash.rules",
                        "gpudash.sync", "gpudash.check", "gpudash.stack", "gpudash.compare", "gpudash.kube")

Graph = dict[str, set[str]]


def _modules() -> dict[str, Path]:
    modules = {}
    for folder, name in SOURCES:
        for path in folder.rglob("*.py"):
            parts = [name, *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def _import_graph() -> Graph:
    """Module -> the modules of SOURCES it imports, at the top or inside a function."""
    modules = _modules()

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: Graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: list[str | None] = []
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found += [known(a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join([*package.split(".")[: len(package.split(".")) - node.level + 1], base]).strip(".")
                found += [known(f"{base}.{a.name}") for a in node.names]
        graph[name] = {t for t in found if t is not None and t != name}
    return graph


def _package_graphs(graph: Graph) -> dict[str, Graph]:
    """For each package, the imports between its members (its modules and its subpackages, each taken whole):
    `a.b.x` importing `a.c.y` is `b -> c` inside `a`. A package's own __init__ is not a member."""
    nested: dict[str, Graph] = {}
    for source, targets in graph.items():
        for target in targets:
            s, t = source.split("."), target.split(".")
            common = 0
            while common < min(len(s), len(t)) and s[common] == t[common]:
                common += 1
            if common == 0 or common == len(s) or common == len(t):
                continue  # between sources, or between a package's __init__ and its own members
            package = ".".join(s[:common])
            nested.setdefault(package, {}).setdefault(s[common], set()).add(t[common])
    return nested


def _path(graph: Graph, start: str, goal: str, under: bool = True) -> list[str] | None:
    """The shortest import chain from `start` to `goal` (and, when `under`, any module under it), or None."""
    seen, frontier = {start}, [[start]]
    while frontier:
        chain = frontier.pop(0)
        for nxt in sorted(graph.get(chain[-1], ())):
            if nxt == goal or (under and nxt.startswith(goal + ".")):
                return [*chain, nxt]
            if nxt not in seen:
                seen.add(nxt)
                frontier.append([*chain, nxt])
    return None


def _cycles(graph: Graph) -> list[list[str]]:
    """Each chain of imports that comes back to where it started, as `[a, b, ..., a]`."""
    return [[name, *chain] for name in sorted(graph) for dep in sorted(graph[name])
            if (chain := _path(graph, dep, name, under=False))]


def _loops(nested: dict[str, Graph]) -> Iterable[str]:
    for package, members in sorted(nested.items()):
        for chain in _cycles(members):
            yield f"{package}: {' -> '.join(chain)}"


def test_the_graph_reads_the_imports() -> None:
    graph = _import_graph()
    assert "gpudash.yamltext" in graph["gpudash.rules.generated_files"]
    assert "gpudash.check.judge" in graph["gpudash.check.tables"]
    assert "bench.promtool_samples" in graph["bench.backtest_quality"]
    assert "support.paths" in graph["support.site_query"]


def test_the_package_graph_finds_a_loop_between_packages() -> None:
    looped = {"gpudash.a.x": {"gpudash.b.y"}, "gpudash.b.y": set(), "gpudash.b.z": {"gpudash.a.w"},
              "gpudash.a.w": set()}
    assert _package_graphs(looped) == {"gpudash": {"a": {"b"}, "b": {"a"}}}
    assert list(_loops(_package_graphs(looped))) == ["gpudash: a -> b -> a", "gpudash: b -> a -> b"]
    # no module imports itself back, yet the two packages lean on each other
    assert _cycles(looped) == []


def test_no_module_imports_itself_back() -> None:
    assert _cycles(_import_graph()) == []


def test_no_two_packages_import_each_other() -> None:
    assert list(_loops(_package_graphs(_import_graph()))) == []


def test_the_exporter_imports_nothing_from_the_dashboard_side() -> None:
    graph = _import_graph()
    exporter = [name for name in graph if name == "gpudash.exporter" or name.startswith("gpudash.exporter.")]
    assert exporter
    chains = [chain for name in exporter for banned in NOT_FOR_THE_EXPORTER if (chain := _path(graph, name, banned))]
    assert chains == []
