"""How many GPUs this node should have: the flag, else the NVIDIA GPUs on its PCI bus, else what NVML saw.

A GPU that fell off the bus before the exporter started is invisible to NVML, but its PCI function usually
stays listed under /sys/bus/pci/devices (vendor 0x10de, class 0x0300xx VGA or 0x0302xx 3D controller;
NVSwitches are 0x0680xx and do not count). The sysfs root is a parameter so tests hand it a fake tree.
"""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger("gpudash.exporter")

SYSFS_PCI_DEVICES = Path("/sys/bus/pci/devices")
NVIDIA_VENDOR = "0x10de"
GPU_CLASSES = ("0x0300", "0x0302")  # display controller: VGA-compatible, 3D controller


def pci_gpu_count(devices: Path = SYSFS_PCI_DEVICES) -> int | None:
    """NVIDIA display or 3D-controller functions under ``devices``; None when the tree cannot be read."""
    try:
        entries = sorted(devices.iterdir())
    except OSError:
        return None
    count = 0
    for entry in entries:
        try:
            vendor = (entry / "vendor").read_text(encoding="ascii").strip().lower()
            klass = (entry / "class").read_text(encoding="ascii").strip().lower()
        except (OSError, UnicodeDecodeError):
            continue  # a function that vanished or is unreadable: not one we can count
        if vendor == NVIDIA_VENDOR and klass.startswith(GPU_CLASSES):
            count += 1
    return count


def gpus_expected(flag: int | None, seen: int, devices: Path | None = SYSFS_PCI_DEVICES) -> int:
    """The flag when given; else the PCI count when it finds any GPU (``devices`` None: not asked); else ``seen``."""
    if flag is not None:
        return flag
    found = pci_gpu_count(devices) if devices is not None else None
    if found:
        if found != seen:
            log.warning("NVML sees %d GPUs, the PCI bus lists %d: expecting %d", seen, found, found)
        return found
    return seen
