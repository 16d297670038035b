"""gpudash_node_gpus_expected: the flag, else NVIDIA GPUs in a fake /sys/bus/pci/devices, else NVML's count."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpudash.exporter.expected import gpus_expected, pci_gpu_count


def _function(root: Path, address: str, vendor: str, klass: str) -> None:
    entry = root / address
    entry.mkdir(parents=True)
    (entry / "vendor").write_text(vendor + "\n")
    (entry / "class").write_text(klass + "\n")


@pytest.fixture
def hgx(tmp_path: Path) -> Path:
    """Eight H200s (3D controllers), four NVSwitches, a BMC's VGA, a NIC, and an unreadable entry."""
    for k in range(8):
        _function(tmp_path, f"0000:{0x18 + k:02x}:00.0", "0x10de", "0x030200")
    for k in range(4):
        _function(tmp_path, f"0000:{0x05 + k:02x}:00.0", "0x10de", "0x068000")  # NVSwitch: a bridge, not a GPU
    _function(tmp_path, "0000:02:00.0", "0x1a03", "0x030000")  # ASPEED VGA of the BMC
    _function(tmp_path, "0000:c1:00.0", "0x15b3", "0x020700")  # a ConnectX NIC
    (tmp_path / "0000:ff:00.0").mkdir()  # a function without vendor/class files
    return tmp_path


def test_counts_nvidia_display_and_3d_controllers_only(hgx: Path) -> None:
    assert pci_gpu_count(hgx) == 8
    _function(hgx, "0000:99:00.0", "0x10DE", "0x030000")  # an NVIDIA VGA function counts too
    assert pci_gpu_count(hgx) == 9


def test_the_flag_wins_then_the_bus_then_what_nvml_sees(hgx: Path, tmp_path: Path,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    assert gpus_expected(4, 7, hgx) == 4
    assert gpus_expected(None, 7, hgx) == 8  # one fell off before start: NVML sees 7, the bus lists 8
    assert "NVML sees 7 GPUs, the PCI bus lists 8" in caplog.text
    assert gpus_expected(None, 7, tmp_path / "missing") == 7
    assert gpus_expected(None, 2, None) == 2  # a simulated node: the host's bus is not asked


def test_no_nvidia_function_falls_back_to_the_count_at_start(tmp_path: Path) -> None:
    _function(tmp_path, "0000:02:00.0", "0x1a03", "0x030000")
    assert pci_gpu_count(tmp_path) == 0 and gpus_expected(None, 3, tmp_path) == 3
