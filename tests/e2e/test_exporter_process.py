"""`gpudash exporter` as a process on a GPU node: its own imports only, serving, a clean stop on SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import urllib.request
from pathlib import Path

from support.slack import budget
from support.waiting import eventually

from gpudash.stack.process import free_port

# Run on a GPU node, the exporter must not need the dashboard side: with these blocked it still serves.
BLOCKER = textwrap.dedent(
    """
    import importlib.abc, sys
    BLOCKED = ("grafanalib", "grafana_client", "prometheus_api_client", "niquests", "requests",
               "gpudash.config.loading", "gpudash.config.site", "gpudash.config.thresholds", "gpudash.config.fields",
               "gpudash.panels", "gpudash.promql", "gpudash.rules", "gpudash.sync",
               "gpudash.check", "gpudash.stack")

    class Blocker(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if any(name == b or name.startswith(b + ".") for b in BLOCKED):
                raise ModuleNotFoundError(f"blocked on a GPU node: {name}")
            return None

    sys.meta_path.insert(0, Blocker())
    from gpudash.cli import main
    try:
        main(sys.argv[1:])
    finally:
        loaded = sorted(m for m in sys.modules if any(m == b or m.startswith(b + ".") for b in BLOCKED))
        print("loaded-blocked:", loaded, file=sys.stderr)
    """
)


def _start(root: Path, *args: str) -> tuple[subprocess.Popen[str], int]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", BLOCKER, "exporter", "--listen", f"127.0.0.1:{port}", *args],
        cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(root)},
    )

    def ready() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"the exporter exited: {proc.communicate()[1]}")
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=budget(1)).status == 200

    try:
        eventually(ready, timeout=30, what="the exporter to answer /-/ready", ignoring=(OSError,))
    except AssertionError:
        proc.kill()
        raise
    return proc, port


def test_exporter_runs_with_the_dashboard_side_blocked_and_stops_on_sigterm(root: Path) -> None:
    proc, port = _start(root, "--simulate", "2", "--fault", "1=lost@0", "--interval", "200ms")
    try:
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=budget(5)).read().decode()
        assert 'DCGM_FI_DEV_GPU_UTIL{gpu="0"' in body
        assert 'gpudash_gpu_up{gpu="1"' in body and "gpudash_xid_errors_total" in body
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=budget(15))
    assert proc.returncode == 0, stderr
    assert "loaded-blocked: []" in stderr
    assert "received SIGTERM, shutting down" in stderr and "stopped" in stderr
