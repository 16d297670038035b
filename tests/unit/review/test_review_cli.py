"""`gpudash diff --textconv` as git calls it, and the offline options' one-line errors."""

from __future__ import annotations

from pathlib import Path

from support.cli import gpudash
from support.paths import ROOT

NODE = ROOT / "tests" / "fixtures" / "review" / "gpudash-node.before.json"


def test_textconv_prints_the_rendering_and_contacts_nothing() -> None:
    done = gpudash("diff", "--textconv", str(NODE), env={"GRAFANA_URL": None})
    assert done.code == 0, done.err
    assert done.out.startswith("dashboard gpudash-node 'GPU node'\n")
    assert "panel 'Memory used per GPU' (bargauge) x=0 y=24 w=8 h=9\n" in done.out


def test_textconv_of_a_file_that_is_not_a_dashboard_is_one_line(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{ not json")
    done = gpudash("diff", "--textconv", str(broken))
    assert done.code == 2 and done.out == ""
    assert done.err.startswith(f"gpudash: {broken}: not a readable dashboard JSON file: ")
    assert done.err.count("\n") == 1
    missing = gpudash("diff", "--textconv", str(tmp_path / "gone.json"))
    assert (missing.code, missing.err) == (2, f"gpudash: {tmp_path / 'gone.json'}: no such dashboard file\n")


def test_offline_options_that_cannot_work_together() -> None:
    assert gpudash("diff", "--git-to", "HEAD").err == "gpudash: --git-to and dashboard paths need --git REF\n"
    both = gpudash("diff", "--textconv", str(NODE), "--git", "HEAD")
    assert (both.code, both.err) == (2, "gpudash: --textconv takes one file and no other diff option\n")
