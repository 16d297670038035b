"""`gpudash sync --watch` as a process, stopped with Ctrl-C, following a thresholds.yaml change."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml
from grafana_standin import StandIn
from support.slack import budget
from support.waiting import eventually

INTERVAL_S = 0.2
# `python -m gpudash` with Ctrl-C raising KeyboardInterrupt, as in a terminal: a suite started in the background
# (a script's `&`, nohup) hands SIGINT down ignored, and Python leaves an ignored SIGINT ignored.
AS_IN_A_TERMINAL = ("import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
                    "runpy.run_module('gpudash', run_name='__main__', alter_sys=True)")


@pytest.mark.slow
def test_sync_watch_follows_a_thresholds_change(repo_copy: Path) -> None:
    """The command as a person runs it: edit thresholds.yaml while `gpudash sync --watch` runs."""
    with StandIn("11.6.0") as grafana:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GRAFANA_", "GPUDASH_"))}
        env.update(GRAFANA_URL=grafana.url, GRAFANA_TOKEN=grafana.token)
        # --watch-polls: the watcher ends by itself if the test cannot stop it, long after any wait below
        polls = int(budget(300) / INTERVAL_S)
        process = subprocess.Popen(
            [sys.executable, "-c", AS_IN_A_TERMINAL, "sync", "--watch", "--interval", str(INTERVAL_S),
             "--watch-polls", str(polls)],
            cwd=repo_copy, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines: list[str] = []  # what it printed so far, read as it prints (a cycle reports once it is done)
        assert process.stdout is not None
        reader = threading.Thread(target=lambda: lines.extend(process.stdout or ()), daemon=True)
        reader.start()
        try:
            # The watcher notes the files' times after its first cycle and then says it is watching: an edit
            # made before that line (while the first cycle still pushes) would count as already seen.
            eventually(lambda: any(line.startswith("watch: watching") for line in lines), timeout=60,
                       what="the first cycle to end and the watching to begin")
            first = grafana.dashboard("gpudash-node")
            assert first is not None, "".join(lines)
            thresholds = repo_copy / "thresholds.yaml"
            data = yaml.safe_load(thresholds.read_text())
            data["power"]["warning_ratio"] = 0.8
            thresholds.write_text(yaml.safe_dump(data, sort_keys=False))
            eventually(lambda: any("updated  gpudash-node" in line for line in lines), timeout=60,
                       what="the cycle's report of the push that follows the thresholds.yaml change")
            process.send_signal(signal.SIGINT)  # Ctrl-C, as a person stops it
            process.wait(timeout=budget(30))
            reader.join(timeout=budget(30))
        finally:
            process.kill()
        out = "".join(lines)
        assert process.returncode == 0, out
        assert out.rstrip().endswith("watch: stopped")
        node, fleet = grafana.dashboard("gpudash-node"), grafana.dashboard("gpudash-fleet")
        assert node is not None and fleet is not None
        assert node["version"] == first["version"] + 1 and fleet["version"] == 1
        assert node != first
        assert "thresholds.yaml changed" in out
