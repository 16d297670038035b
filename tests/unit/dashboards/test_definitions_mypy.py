"""mypy checks the dashboard definitions (dashboards/*.py) as `make lint` runs it: the project's configuration
covers each definition once, as strictly as gpudash/, and a mistyped definition fails naming its file and line.

mypy runs in this process from the repository root (so it reads pyproject.toml and this checkout's gpudash),
with a cache of its own for each run.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from mypy import api
from mypy.main import process_options
from support.paths import ROOT

DEFINITIONS = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "dashboards").glob("*.py"))

# Slips in a copy of the fleet definition, each on its own line, and the error mypy must give for it.
MISTAKES = (
    # memory's warning level read by its thresholds.yaml key: the field is Levels.warning
    ("level_steps(t.memory), 0, 1)", "level_steps(t.memory.warning_ratio), 0, 1)",
     "attr-defined", '"Levels" has no attribute "warning_ratio"'),
    # one section of the thresholds where the panel builder takes all of them
    ("utilization_steps(t), links=[to_node]", "utilization_steps(t.utilization), links=[to_node]",
     "arg-type", 'Argument 1 to "utilization_steps" has incompatible type "Utilization"; expected "Thresholds"'),
    # a keyword grafanalib's DashboardLink does not take
    ('G.DashboardLink(title="GPU node", uri=', 'G.DashboardLink(title="GPU node", url=',
     "call-arg", 'Unexpected keyword argument "url" for "DashboardLink"'),
)

ERROR = re.compile(r"^(?P<path>.+?):(?P<line>\d+): error: (?P<message>.*?)  \[(?P<code>[a-z-]+)\]$")


@pytest.fixture
def in_root(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.chdir(ROOT)
    yield


def test_the_configuration_checks_each_definition_once_as_strictly_as_gpudash(in_root: None) -> None:
    sources, options = process_options([])
    by_path = {Path(s.path or "").as_posix(): s.module for s in sources}
    assert {p: m for p, m in by_path.items() if p.startswith("dashboards/")} == {
        p: f"dashboards.{Path(p).stem}" for p in DEFINITIONS}
    assert not [p for p in by_path if p.startswith("gpudash/init/template/")], "the template's link is checked too"
    for module in ("gpudash.panels.build", *(f"dashboards.{Path(p).stem}" for p in DEFINITIONS)):
        strictness = options.clone_for_module(module)
        assert strictness.disallow_untyped_defs and strictness.check_untyped_defs, module


def test_mypy_passes_the_definitions_and_names_each_mistake_by_file_and_line(in_root: None, tmp_path: Path) -> None:
    text = (ROOT / "dashboards" / "fleet.py").read_text(encoding="utf-8")
    expected = set()
    for before, after, code, message in MISTAKES:
        assert text.count(before) == 1, f"dashboards/fleet.py changed: pick another line for {before!r}"
        text = text.replace(before, after)
        line = next(n for n, source in enumerate(text.splitlines(), 1) if after in source)
        expected.add((line, code, message))
    mistyped = tmp_path / "mistyped.py"
    mistyped.write_text(text, encoding="utf-8")

    # A cache of its own: from the shared one, mypy replays the errors of an earlier run's copy under that
    # run's path.
    out, err, status = api.run(["--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(tmp_path / "cache"),
                                *DEFINITIONS, str(mistyped)])

    report = f"mypy said:\n{out}{err}"
    assert status == 1 and not err, report
    errors = [m for m in map(ERROR.match, out.splitlines()) if m]
    assert {m["path"] for m in errors} == {str(mistyped)}, report
    assert {(int(m["line"]), m["code"], m["message"]) for m in errors} == expected, report
