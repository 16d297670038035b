"""`gpudash sync --watch`: regenerate and sync when a definition or thresholds.yaml changes (bounded here)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from grafana_standin import StandIn

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
    thresholds = Path(__file__).resolve().parents[1] / "thresholds.yaml"
    with pytest.raises(GpudashError) as caught:
        regenerate(definitions, tmp_path / "json", thresholds, None)
    assert caught.value.format_message() == (
        "regenerating the dashboards failed: NameError: name 'undefined_name' is not defined")
    assert not (tmp_path / "json").exists()


@pytest.mark.e2e
@pytest.mark.slow
def test_sync_watch_follows_a_thresholds_change(repo_copy: Path) -> None:
    """The command as a person runs it: edit thresholds.yaml while `gpudash sync --watch` runs."""
    with StandIn("11.6.0") as grafana:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GRAFANA_", "GPUDASH_"))}
        env.update(GRAFANA_URL=grafana.url, GRAFANA_TOKEN=grafana.token)
        process = subprocess.Popen(
            [sys.executable, "-m", "gpudash", "sync", "--watch", "--interval", "0.2", "--watch-polls", "300"],
            cwd=repo_copy, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + 60
            while grafana.dashboard("gpudash-node") is None and time.monotonic() < deadline:
                time.sleep(0.1)
            assert grafana.dashboard("gpudash-node") is not None, "the first cycle did not push"
            first = grafana.dashboard("gpudash-node")
            thresholds = repo_copy / "thresholds.yaml"
            data = yaml.safe_load(thresholds.read_text())
            data["power"]["warning_ratio"] = 0.8
            thresholds.write_text(yaml.safe_dump(data, sort_keys=False))
            while grafana.dashboard("gpudash-node") == first and time.monotonic() < deadline:
                time.sleep(0.1)
            process.send_signal(signal.SIGINT)  # Ctrl-C, as a person stops it
            out, _ = process.communicate(timeout=30)
        finally:
            process.kill()
        assert process.returncode == 0, out
        assert out.rstrip().endswith("watch: stopped")
        node, fleet = grafana.dashboard("gpudash-node"), grafana.dashboard("gpudash-fleet")
        assert first is not None and node is not None and fleet is not None
        assert node["version"] == first["version"] + 1 and fleet["version"] == 1
        assert "thresholds.yaml changed" in out
        assert "updated  gpudash-node" in out
