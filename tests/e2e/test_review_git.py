"""`gpudash diff --git` and the git diff driver on a two-commit repository: a memory threshold moved in
thresholds.yaml (0.90 -> 0.85 orange) and the node dashboard regenerated, as the fixture's two versions hold.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import gpudash
from support.paths import ROOT
from support.slack import budget

FIXTURES = ROOT / "tests" / "fixtures" / "review"
STEPS = "thresholds green, 0.9 orange, 0.95 red -> green, 0.85 orange, 0.95 red"


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(repo)}
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, env=env, timeout=budget(60))
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    target = tmp_path / "site" / "dashboards" / "json" / "gpudash-node.json"
    target.parent.mkdir(parents=True)
    repo = tmp_path / "site"
    _git(repo, "init", "-q", "-b", "main")
    shutil.copy(ROOT / ".gitattributes", repo / ".gitattributes")
    shutil.copy(FIXTURES / "gpudash-node.before.json", target)
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "node dashboard")
    shutil.copy(FIXTURES / "gpudash-node.after.json", target)
    _git(repo, "commit", "-q", "-am", "memory turns orange at 85 %")
    return repo


def test_diff_git_names_the_panels_and_steps_that_moved(repo: Path) -> None:
    done = gpudash("diff", "--git", "HEAD~1", "--git-to", "HEAD", cwd=repo)
    assert done.code == 1, done.err
    lines = done.out.splitlines()
    assert lines[0] == "differs     gpudash-node.json 'GPU node': 0 panels added, 0 removed, 3 changed"
    assert f"  ~ panel 13 'Memory used per GPU': {STEPS}" in lines
    assert f"  ~ panel 6 'Memory used': {STEPS}" in lines
    assert lines[-1] == "diff HEAD~1..HEAD: 1 of 1 dashboards differ in dashboards/json"


def test_diff_git_against_the_working_tree_and_for_one_path(repo: Path) -> None:
    assert gpudash("diff", "--git", "HEAD", cwd=repo).code == 0  # the working tree is HEAD
    node = repo / "dashboards" / "json" / "gpudash-node.json"
    shutil.copy(FIXTURES / "gpudash-node.before.json", node)
    done = gpudash("diff", "--git", "HEAD", str(node.relative_to(repo)), cwd=repo)
    assert done.code == 1 and "0.85 orange, 0.95 red -> green, 0.9 orange" in done.out
    assert gpudash("diff", "--git", "HEAD", "dashboards/json/other.json", cwd=repo).code == 0


def test_a_wrong_revision_is_one_line(repo: Path) -> None:
    done = gpudash("diff", "--git", "no-such-branch", cwd=repo)
    assert done.code == 2
    assert done.err.strip() == f"gpudash: git revision 'no-such-branch': no such commit in {repo}"


def test_git_diff_and_log_speak_in_words_through_the_driver(repo: Path) -> None:
    assert "dashboards/json/*.json diff=gpudash" in (repo / ".gitattributes").read_text()
    driver = f"env PYTHONPATH={shlex.quote(str(ROOT))} {shlex.quote(sys.executable)} -m gpudash diff --textconv"
    _git(repo, "config", "diff.gpudash.textconv", driver)
    shown = _git(repo, "diff", "HEAD~1", "HEAD")
    assert "-    thresholds: base green | 0.9 orange | 0.95 red\n" in shown
    assert "+    thresholds: base green | 0.85 orange | 0.95 red\n" in shown
    assert " @@ panel 'Memory used per GPU' (bargauge) x=0 y=24 w=8 h=9\n" in shown  # the hunk names its panel
    assert '"value": 0.85' not in shown  # words, not JSON
    log = _git(repo, "log", "-p", "--format=commit %s")
    assert "commit memory turns orange at 85 %" in log and "+    thresholds: base green | 0.85 orange" in log
