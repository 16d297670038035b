"""The exporter's attribution flags: what they switch on, and the dcgm-exporter environment variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpudash.exporter.attribution import Combined, combined
from gpudash.exporter.attribution.hpc import HpcJobMapping
from gpudash.exporter.attribution.procs import ProcessAttribution
from gpudash.exporter.cli import _attribution, exporter


def _params(*args: str) -> dict[str, object]:
    with exporter.make_context("exporter", list(args)) as ctx:
        return dict(ctx.params)


def test_the_mapping_dir_comes_from_the_flag_or_dcgm_exporters_variable(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("DCGM_HPC_JOB_MAPPING_DIR", raising=False)
    assert _params()["hpc_job_mapping_dir"] is None
    assert _params("--hpc-job-mapping-dir", str(tmp_path))["hpc_job_mapping_dir"] == tmp_path
    monkeypatch.setenv("DCGM_HPC_JOB_MAPPING_DIR", str(tmp_path / "env"))
    assert _params()["hpc_job_mapping_dir"] == tmp_path / "env"
    monkeypatch.setenv("DCGM_HPC_JOB_MAPPING_DIR", "")  # dcgm-exporter's default: the empty string, off
    assert _params()["hpc_job_mapping_dir"] is None


def test_no_flag_no_attribution() -> None:
    assert _attribution(None, Path("/proc"), None, simulated=False) == []


def test_the_mapping_dir_brings_per_process_attribution_with_sluids_from_the_same_dir(tmp_path: Path) -> None:
    (tmp_path / ".sluid").mkdir()
    (tmp_path / ".sluid" / "s1").write_text("77\n")
    both = combined(_attribution(tmp_path, tmp_path / "proc", None, simulated=False))
    assert isinstance(both, Combined)
    hpc, procs = both.parts
    assert isinstance(hpc, HpcJobMapping) and hpc.directory == tmp_path
    assert isinstance(procs, ProcessAttribution) and procs.proc_root == tmp_path / "proc"
    assert procs.sluid_lookup is not None and procs.sluid_lookup("s1") == "77"


def test_simulated_processes_are_not_looked_up_in_this_machines_proc(tmp_path: Path) -> None:
    (only,) = _attribution(tmp_path, Path("/proc"), None, simulated=True)
    assert isinstance(only, HpcJobMapping)


def test_simulated_jobs_and_a_mapping_dir_together_are_refused(tmp_path: Path) -> None:
    from click.testing import CliRunner

    result = CliRunner().invoke(exporter, ["--simulate", "2", "--sim-nodes", "n1", "--hostname", "n1",
                                           "--sim-job", "7=n1:0-1", "--hpc-job-mapping-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "--hpc-job-mapping-dir with --sim-job/--sim-jobs: both would set hpc_job" in result.output
