"""Which NIC serves which GPU: the RDMA ports under the same PCIe switch as each GPU, read from sysfs.

Every ``/sys/class/infiniband/<device>`` (InfiniBand HCAs and RoCE NICs alike) links to its PCI function;
every GPU's PCI function is ``/sys/bus/pci/devices/<bus id>``. Both resolve to a path under
``/sys/devices/pci<domain>:<bus>/`` that lists each bridge on the way down, so two devices share a PCIe switch
when their paths share a bridge below the root port. The relation is named as ``nvidia-smi topo -m`` names it:
``PIX`` (one switch between them), ``PXB`` (several switches, no host bridge), ``PHB`` (only the root complex
in common), ``SYS`` (different root complexes). A GPU is served by its nearest ports when they are PIX or PXB;
a GPU with no NIC under a switch of its own (a VM, a PCIe card in a workstation) gets none.

The sysfs root is a parameter, so tests hand it a recorded tree. One unreadable entry is skipped, never fatal.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpudash.escape import label_value
from gpudash.exporter.source import GpuIdentity
from gpudash.infiniband import NIC_INFO

__all__ = ["NIC_INFO", "GpuNic", "NicPort", "PciPlace", "gpu_nics", "nic_info_lines", "nic_ports", "relation"]

SYSFS = Path("/sys")
NIC_INFO_HELP = ("1 for each RDMA port (node_exporter's infiniband device and port) under the same PCIe switch as "
                 "this GPU; pcie names the relation as nvidia-smi topo -m does (PIX: one switch, PXB: several).")
RELATIONS = ("PIX", "PXB", "PHB", "SYS")  # nearest first
SERVING = frozenset({"PIX", "PXB"})
_PCI_ADDRESS = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_ROOT_COMPLEX = re.compile(r"^pci[0-9a-f]{4}:[0-9a-f]{2}$")


@dataclass(frozen=True)
class PciPlace:
    """Where a PCI function sits: its root complex and the chain of functions from the root port down to it."""

    root: str  # pci0000:17
    chain: tuple[str, ...]  # ("0000:17:01.0", "0000:18:00.0", "0000:19:00.0", "0000:1a:00.0"), itself last


@dataclass(frozen=True)
class NicPort:
    device: str  # node_exporter's `device`: mlx5_0
    port: str  # node_exporter's `port`: 1
    pci_bus_id: str
    link_layer: str  # InfiniBand or Ethernet (RoCE)
    place: PciPlace


@dataclass(frozen=True)
class GpuNic:
    gpu: GpuIdentity
    nic: NicPort
    relation: str  # PIX or PXB


def sysfs_address(nvml_bus_id: str) -> str:
    """NVML's ``00000000:18:00.0`` as sysfs writes it, ``0000:18:00.0``."""
    domain, _, rest = nvml_bus_id.strip().lower().partition(":")
    return f"{int(domain or '0', 16):04x}:{rest}"


def pci_place(device_link: Path) -> PciPlace | None:
    """The place of the PCI function a sysfs link points to; None when it does not resolve to one."""
    try:
        parts = device_link.resolve(strict=True).parts
    except (OSError, RuntimeError):
        return None
    roots = [i for i, part in enumerate(parts) if _ROOT_COMPLEX.match(part)]
    if not roots:
        return None
    chain = tuple(p for p in parts[roots[-1] + 1:] if _PCI_ADDRESS.match(p))
    return PciPlace(parts[roots[-1]], chain) if chain else None


def _text(path: Path, default: str) -> str:
    try:
        return path.read_text(encoding="ascii").strip() or default
    except (OSError, UnicodeDecodeError):
        return default


def nic_ports(sys_root: Path = SYSFS) -> list[NicPort]:
    """Every port of every RDMA device under ``sys_root``/class/infiniband, in name order."""
    try:
        devices = sorted((sys_root / "class" / "infiniband").iterdir())
    except OSError:
        return []
    ports = []
    for device in devices:
        place = pci_place(device / "device")
        if place is None:
            continue
        try:
            numbers = sorted((device / "ports").iterdir(), key=lambda p: (len(p.name), p.name))
        except OSError:
            continue
        for port in numbers:
            if port.name.isdigit():
                layer = _text(port / "link_layer", "InfiniBand")
                ports.append(NicPort(device.name, port.name, place.chain[-1], layer, place))
    return ports


def relation(a: PciPlace, b: PciPlace) -> str:
    """How two PCI functions meet, in ``nvidia-smi topo -m``'s words (PIX, PXB, PHB, SYS)."""
    if a.root != b.root:
        return "SYS"
    shared = 0
    for x, y in zip(a.chain[:-1], b.chain[:-1], strict=False):
        if x != y:
            break
        shared += 1
    if shared < 2:  # nothing below the root port in common: they meet in the root complex
        return "PHB"
    # below the shared bridges, a device sits behind its own downstream port: one switch between them
    return "PIX" if len(a.chain) - shared <= 2 and len(b.chain) - shared <= 2 else "PXB"


def gpu_nics(gpus: Sequence[GpuIdentity], sys_root: Path = SYSFS) -> tuple[GpuNic, ...]:
    """Each GPU's nearest RDMA ports, when they share a PCIe switch with it (PIX or PXB)."""
    ports = nic_ports(sys_root)
    out: list[GpuNic] = []
    for gpu in gpus:
        place = pci_place(sys_root / "bus" / "pci" / "devices" / sysfs_address(gpu.pci_bus_id))
        if place is None or not ports:
            continue
        ranked = [(RELATIONS.index(relation(place, port.place)), port) for port in ports]
        best = min(rank for rank, _ in ranked)
        if RELATIONS[best] in SERVING:
            out += [GpuNic(gpu, port, RELATIONS[rank]) for rank, port in ranked if rank == best]
    return tuple(out)


def nic_info_lines(nics: Sequence[GpuNic], host_labels: str) -> Iterator[str]:
    """The samples of gpudash_gpu_nic_info; ``host_labels`` is the node's labels (``hostname="..."``) or ''."""
    for pair in nics:
        g, n = pair.gpu, pair.nic
        labels = [f'gpu="{g.index}"', f'UUID="{label_value(g.uuid)}"', f'pci_bus_id="{label_value(g.pci_bus_id)}"',
                  f'device="{label_value(n.device)}"', f'port="{label_value(n.port)}"',
                  f'nic_pci_bus_id="{label_value(n.pci_bus_id)}"', f'link_layer="{label_value(n.link_layer)}"',
                  f'pcie="{pair.relation}"']
        if host_labels:
            labels.append(host_labels)
        yield f"{NIC_INFO}{{{','.join(labels)}}} 1\n"
