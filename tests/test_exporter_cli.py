"""`gpudash exporter` as a process: its own imports only, one-line errors, a clean stop on SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from gpudash.stack.process import free_port

# Run on a GPU node, the exporter must not need the dashboard side: with these blocked it still serves.
BLOCKER = textwrap.dedent(
    """
    import importlib.abc, sys
    BLOCKED = ("grafanalib", "grafana_client", "prometheus_api_client", "niquests", "requests",
               "gpudash.config.loading", "gpudash.config.site", "gpudash.config.thresholds", "gpudash.config.reader",
               "gpudash.dashboards", "gpudash.promql", "gpudash.rules", "gpudash.sync", "gpudash.check",
               "gpudash.stack")

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
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=1).read()
            return proc, port
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"exporter did not start: {proc.communicate()[1]}")


def test_exporter_runs_with_the_dashboard_side_blocked_and_stops_on_sigterm(root: Path) -> None:
    proc, port = _start(root, "--simulate", "2", "--fault", "1=lost@0", "--interval", "200ms")
    try:
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        assert 'DCGM_FI_DEV_GPU_UTIL{gpu="0"' in body
        assert 'gpudash_gpu_up{gpu="1"' in body and "gpudash_xid_errors_total" in body
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=15)
    assert proc.returncode == 0, stderr
    assert "loaded-blocked: []" in stderr
    assert "received SIGTERM, shutting down" in stderr and "stopped" in stderr


def _run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpudash", "exporter", *args], cwd=root, capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--fault", "1=leak"], "gpudash: --workload and --fault need --simulate N\n"),
        (["--simulate", "2", "--fault", "5=leak"], "gpudash: GPU index 5 out of range: the simulated node has GPUs"),
        (["--simulate", "2", "--fault", "1=boil"], "gpudash: --fault '1=boil': unknown fault 'boil'; expected"),
        (["--simulate", "2", "--interval", "fast"], "gpudash: --interval 'fast': expected a duration"),
        (["--simulate", "2", "--listen", "nowhere"], "gpudash: --listen 'nowhere': expected [HOST]:PORT"),
        (["--simulate", "2", "-f", "/no/such.csv"], "gpudash: /no/such.csv: cannot read collectors file"),
    ],
)
def test_bad_flags_are_one_line_and_exit_2(root: Path, args: list[str], message: str) -> None:
    done = _run(root, *args)
    assert done.returncode == 2
    assert done.stderr.startswith(message) and done.stderr.count("\n") == 1, done.stderr


def test_unknown_counter_field_is_a_clear_error_at_start(root: Path, tmp_path: Path) -> None:
    csv = tmp_path / "counters.csv"
    csv.write_text("DCGM_FI_DEV_GPU_UTIL, gauge, util\nDCGM_FI_DEV_MADE_UP, gauge, nope\n")
    done = _run(root, "--simulate", "1", "-f", str(csv))
    assert done.returncode == 2
    assert done.stderr == f"gpudash: {csv}:2: unknown field 'DCGM_FI_DEV_MADE_UP': the exporter cannot read it " \
                          "(`gpudash exporter --list-fields` shows the fields it can)\n"


def test_list_fields(root: Path) -> None:
    done = _run(root, "--list-fields")
    assert done.returncode == 0
    assert "DCGM_FI_DEV_FB_USED" in done.stdout and "gpudash_gpu_up" in done.stdout


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"basic_auth_users:\n  caf\xe9: x\n", "not UTF-8 text"),
        (b"a: &a [x, x]\nb: &b [*a, *a]\n", "line 1, column 4: anchors (&a) are not accepted in a config file"),
    ],
)
def test_an_unreadable_web_config_is_one_line_and_exit_2(root: Path, tmp_path: Path, content: bytes,
                                                          message: str) -> None:
    config = tmp_path / "web.yml"
    config.write_bytes(content)
    done = _run(root, "--simulate", "1", "--web-config", str(config))
    assert done.returncode == 2
    assert done.stderr == f"gpudash: {config}: {message}\n"
