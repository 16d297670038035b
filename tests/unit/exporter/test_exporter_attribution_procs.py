"""Per-process attribution on a fake /proc tree: Slurm cgroup v1, v2, 26.05 SLUIDs, Kubernetes layouts, pid reuse."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpudash.exporter.attribution import Labels
from gpudash.exporter.attribution.procs import CgroupOwner, ProcessAttribution, owner_from_cgroup
from gpudash.exporter.source import GpuIdentity

UID = "1234abcd-5678-90ef-aaaa-bbbbccccdddd"
CID = "0123456789abcdef" * 4
SLURM_V1 = """12:pids:/slurm/uid_334987/job_247463/step_0/task_0
11:devices:/slurm/uid_334987/job_247463/step_0
5:memory:/slurm/uid_334987/job_247463/step_0/task_0
4:cpu,cpuacct:/slurm/uid_334987/job_247463/step_0/task_0
1:name=systemd:/system.slice/slurmd.service
"""
SLURM_V2 = "0::/system.slice/slurmstepd.scope/job_3385/step_0/user/task_0\n"
SLURM_V2_MULTI = "0::/system.slice/node17_slurmstepd.scope/job_99/step_batch/slurm\n"
SLURM_2605 = "0::/system.slice/slurmstepd.scope/s5K1KKYAYG5D00/step_0/user/task_0\n"
K8S_SYSTEMD = ("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
               f"{UID.replace('-', '_')}.slice/cri-containerd-{CID}.scope\n")
K8S_GUARANTEED = f"0::/kubepods.slice/kubepods-pod{UID.replace('-', '_')}.slice/crio-{CID}.scope\n"
K8S_CGROUPFS_V1 = f"""13:memory:/kubepods/besteffort/pod{UID}/{CID}
3:devices:/kubepods/besteffort/pod{UID}/{CID}
1:name=systemd:/kubepods/besteffort/pod{UID}/{CID}
"""
K8S_CRI_SUFFIX = ("0::/system.slice/containerd.service/kubepods-besteffort-pod"
                  f"{UID.replace('-', '_')}.slice:cri-containerd:{CID}\n")


@pytest.mark.parametrize(
    ("text", "owner"),
    [
        (SLURM_V1, CgroupOwner(slurm_job="247463")),
        (SLURM_V2, CgroupOwner(slurm_job="3385")),
        (SLURM_V2_MULTI, CgroupOwner(slurm_job="99")),
        (SLURM_2605, CgroupOwner(sluid="s5K1KKYAYG5D00")),
        ("0::/system.slice/slurmstepd.scope/system\n", CgroupOwner()),  # the idle stepds, no job
        (K8S_SYSTEMD, CgroupOwner(pod_uid=UID, container_id=CID)),
        (K8S_GUARANTEED, CgroupOwner(pod_uid=UID, container_id=CID)),
        (K8S_CGROUPFS_V1, CgroupOwner(pod_uid=UID, container_id=CID)),
        (K8S_CRI_SUFFIX, CgroupOwner(pod_uid=UID, container_id=CID)),
        (f"0::/kubepods/burstable/pod{UID}\n", CgroupOwner(pod_uid=UID)),  # the pod's own cgroup, no container
        (f"0::/kubepods.slice/kubepods-pod{UID.replace('-', '_')}.slice/crio-conmon-{CID}.scope\n",
         CgroupOwner(pod_uid=UID)),  # CRI-O's monitor is not the container
        ("0::/user.slice/user-1000.slice/session-3.scope\n", CgroupOwner()),
        ("0::/\n", CgroupOwner()),
        ("garbage\n\x00\n", CgroupOwner()),
        ("", CgroupOwner()),
    ],
)
def test_the_owner_named_by_each_cgroup_layout(text: str, owner: CgroupOwner) -> None:
    assert owner_from_cgroup(text) == owner


def test_the_v2_line_wins_over_v1_lines_in_hybrid_mode() -> None:
    hybrid = "5:memory:/slurm/uid_1/job_1/step_0\n0::/system.slice/slurmstepd.scope/job_2/step_0/user/task_0\n"
    assert owner_from_cgroup(hybrid).slurm_job == "2"


def test_memory_is_preferred_to_other_v1_hierarchies() -> None:
    text = "9:cpu:/slurm/uid_1/job_1/step_0\n5:memory:/slurm/uid_1/job_2/step_0\n"
    assert owner_from_cgroup(text).slurm_job == "2"


class FakeProc:
    """A /proc tree with stat and cgroup files for the pids a test creates."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def add(self, pid: int, cgroup: str, start: int = 1000, name: str = "python3 (x) y") -> None:
        folder = self.root / str(pid)
        folder.mkdir(exist_ok=True)
        # the comm field may hold spaces and parentheses: the start time is counted from the last ')'
        fields = ["S"] + ["0"] * 18 + [str(start)] + ["0"] * 30
        (folder / "stat").write_text(f"{pid} ({name}) {' '.join(fields)}\n")
        (folder / "cgroup").write_text(cgroup)

    def remove(self, pid: int) -> None:
        for child in (self.root / str(pid)).iterdir():
            child.unlink()
        (self.root / str(pid)).rmdir()


@pytest.fixture
def proc(tmp_path: Path) -> FakeProc:
    return FakeProc(tmp_path)


