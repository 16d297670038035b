"""deploy/slurm/gpudash-slurm-node-state.sh with a fake `scontrol`: the series GPUNodeDrained reads, one per
node, 1 for DRAIN or MAINT; written whole, and removed (failing open) when scontrol fails."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from support.paths import ROOT

from gpudash.rules.node_state import SLURM_NODE_DRAINED

SCRIPT = ROOT / "deploy" / "slurm" / "gpudash-slurm-node-state.sh"
NODES = """\
NodeName=gpu001 Arch=x86_64 CoresPerSocket=48 CPUAlloc=0 State=IDLE ThreadsPerCore=1
NodeName=gpu002 Arch=x86_64 CPUAlloc=12 State=MIXED+DRAIN Reason=xid79_[root@2026-12-01T20:00:00]
NodeName=gpu003 Arch=x86_64 State=IDLE+MAINT+RESERVED
NodeName=gpu004 Arch=x86_64 State=DOWN+DRAIN+NOT_RESPONDING
NodeName=gpu005 Arch=x86_64 State=ALLOCATED+DRAINING_SOON_NOT_A_FLAG
"""


def run(tmp_path: Path, output: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    fake = tmp_path / "scontrol"
    fake.write_text("#!/bin/sh\n[ \"$1 $2 $3\" = '--oneliner show node' ] || exit 9\n"
                    f"cat <<'X'\n{output}X\nexit {code}\n")
    fake.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "GPUDASH_TEXTFILE_DIR": str(tmp_path), "GPUDASH_SCONTROL": str(fake)}
    return subprocess.run(["sh", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=30)


def series(path: Path) -> dict[str, int]:
    found = {}
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            match = re.fullmatch(rf'{SLURM_NODE_DRAINED}{{node="([^"]+)"}} ([01])', line)
            assert match, line
            found[match[1]] = int(match[2])
    return found


def test_each_node_is_one_series_1_when_drained_or_in_maintenance(tmp_path: Path) -> None:
    done = run(tmp_path, NODES)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "gpudash_slurm_node_state.prom"
    assert series(out) == {"gpu001": 0, "gpu002": 1, "gpu003": 1, "gpu004": 1, "gpu005": 0}
    assert f"# TYPE {SLURM_NODE_DRAINED} gauge" in out.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpudash_slurm_node_state.prom", "scontrol"]


def test_a_failing_scontrol_removes_the_file_rather_than_leave_it_stale(tmp_path: Path) -> None:
    assert run(tmp_path, NODES).returncode == 0
    failed = run(tmp_path, "", code=1)
    assert failed.returncode == 1
    assert "scontrol failed" in failed.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scontrol"]
