"""Module size and naming: no Python file over 420 lines, no two modules of the package and no two test files
with one basename."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TREES = ("gpudash", "dashboards", "bench", "tests")
MAX_LINES = 420
# folders of generated or vendored code, never ours to split
NOT_OURS = frozenset({"node_modules", ".venv", "__pycache__"})
# a basename every package may have: the package itself, `python -m`, and each package's command shell
SHARED_BASENAMES = frozenset({"__init__.py", "__main__.py", "cli.py"})


def _python_files(tree: str) -> list[Path]:
    return sorted(path for path in (ROOT / tree).rglob("*.py")
                  if not NOT_OURS.intersection(path.relative_to(ROOT).parts))


def test_no_python_file_is_over_420_lines() -> None:
    sizes = {path.relative_to(ROOT).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
             for tree in TREES for path in _python_files(tree)}
    assert len(sizes) > 100  # the trees were found
    too_long = [f"{name} ({lines} lines)" for name, lines in sizes.items() if lines > MAX_LINES]
    assert not too_long, f"over {MAX_LINES} lines, split by idea: " + ", ".join(too_long)


def test_no_two_package_modules_share_a_basename() -> None:
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in _python_files("gpudash"):
        by_name[path.name].append(path.relative_to(ROOT).as_posix())
    assert "cli.py" in by_name  # the package was found
    shared = [" and ".join(paths) for name, paths in sorted(by_name.items())
              if len(paths) > 1 and name not in SHARED_BASENAMES]
    assert not shared, "modules with one basename: " + "; ".join(shared)


def test_no_two_test_files_share_a_basename() -> None:
    # tests/ has no __init__.py: pytest imports each test file by its basename, and a second file of one name is
    # an "import file mismatch" error wherever both are collected into one process (an xdist worker, say).
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in _python_files("tests"):
        if path.name.startswith("test_"):
            by_name[path.name].append(path.relative_to(ROOT).as_posix())
    assert len(by_name) > 100  # the tests were found
    shared = [" and ".join(paths) for paths in by_name.values() if len(paths) > 1]
    assert not shared, "test files with one basename: " + "; ".join(shared)
