"""GPU <-> NIC affinity read from recorded sysfs trees, and its info series in the exposition."""

from __future__ import annotations

from pathlib import Path

from support.sysfs_tree import build

from gpudash.exporter.exposition import Snapshot, render
from gpudash.exporter.nic_affinity import PciPlace, gpu_nics, nic_ports, relation, sysfs_address
from gpudash.exporter.sim.fleet import Fleet
from gpudash.exporter.source import GpuIdentity


def _dgx_gpus() -> list[GpuIdentity]:
    return list(Fleet(gpus=8).identities)  # the simulated node's bus ids, which the DGX-like tree uses


def test_each_gpu_of_a_dgx_is_served_by_the_hca_under_its_switch(tmp_path: Path) -> None:
    root = build("dgx-h100", tmp_path)
    pairs = gpu_nics(_dgx_gpus(), root)
    assert [(p.gpu.index, p.nic.device, p.nic.port, p.relation) for p in pairs] == [
        (i, f"mlx5_{i}", "1", "PIX") for i in range(8)]
    assert {p.nic.link_layer for p in pairs} == {"InfiniBand"}
    # the storage BlueField (RoCE, on a root port of its own) is listed but serves no GPU
    assert {(n.device, n.link_layer) for n in nic_ports(root)} >= {("mlx5_8", "Ethernet"), ("mlx5_9", "Ethernet")}
    assert pairs[0].nic.pci_bus_id == "0000:19:00.0"


def test_a_vm_without_an_hca_has_no_affinity_and_no_error(tmp_path: Path) -> None:
    root = build("vm-h200", tmp_path)
    gpu = GpuIdentity(0, "GPU-1", "00000000:00:05.0", "NVIDIA H200", 0)
    assert nic_ports(root) == []
    assert gpu_nics([gpu], root) == ()
    assert gpu_nics([gpu], tmp_path / "missing") == ()


def test_a_device_whose_link_is_broken_is_skipped(tmp_path: Path) -> None:
    root = build("dgx-h100", tmp_path)
    broken = root / "class" / "infiniband" / "mlx5_10"
    broken.mkdir()
    (broken / "device").symlink_to(root / "devices" / "gone")
    assert "mlx5_10" not in {n.device for n in nic_ports(root)}
    assert len(gpu_nics(_dgx_gpus(), root)) == 8


def test_relations_are_named_as_nvidia_smi_topo_names_them() -> None:
    gpu = PciPlace("pci0000:15", ("0000:15:01.0", "0000:16:00.0", "0000:17:00.0", "0000:18:00.0"))
    same_switch = PciPlace("pci0000:15", ("0000:15:01.0", "0000:16:00.0", "0000:17:01.0", "0000:19:00.0"))
    two_levels = PciPlace("pci0000:15", ("0000:15:01.0", "0000:16:00.0", "0000:17:02.0", "0000:1a:00.0",
                                         "0000:1b:01.0", "0000:1c:00.0"))
    root_port_only = PciPlace("pci0000:15", ("0000:15:02.0", "0000:20:00.0"))
    other_socket = PciPlace("pci0000:c0", ("0000:c0:01.1", "0000:c1:00.0"))
    assert [relation(gpu, other) for other in (same_switch, two_levels, root_port_only, other_socket)] == [
        "PIX", "PXB", "PHB", "SYS"]


def test_a_gpu_whose_nearest_nic_is_beyond_its_switch_gets_none(tmp_path: Path) -> None:
    root = build("dgx-h100", tmp_path)
    for link in (root / "class" / "infiniband").glob("mlx5_[0-7]"):
        (link / "device").unlink()  # only the BlueField, on a root port of its own, is left
    assert gpu_nics(_dgx_gpus(), root) == ()


def test_nvml_bus_ids_are_found_under_sysfs_names() -> None:
    assert sysfs_address("00000000:2A:00.0") == "0000:2a:00.0"
    assert sysfs_address("00000001:DB:00.0") == "0001:db:00.0"


def test_the_info_series_is_joinable_to_node_exporters_device_and_port(tmp_path: Path) -> None:
    pairs = gpu_nics(_dgx_gpus(), build("dgx-h100", tmp_path))
    text = render(Snapshot([], (), "node-1", nics=pairs)).decode()
    lines = [line for line in text.splitlines() if line.startswith("gpudash_gpu_nic_info{")]
    assert len(lines) == 8 and "# TYPE gpudash_gpu_nic_info gauge" in text
    assert lines[3].startswith('gpudash_gpu_nic_info{gpu="3",UUID="GPU-') and lines[3].endswith(" 1")
    assert 'device="mlx5_3",port="1"' in lines[3] and 'hostname="node-1"' in lines[3] and 'pcie="PIX"' in lines[3]
    assert "gpudash_gpu_nic_info" not in render(Snapshot([], (), "node-1")).decode()
