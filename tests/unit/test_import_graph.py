"""The package's imports, read from the source: they go one way, and the exporter stays light."""

from __future__ import annotations

import ast
from pathlib import Path

import gpudash

PACKAGE = Path(gpudash.__file__).parent
# The exporter runs on every GPU node with only prometheus-client, nvidia-ml-py, click and pyyaml.
NOT_FOR_THE_EXPORTER = ("gpudash.config.loading", "gpudash.config.site", "gpudash.config.thresholds",
                        "gpudash.config.fields", "gpudash.panels", "gpudash.promql", "gpudash.rules",
                        "gpudash.sync", "gpudash.check", "gpudash.stack")


def _modules() -> dict[str, Path]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = ["gpudash", *path.relative_to(PACKAGE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _import_graph() -> dict[str, set[str]]:
    """Module -> the gpudash modules it imports, at the top or inside a function."""
    modules = _modules()

    def known(name: str) -> str:
        while name not in modules:
            name = name.rpartition(".")[0]
        return name

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(known(a.name) for a in node.names if a.name.startswith("gpudash"))
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join([*package.split(".")[: len(package.split(".")) - node.level + 1], base]).strip(".")
                if base.startswith("gpudash"):
                    targets.update(known(f"{base}.{a.name}") for a in node.names)
        targets.discard(name)
        graph[name] = targets
    return graph


def _path(graph: dict[str, set[str]], start: str, goal: str) -> list[str] | None:
    """The shortest import chain from `start` to `goal` (`goal` and any module under it), or None."""
    seen, frontier = {start}, [[start]]
    while frontier:
        chain = frontier.pop(0)
        for nxt in sorted(graph[chain[-1]]):
            if nxt == goal or nxt.startswith(goal + "."):
                return [*chain, nxt]
            if nxt not in seen:
                seen.add(nxt)
                frontier.append([*chain, nxt])
    return None


def test_the_graph_reads_the_imports() -> None:
    graph = _import_graph()
    assert "gpudash.yamltext" in graph["gpudash.rules.generated_files"]
    assert "gpudash.check.judge" in graph["gpudash.check.tables"]


def test_no_module_imports_itself_back() -> None:
    graph = _import_graph()
    cycles = [chain for name in graph for dep in graph[name] if (chain := _path(graph, dep, name))]
    assert cycles == []


def test_the_exporter_imports_nothing_from_the_dashboard_side() -> None:
    graph = _import_graph()
    exporter = [name for name in graph if name == "gpudash.exporter" or name.startswith("gpudash.exporter.")]
    assert exporter
    chains = [chain for name in exporter for banned in NOT_FOR_THE_EXPORTER if (chain := _path(graph, name, banned))]
    assert chains == []
