"""`gpudash rules --format all` killed with SIGKILL at random points, run after run: once the next gpudash command
has looked, the folder holds every file of the old run or every file of the new one, and no staged file."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from support.cli import gpudash
from support.paths import ROOT

from gpudash.journal import JOURNAL

RUNS = 20
WRITE_WINDOW_S = 0.03  # after the journal appears, a kill lands within this (a write takes 10 to 70 ms)


def tree(folder: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else None for p in sorted(folder.rglob("*"))}


def thresholds(tmp_path: Path, name: str, window: str, group_wait: str) -> Path:
    text = (ROOT / "thresholds.yaml").read_text(encoding="utf-8")
    text = text.replace("    window: 2m ", f"    window: {window} ", 1).replace("    group_wait: 10s",
                                                                              f"    group_wait: {group_wait}", 1)
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def writing(out: Path) -> bool:
    """Whether a write is under way in `out`: a journal or a staged file is there."""
    return any(name.startswith(JOURNAL) or name.endswith(".tmp") for _, _, names in os.walk(out) for name in names)


def test_a_write_killed_anywhere_is_all_old_or_all_new_after_the_next_command(tmp_path: Path) -> None:
    configs = [thresholds(tmp_path, "a.yaml", "2m", "10s"), thresholds(tmp_path, "b.yaml", "3m", "20s")]
    common = ["--format", "all", "--dashboards-json", str(ROOT / "dashboards" / "json")]
    expected = []
    for index, config in enumerate(configs):
        ran = gpudash("rules", *common, "--out", str(tmp_path / f"ref-{index}"), "--thresholds", str(config))
        assert ran.code == 0, ran.err
        expected.append(tree(tmp_path / f"ref-{index}"))
    assert sum(expected[0][k] != expected[1][k] for k in expected[0]) >= 4  # several files change every run
    out = tmp_path / "out"
    shutil.copytree(tmp_path / "ref-0", out)
    now, rng, outcomes = 0, random.Random(), []
    started = time.monotonic()
    for run in range(RUNS):
        target = 1 - now
        proc = subprocess.Popen([sys.executable, "-m", "gpudash", "rules", *common, "--out", str(out),
                                 "--thresholds", str(configs[target])], cwd=ROOT,
                                env={**os.environ, "PYTHONPATH": str(ROOT)},
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if run % 4 == 3:  # anywhere in the run, before or after the write
            time.sleep(rng.uniform(0.0, 0.8))
        else:  # within the write: wait for it to begin (a condition, polled), then a moment more
            deadline = time.monotonic() + 30
            while not writing(out) and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.0005)  # leaves the run the CPU it needs
            time.sleep(0.0 if run % 4 == 0 else rng.uniform(0.0, WRITE_WINDOW_S))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        interrupted = writing(out)
        check = gpudash("rules", *common, "--out", str(out), "--thresholds", str(configs[target]), "--check")
        after = tree(out)
        assert after in expected, f"run {run}: neither all old nor all new: {sorted(after)}"
        became_new = after == expected[target]
        assert check.code == (0 if became_new else 1), check.err
        outcomes.append((interrupted, became_new))
        now = target if became_new else now
    during = [new for interrupted, new in outcomes if interrupted]
    print(f"{RUNS} kills in {time.monotonic() - started:.1f} s; {len(during)} during a write "
          f"({sum(during)} finished by the next command, {len(during) - sum(during)} undone)")
    assert during, "no kill landed during a write"
