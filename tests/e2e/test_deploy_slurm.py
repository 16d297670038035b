"""deploy/slurm: the file_sd writer against a stand-in `sinfo`, and the scrape config through promtool."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
import yaml
from support.paths import ROOT
from support.slack import budget

SLURM = ROOT / "deploy" / "slurm"
SINFO_LINES = """\
gpu-a-001 gpu:h200:8(S:0-1) rack-1,h200
gpu-a-001 gpu:h200:8(S:0-1) rack-1,h200
gpu-a-002 gpu:h200:8 rack-2
cpu-001 (null) rack-1
gpu-b-003 gpu:8,tmpdisk:100 ib
"""


def _sinfo(tmp_path: Path, output: str, code: int = 0) -> dict[str, str]:
    """An environment whose `sinfo` prints `output` (what `sinfo -N -h -o '%N %G %f'` prints) and exits `code`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "sinfo"
    script.write_text(f"#!/bin/sh\ncat <<'EOF'\n{output}EOF\nexit {code}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def _write_targets(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", str(SLURM / "gpu-nodes-from-sinfo.sh"), *args], env=env, capture_output=True,
                          text=True, timeout=budget(30), check=False)


def test_gpu_nodes_become_file_sd_targets_by_rack(tmp_path: Path) -> None:
    out = tmp_path / "file_sd"
    done = _write_targets(tmp_path, _sinfo(tmp_path, SINFO_LINES), "prod-a", str(out), "9400")
    assert done.returncode == 0, done.stderr
    groups = json.loads((out / "gpu-nodes-prod-a.json").read_text())
    by_rack = {g["labels"]["rack"]: sorted(g["targets"]) for g in groups}
    assert by_rack == {"rack-1": ["gpu-a-001:9400"], "rack-2": ["gpu-a-002:9400"], "unknown": ["gpu-b-003:9400"]}
    assert {g["labels"]["cluster"] for g in groups} == {"prod-a"}
    assert [p.name for p in out.iterdir()] == ["gpu-nodes-prod-a.json"]  # no temp file left behind


@pytest.mark.parametrize(("output", "code"), [("cpu-001 (null) rack-1\n", 0), ("", 1)], ids=["no-gpus", "fails"])
def test_no_gpu_node_or_a_failing_sinfo_keeps_the_old_file(tmp_path: Path, output: str, code: int) -> None:
    out = tmp_path / "file_sd"
    out.mkdir()
    (out / "gpu-nodes-prod-a.json").write_text("[]\n")
    done = _write_targets(tmp_path, _sinfo(tmp_path, output, code), "prod-a", str(out))
    assert done.returncode == 1
    assert done.stderr.startswith("gpu-nodes-from-sinfo.sh: ") and len(done.stderr.strip().splitlines()) == 1
    assert (out / "gpu-nodes-prod-a.json").read_text() == "[]\n"


def test_a_cluster_name_that_cannot_be_a_file_name_is_refused(tmp_path: Path) -> None:
    done = _write_targets(tmp_path, _sinfo(tmp_path, SINFO_LINES), "../x", str(tmp_path))
    assert done.returncode == 2 and "cluster name" in done.stderr


def test_the_file_sd_scrape_config_and_targets_pass_promtool(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool is not installed: `make deps`"
    config = yaml.safe_load((SLURM / "prometheus" / "scrape-gpu-file-sd.yml").read_text())
    sd_dir = tmp_path / "file_sd"
    sd_dir.mkdir()
    shutil.copy(SLURM / "prometheus" / "gpu-nodes.example.json", sd_dir / "gpu-nodes-prod-a.json")
    config["scrape_configs"][0]["file_sd_configs"][0]["files"] = [str(sd_dir / "gpu-nodes-*.json")]
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    done = subprocess.run([promtool, "check", "config", str(tmp_path / "prometheus.yml")], capture_output=True,
                          text=True, timeout=budget(60), check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    # A broken targets file is caught too: the check is real.
    (sd_dir / "gpu-nodes-prod-a.json").write_text('[{"targets": "not-a-list"}]')
    broken = subprocess.run([promtool, "check", "config", str(tmp_path / "prometheus.yml")], capture_output=True,
                            text=True, timeout=budget(60), check=False)
    assert broken.returncode != 0
