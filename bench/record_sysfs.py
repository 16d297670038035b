"""Record the parts of a machine's sysfs the NIC-affinity reader reads, as a text tree tests can rebuild.

    python bench/record_sysfs.py [SYSFS_ROOT] > tree.txt

One line per entry, paths relative to the sysfs root: ``L path -> target`` for a link (the target resolved,
relative to the root), ``F path = text`` for a small file. It records every /sys/class/infiniband device
(its PCI function and each port's link_layer) and every NVIDIA PCI function's place, nothing else.
tests/support/sysfs_tree.py rebuilds the tree; tests/fixtures/sysfs/ holds the recorded ones.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

NVIDIA_VENDOR = "0x10de"


def _link(root: Path, path: Path) -> str | None:
    try:
        return f"L {path.relative_to(root)} -> {path.resolve(strict=True).relative_to(root.resolve())}"
    except (OSError, ValueError):
        return None


def record(root: Path) -> Iterator[str]:
    ib = root / "class" / "infiniband"
    for device in sorted(ib.iterdir()) if ib.is_dir() else ():
        if (line := _link(root, device / "device")) is not None:
            yield line
        for port in sorted((device / "ports").iterdir()) if (device / "ports").is_dir() else ():
            try:
                layer = (port / "link_layer").read_text(encoding="ascii").strip()
            except OSError:
                continue
            yield f"F {(port / 'link_layer').relative_to(root)} = {layer}"
    pci = root / "bus" / "pci" / "devices"
    for function in sorted(pci.iterdir()) if pci.is_dir() else ():
        try:
            vendor = (function / "vendor").read_text(encoding="ascii").strip().lower()
        except OSError:
            continue
        if vendor == NVIDIA_VENDOR and (line := _link(root, function)) is not None:
            yield line


if __name__ == "__main__":
    for entry in record(Path(sys.argv[1] if len(sys.argv) > 1 else "/sys")):
        print(entry)