def test_slurm_processes_carry_their_job(proc: FakeProc) -> None:
    proc.add(100, SLURM_V1)
    proc.add(101, SLURM_V2)
    proc.add(102, "0::/user.slice/user-0.slice/session-1.scope\n")
    attribution = ProcessAttribution(proc.root)
    assert attribution.process_labels(100) == (("hpc_job", "247463"),)
    assert attribution.process_labels(101) == (("hpc_job", "3385"),)
    assert attribution.process_labels(102) == ()
    assert attribution.process_labels(103) == ()  # no such process
    assert attribution.gpu_copies(GpuIdentity(0, "GPU-0", "00000000:18:00.0", "NVIDIA H200", 0)) == ()


def test_a_sluid_is_turned_into_the_job_by_the_lookup_and_asked_again_until_known(proc: FakeProc) -> None:
    proc.add(200, SLURM_2605)
    known: dict[str, str] = {}
    attribution = ProcessAttribution(proc.root, sluid_lookup=known.get)
    assert attribution.process_labels(200) == ()  # the prolog has not recorded it yet
    attribution.refresh([], 0.0)
    known["s5K1KKYAYG5D00"] = "48213"
    assert attribution.process_labels(200) == (("hpc_job", "48213"),)


def test_pod_processes_are_named_by_the_hooks_container_first(proc: FakeProc) -> None:
    proc.add(300, K8S_SYSTEMD)
    proc.add(301, f"0::/kubepods/burstable/pod{UID}\n")
    pods: dict[str, Labels] = {UID: (("pod", "trainer-0"), ("namespace", "ml"))}
    containers: dict[str, Labels] = {CID: (("pod", "trainer-0"), ("namespace", "ml"), ("container", "pytorch"))}
    attribution = ProcessAttribution(proc.root, pod_lookup=pods.get, container_lookup=containers.get)
    assert attribution.process_labels(300) == (("pod", "trainer-0"), ("namespace", "ml"), ("container", "pytorch"))
    assert attribution.process_labels(301) == (("pod", "trainer-0"), ("namespace", "ml"))


def test_a_pod_process_has_no_labels_without_hooks_and_is_asked_again_when_a_hook_did_not_know(
        proc: FakeProc) -> None:
    proc.add(300, K8S_SYSTEMD)
    assert ProcessAttribution(proc.root).process_labels(300) == ()
    pods: dict[str, Labels] = {}
    attribution = ProcessAttribution(proc.root, pod_lookup=pods.get)
    assert attribution.process_labels(300) == ()
    pods[UID] = (("pod", "p"), ("namespace", "n"))
    assert attribution.process_labels(300) == ()  # cached until the next refresh
    attribution.refresh([], 0.0)
    assert attribution.process_labels(300) == (("pod", "p"), ("namespace", "n"))


def test_each_process_is_read_once_while_it_lives(proc: FakeProc) -> None:
    proc.add(100, SLURM_V2)
    attribution = ProcessAttribution(proc.root)
    for _ in range(5):
        assert attribution.process_labels(100) == (("hpc_job", "3385"),)
        attribution.refresh([], 0.0)
    assert attribution.reads == 1


def test_a_reused_pid_is_read_afresh_never_inheriting_the_old_job(proc: FakeProc) -> None:
    proc.add(100, SLURM_V2, start=1000)
    attribution = ProcessAttribution(proc.root)
    assert attribution.process_labels(100) == (("hpc_job", "3385"),)
    proc.add(100, "0::/system.slice/slurmstepd.scope/job_4000/step_0/user/task_0\n", start=2000)
    assert attribution.process_labels(100) == (("hpc_job", "4000"),)  # no refresh in between


def test_processes_not_asked_about_are_forgotten_at_the_refresh(proc: FakeProc) -> None:
    proc.add(100, SLURM_V2)
    proc.add(101, SLURM_V1)
    attribution = ProcessAttribution(proc.root)
    attribution.process_labels(100)
    attribution.process_labels(101)
    attribution.refresh([], 0.0)
    attribution.process_labels(100)  # 101 left its GPU
    attribution.refresh([], 0.0)
    assert attribution.process_labels(100) == (("hpc_job", "3385"),)
    assert attribution.reads == 2  # 100 still cached
    attribution.process_labels(101)
    assert attribution.reads == 3  # 101 was forgotten and read again


def test_a_process_that_exits_between_its_stat_and_its_cgroup_gets_no_labels(proc: FakeProc) -> None:
    proc.add(100, SLURM_V2)
    (proc.root / "100" / "cgroup").unlink()
    assert ProcessAttribution(proc.root).process_labels(100) == ()


def test_the_job_label_follows_the_constructor(proc: FakeProc) -> None:
    proc.add(100, SLURM_V2)
    assert ProcessAttribution(proc.root, job_label="slurm_job").process_labels(100) == (("slurm_job", "3385"),)


def test_a_failing_hook_costs_that_process_its_labels_until_the_next_refresh(proc: FakeProc) -> None:
    proc.add(300, K8S_SYSTEMD)
    proc.add(100, SLURM_V2)
    failing = [True]

    def pods(uid: str) -> Labels | None:
        if failing[0]:
            raise ConnectionError("kubelet restarting")
        return (("pod", "p"),)

    attribution = ProcessAttribution(proc.root, pod_lookup=pods)
    assert attribution.process_labels(300) == ()
    assert attribution.process_labels(100) == (("hpc_job", "3385"),)
    failing[0] = False
    attribution.refresh([], 0.0)
    assert attribution.process_labels(300) == (("pod", "p"),)
