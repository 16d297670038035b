"""deploy/slurm's Prolog and Epilog run for real (bash, a fake nvidia-smi, a fake driver directory), and the
exporter reading what they wrote.

The fake node has four GPUs whose device minor numbers are not their NVML indices (as on nodes where NVML GPU 0
is /dev/nvidia2): Slurm's index is the rank of the minor, so the scripts must go through the PCI bus id.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import urllib.request
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.exposition import parse_exposition
from support.paths import ROOT
from support.slack import budget
from support.waiting import eventually

from gpudash.exporter.attribution.hpc import HpcJobMapping
from gpudash.exporter.service import Exporter
from gpudash.exporter.sim.fleet import fleet_from_specs
from gpudash.exporter.sim.simulated import SimulatedSource
from gpudash.stack.process import free_port

SCRIPTS = ROOT / "deploy" / "slurm"
PROLOG = SCRIPTS / "prolog.d" / "50-gpudash-job-mapping.sh"
EPILOG = SCRIPTS / "epilog.d" / "50-gpudash-job-mapping.sh"


@dataclass(frozen=True)
class Gpu:
    nvml_index: int
    uuid: str
    bus: str  # as nvidia-smi prints it (8-hex domain); the driver directory uses a 4-hex domain
    minor: int


# NVML numbers GPUs in PCI bus order; the minors are shuffled. Slurm index i = i-th smallest minor:
# Slurm 0 -> minor 0 -> bus 2A -> NVML 1; Slurm 1 -> minor 1 -> 5D -> NVML 3; 2 -> 18 -> 0; 3 -> 3A -> 2.
SHUFFLED = (
    Gpu(0, "GPU-aaaaaaaa-0000-0000-0000-000000000000", "00000000:18:00.0", 2),
    Gpu(1, "GPU-bbbbbbbb-0000-0000-0000-000000000000", "00000000:2A:00.0", 0),
    Gpu(2, "GPU-cccccccc-0000-0000-0000-000000000000", "00000000:3A:00.0", 3),
    Gpu(3, "GPU-dddddddd-0000-0000-0000-000000000000", "00000000:5D:00.0", 1),
)
STRAIGHT = tuple(Gpu(g.nvml_index, g.uuid, g.bus, g.nvml_index) for g in SHUFFLED)

FAKE_SMI = """#!/bin/bash
[[ -n ${FAKE_SMI_FAIL:-} ]] && { echo "NVIDIA-SMI has failed: it couldn't communicate with the driver" >&2; exit 9; }
[[ "$*" == "--query-gpu=index,uuid,pci.bus_id --format=csv,noheader" ]] || { echo "unexpected: $*" >&2; exit 2; }
cat "$FAKE_SMI_CSV"
"""


class Node:
    """A fake GPU node: nvidia-smi on PATH, /proc/driver/nvidia/gpus, a mapping directory."""

    def __init__(self, root: Path, gpus: tuple[Gpu, ...] = SHUFFLED) -> None:
        self.root = root
        self.mapping = root / "job-mapping"
        self.driver = root / "driver" / "gpus"
        bin_dir = root / "bin"
        bin_dir.mkdir()
        smi = bin_dir / "nvidia-smi"
        smi.write_text(FAKE_SMI)
        smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
        (root / "smi.csv").write_text("".join(f"{g.nvml_index}, {g.uuid}, {g.bus}\n" for g in gpus))
        for g in gpus:
            folder = self.driver / g.bus[4:].lower()
            folder.mkdir(parents=True)
            (folder / "information").write_text(
                f"Model: \t\t NVIDIA H200\nIRQ:   \t\t 150\nGPU UUID: \t {g.uuid}\nVideo BIOS: \t 96.00.af.00.01\n"
                f"Bus Type: \t PCIe\nDMA Size: \t 52 bits\nDevice Minor: \t {g.minor}\nBus Location: \t {g.bus[4:]}\n")
        self.env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "FAKE_SMI_CSV": str(root / "smi.csv"),
                    "GPUDASH_JOB_MAPPING_DIR": str(self.mapping), "GPUDASH_NVIDIA_DRIVER_DIR": str(self.driver),
                    "GPUDASH_JOB_MAPPING_SYSLOG": "0"}  # the tests' problems stay out of this machine's syslog

    def run(self, script: Path, job: int | str, *, context: str | None = None,
            **env: str) -> subprocess.CompletedProcess[str]:
        full = {**self.env, "SLURM_JOB_ID": str(job), **env}
        if context is not None:
            full["SLURM_SCRIPT_CONTEXT"] = context
        return subprocess.run(["/bin/bash", str(script)], env=full, capture_output=True, text=True, timeout=budget(30))

    def prolog(self, job: int | str, **env: str) -> subprocess.CompletedProcess[str]:
        done = self.run(PROLOG, job, context="prolog_slurmd", **env)
        assert done.returncode == 0, done.stderr
        return done

    def epilog(self, job: int | str, **env: str) -> subprocess.CompletedProcess[str]:
        done = self.run(EPILOG, job, context="epilog_slurmd", **env)
        assert done.returncode == 0, done.stderr
        return done

    def files(self) -> dict[str, str]:
        """Every visible file of the mapping directory and its text (temporary names would show here too)."""
        if not self.mapping.exists():
            return {}
        return {p.name: p.read_text() for p in sorted(self.mapping.iterdir()) if p.is_file() and p.name != ".lock"}


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(tmp_path)


def test_the_prolog_writes_one_file_per_gpu_named_by_its_nvml_index(tmp_path: Path) -> None:
    node = Node(tmp_path, STRAIGHT)
    node.prolog(48213, SLURM_JOB_GPUS="0,2")
    assert node.files() == {"0": "48213\n", "2": "48213\n"}


def test_slurm_indices_are_translated_through_the_minor_and_bus_id_not_dev_order(node: Node) -> None:
    node.prolog(100, SLURM_JOB_GPUS="0,1")
    assert node.files() == {"1": "100\n", "3": "100\n"}
    node.prolog(200, SLURM_JOB_GPUS="2-3")  # a range, as Slurm may print it
    assert node.files() == {"0": "200\n", "1": "100\n", "2": "200\n", "3": "100\n"}


def test_sites_that_checked_slurm_index_equals_nvml_index_can_say_so(node: Node) -> None:
    node.prolog(100, SLURM_JOB_GPUS="0,1", GPUDASH_SLURM_GPU_ORDER="nvml")
    assert node.files() == {"0": "100\n", "1": "100\n"}


def test_uuids_in_cuda_visible_devices_name_the_gpus_exactly(node: Node) -> None:
    # Slurm 25.11+ with AutoDetect: the Prolog's CUDA_VISIBLE_DEVICES holds UUIDs.
    uuids = f"{SHUFFLED[3].uuid},{SHUFFLED[0].uuid}"
    node.prolog(300, SLURM_JOB_GPUS="1,2", CUDA_VISIBLE_DEVICES=uuids)
    assert node.files() == {"0": "300\n", "3": "300\n"}


def test_two_jobs_sharing_a_gpu_keep_each_others_line(node: Node) -> None:
    node.prolog(100, CUDA_VISIBLE_DEVICES="2")  # shard/MPS: no SLURM_JOB_GPUS, host numbering
    node.prolog(200, SLURM_JOB_GPUS="2")
    node.prolog(200, SLURM_JOB_GPUS="2")  # a second Prolog run of the same job adds nothing
    assert node.files() == {"0": "100\n200\n"}
    node.epilog(100)
    assert node.files() == {"0": "200\n"}
    node.epilog(200)
    assert node.files() == {}


def test_the_epilog_clears_every_file_naming_the_job_whatever_its_environment(node: Node) -> None:
    node.prolog(100, SLURM_JOB_GPUS="0,1,2,3")
    (node.mapping / "2.1").write_text("100\n")  # a MIG-instance file someone wrote by hand
    (node.mapping / "3").write_text("100\r\n77\r\n")  # and a CRLF one
    node.epilog(100)  # no SLURM_JOB_GPUS, no nvidia-smi needed
    assert node.files() == {"3": "77\n"}


def test_jobs_without_gpus_leave_no_trace_and_no_log(node: Node) -> None:
    done = node.prolog(9)  # a CPU-only job: no GPU variable, no SLUID
    assert done.stderr == "" and not node.mapping.exists()
    done = node.epilog(9)
    assert done.stderr == "" and not node.mapping.exists()


def test_concurrent_prologs_on_one_gpu_lose_no_job(node: Node) -> None:
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda job: node.prolog(job, SLURM_JOB_GPUS="0"), range(1000, 1016)))
    assert sorted(node.files()["1"].split()) == [str(j) for j in range(1000, 1016)]


def test_the_mode_follows_the_path_it_was_started_by(node: Node) -> None:
    assert node.run(PROLOG, 5, SLURM_JOB_GPUS="0").returncode == 0
    assert node.files() == {"1": "5\n"}
    assert node.run(EPILOG, 5).returncode == 0
    assert node.files() == {}


def test_the_sluid_is_recorded_for_per_process_attribution_and_cleared(node: Node) -> None:
    node.prolog(48213, SLURM_JOB_GPUS="0", SLURM_JOB_SLUID="s5K1KKYAYG5D00")
    assert (node.mapping / ".sluid" / "s5K1KKYAYG5D00").read_text() == "48213\n"
    assert HpcJobMapping(node.mapping).job_for_sluid("s5K1KKYAYG5D00") == "48213"
    node.epilog(48213, SLURM_JOB_SLUID="s5K1KKYAYG5D00")
    assert list((node.mapping / ".sluid").iterdir()) == []


@pytest.mark.parametrize(
    ("env", "logged"),
    [
        ({"FAKE_SMI_FAIL": "1", "SLURM_JOB_GPUS": "0"}, "nvidia-smi failed"),
        ({"SLURM_JOB_GPUS": "9"}, "Slurm GPU index 9: no such GPU"),
        ({"CUDA_VISIBLE_DEVICES": "GPU-ffffffff-0000-0000-0000-000000000000"}, "is not on this node"),
        ({"CUDA_VISIBLE_DEVICES": "MIG-0c7a3a0e-0000-0000-0000-000000000000"}, "MIG instance"),
        ({"SLURM_JOB_GPUS": "0", "SLURM_JOB_ID": ""}, "no usable SLURM_JOB_ID"),
    ],
)
def test_a_problem_is_logged_and_never_fails_the_job(node: Node, env: Mapping[str, str], logged: str) -> None:
    done = node.run(PROLOG, env.get("SLURM_JOB_ID", 7), context="prolog_slurmd", **env)
    assert done.returncode == 0
    assert logged in done.stderr
    assert {k: v for k, v in node.files().items() if not k.startswith(".")} == {}


def test_an_unwritable_mapping_directory_never_fails_the_job(node: Node) -> None:
    blocker = node.root / "a-file"
    blocker.write_text("")
    done = node.run(PROLOG, 7, context="prolog_slurmd", SLURM_JOB_GPUS="0",
                    GPUDASH_JOB_MAPPING_DIR=str(blocker / "job-mapping"))
    assert done.returncode == 0 and "cannot create" in done.stderr


def test_a_missing_driver_directory_falls_back_to_slurms_index_with_a_log_line(node: Node) -> None:
    done = node.prolog(7, SLURM_JOB_GPUS="0,1", GPUDASH_NVIDIA_DRIVER_DIR=str(node.root / "nowhere"))
    assert "assuming Slurm's GPU index is NVML's" in done.stderr
    assert node.files() == {"0": "7\n", "1": "7\n"}


def test_a_prolog_without_path_still_finds_its_tools(node: Node) -> None:
    # Slurm runs Prologs with no PATH: the script adds the standard directories (nvidia-smi named explicitly).
    env = {k: v for k, v in node.env.items() if k != "PATH"}
    done = subprocess.run(["/bin/bash", str(PROLOG)], capture_output=True, text=True, timeout=budget(30),
                          env={**env, "SLURM_JOB_ID": "8", "SLURM_SCRIPT_CONTEXT": "prolog_slurmd",
                               "SLURM_JOB_GPUS": "0", "GPUDASH_NVIDIA_SMI": str(node.root / "bin" / "nvidia-smi")})
    assert done.returncode == 0, done.stderr
    assert node.files() == {"1": "8\n"}


def test_the_exporter_publishes_what_the_prolog_wrote_and_drops_it_after_the_epilog(node: Node) -> None:
    source = SimulatedSource(fleet_from_specs(4, 3))
    with Exporter(source, listen="127.0.0.1:0", interval=0.05, hostname="n1",
                  attributor=HpcJobMapping(node.mapping)) as exporter:

        def util_jobs() -> list[tuple[str, str | None]]:
            with urllib.request.urlopen(exporter.url + "/metrics", timeout=budget(5)) as response:
                series = parse_exposition(response.read().decode())["DCGM_FI_DEV_GPU_UTIL"]
            return sorted((labels["gpu"], labels.get("hpc_job")) for labels, _ in series)

        node.prolog(100, SLURM_JOB_GPUS="0")
        node.prolog(200, SLURM_JOB_GPUS="0,2")
        expected = [("0", "200"), ("1", "100"), ("1", "200"), ("2", None), ("3", None)]  # Slurm 0, 2 -> NVML 1, 0
        eventually(lambda: util_jobs() == expected, 10, what="hpc_job copies after the Prologs")
        node.epilog(200)
        eventually(lambda: util_jobs() == [("0", None), ("1", "100"), ("2", None), ("3", None)], 10,
                   what="the job's copies gone after its Epilog")


def test_gpudash_exporter_takes_the_directory_from_dcgm_exporters_variable(node: Node) -> None:
    node.prolog(48213, SLURM_JOB_GPUS="0")
    (node.mapping / "2").write_text('odd"job\\id\n')  # a quote and a backslash: escaped, the scrape still parses
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpudash", "exporter", "--simulate", "4", "--listen", f"127.0.0.1:{port}",
         "--interval", "100ms"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "DCGM_HPC_JOB_MAPPING_DIR": str(node.mapping)})
    try:
        def util_jobs() -> list[tuple[str, str | None]]:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=budget(2)) as response:
                series = parse_exposition(response.read().decode())["DCGM_FI_DEV_GPU_UTIL"]
            return sorted((labels["gpu"], labels.get("hpc_job")) for labels, _ in series)

        expected = [("0", None), ("1", "48213"), ("2", 'odd"job\\id'), ("3", None)]
        eventually(lambda: util_jobs() == expected, 30, what="hpc_job from DCGM_HPC_JOB_MAPPING_DIR",
                   ignoring=(OSError,))
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=budget(15))
    assert proc.returncode == 0, stderr
    assert f"HPC job mapping: reading {node.mapping} on every sweep" in stderr


FAKE_SCONTROL = """#!/bin/bash
[[ "$1 $2 $3" == "show job -o" ]] || { echo "unexpected: $*" >&2; exit 2; }
echo "JobId=$4 JobName=train llama 70b UserId=alice(1000) GroupId=ml(100) Account=ml-team Partition=gpu QOS=normal"
"""


def test_the_prolog_records_who_holds_the_job_and_the_epilog_removes_it(node: Node) -> None:
    scontrol = node.root / "bin" / "scontrol"
    scontrol.write_text(FAKE_SCONTROL)
    scontrol.chmod(0o755)
    node.prolog(300, SLURM_JOB_GPUS="1", SLURM_JOB_USER="bob", SLURM_JOB_PARTITION="debug\nx")
    info = node.mapping / ".jobinfo" / "300"
    # the environment first (a newline in a value made a space), scontrol for what it lacks
    assert info.read_text() == "user=bob\naccount=ml-team\npartition=debug x\njob_name=train llama 70b\n"
    node.epilog(300)
    assert not info.exists() and node.files() == {}


def test_without_scontrol_the_environment_alone_is_recorded_and_the_job_runs(node: Node) -> None:
    done = node.prolog(301, SLURM_JOB_GPUS="0", SLURM_JOB_USER="dan", SLURM_JOB_ACCOUNT="ops",
                       GPUDASH_SCONTROL=str(node.root / "no-scontrol"))
    assert (node.mapping / ".jobinfo" / "301").read_text() == "user=dan\naccount=ops\npartition=\njob_name=\n"
    assert "scontrol show job failed" in done.stderr and node.files() == {"1": "301\n"}


def test_the_exporter_publishes_who_holds_each_job_until_its_epilog(node: Node) -> None:
    source = SimulatedSource(fleet_from_specs(4, 3))
    with Exporter(source, listen="127.0.0.1:0", interval=0.05, hostname="n1",
                  attributor=HpcJobMapping(node.mapping)) as exporter:

        def infos() -> list[dict[str, str]]:
            with urllib.request.urlopen(exporter.url + "/metrics", timeout=budget(5)) as response:
                series = parse_exposition(response.read().decode()).get("gpudash_job_info", [])
            return sorted((labels for labels, _ in series), key=lambda labels: labels["hpc_job"])

        node.prolog(400, SLURM_JOB_GPUS="0", SLURM_JOB_USER="eve", SLURM_JOB_ACCOUNT="nlp",
                    SLURM_JOB_PARTITION="gpu", SLURM_JOB_NAME="sft", GPUDASH_SCONTROL="/nonexistent")
        expected = [{"hostname": "n1", "hpc_job": "400", "user": "eve", "account": "nlp", "partition": "gpu",
                     "job_name": "sft"}]
        eventually(lambda: infos() == expected, 10, what="gpudash_job_info after the Prolog")
        node.epilog(400)
        eventually(lambda: infos() == [], 10, what="gpudash_job_info gone after the Epilog")


def test_the_scripts_are_executable_and_the_prolog_and_epilog_are_the_same_file() -> None:
    assert os.access(SCRIPTS / "gpudash-job-mapping.sh", os.X_OK)
    assert PROLOG.resolve() == EPILOG.resolve() == (SCRIPTS / "gpudash-job-mapping.sh").resolve()
