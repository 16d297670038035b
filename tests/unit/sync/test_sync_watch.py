"""`gpudash sync --watch`: regenerate and sync when a definition or thresholds.yaml changes (bounded here)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from support.paths import ROOT

from gpudash.errors import GpudashError
from gpudash.sync.watch import changed, regenerate, snapshot, watch


def test_snapshot_sees_new_changed_and_removed_files(tmp_path: Path) -> None:
    (tmp_path / "defs").mkdir()
    (tmp_path / "defs" / "a.py").write_text("x")
    (tmp_path / "defs" / "notes.txt").write_text("ignored")
    thresholds = tmp_path / "thresholds.yaml"
    thresholds.write_text("a: 1")
    before = snapshot([tmp_path / "defs", thresholds, tmp_path / "missing.yaml"])
    assert set(before) == {tmp_path / "defs" / "a.py", thresholds}
    os.utime(thresholds, (1, 1))
    (tmp_path / "defs" / "b.py").write_text("y")
    after = snapshot([tmp_path / "defs", thresholds])
    assert changed(before, after) == [tmp_path / "defs" / "b.py", thresholds]


def test_watch_runs_once_then_after_each_change_and_survives_failures(tmp_path: Path) -> None:
    watched = tmp_path / "thresholds.yaml"
    watched.write_text("a: 1")
    cycles: list[str] = []
    lines: list[str] = []
    edits = iter([lambda: os.utime(watched, (5, 5)), lambda: None, lambda: os.utime(watched, (9, 9))])

    def cycle() -> None:
        cycles.append("sync")
        if len(cycles) == 2:
            raise GpudashError("dashboard 'A' (a): Grafana answered 500: down")

    ran = watch([watched], cycle, lines.append, interval=0.01, polls=3, sleep=lambda _: next(edits)())
    assert ran == 3 and cycles == ["sync"] * 3
    assert f"watch: {watched} changed" in lines
    assert "watch: dashboard 'A' (a): Grafana answered 500: down" in lines


def test_regenerate_names_a_broken_definition_in_one_line(tmp_path: Path) -> None:
    definitions = tmp_path / "dashboards"
    definitions.mkdir()
    (definitions / "broken.py").write_text("UID = 'x'\nundefined_name\n")
    with pytest.raises(GpudashError) as caught:
        regenerate(definitions, tmp_path / "json", ROOT / "thresholds.yaml", None)
    assert caught.value.format_message() == (
        "regenerating the dashboards failed: NameError: name 'undefined_name' is not defined")
    assert not (tmp_path / "json").exists()


def test_regenerate_writes_the_v2_resources_beside_the_classic_json(tmp_path: Path) -> None:
    definitions = tmp_path / "dashboards"
    definitions.mkdir()
    shutil.copy(ROOT / "dashboards" / "node.py", definitions / "node.py")
    regenerate(definitions, definitions / "json", ROOT / "thresholds.yaml", None)
    for folder in ("json", "v2"):  # as `gpudash dashboards` writes them: the committed files, byte for byte
        written = definitions / folder / "gpudash-node.json"
        assert written.read_bytes() == (ROOT / "dashboards" / folder / "gpudash-node.json").read_bytes()
    assert sorted(p.name for p in (definitions / "v2").glob("*.json")) == ["gpudash-node.json"]
