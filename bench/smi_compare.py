"""What nvidia-smi says about a GPU, and how the exporter's series compare with it (exporter_bench.py --real).

``compare_with_smi`` checks the exporter's labels and values for one GPU against ``nvidia-smi --query-gpu``
read at the same moment, each within its tolerance, and prints one line per label and field.
"""

from __future__ import annotations

import subprocess

from gpudash.catalog import BY_KEY, DRIVER_VERSION_LABEL

# catalog key -> (nvidia-smi --query-gpu field, tolerance: absolute, or relative if < 1), by exporter series
SMI_FIELDS = {BY_KEY[key].dcgm_name: smi for key, smi in {
    "gpu_util": ("utilization.gpu", 15),
    "mem_copy_util": ("utilization.memory", 15),
    "enc_util": ("utilization.encoder", 0),
    "dec_util": ("utilization.decoder", 0),
    "fb_used": ("memory.used", 0.02),
    "fb_free": ("memory.free", 0.02),
    "fb_reserved": ("memory.reserved", 1),
    "fb_total": ("memory.total", 1),
    "gpu_temp": ("temperature.gpu", 3),
    "hbm_temp": ("temperature.memory", 3),
    "power": ("power.draw", 0.25),
    "power_limit": ("enforced.power.limit", 1),
    "sm_clock": ("clocks.sm", 0.25),
    "mem_clock": ("clocks.mem", 1),
    "sm_clock_max": ("clocks.max.sm", 1),
    "clock_event_reasons": ("clocks_event_reasons.active", 0),
}.items()}
SMI_LABELS = {
    "UUID": "uuid",
    "pci_bus_id": "pci.bus_id",
    "modelName": "name",
    DRIVER_VERSION_LABEL: "driver_version",
}


def smi(field: str, gpu: int) -> str | None:
    done = subprocess.run(
        ["nvidia-smi", f"--id={gpu}", f"--query-gpu={field}", "--format=csv,noheader,nounits"],
        capture_output=True, text=True, check=False,
    )
    return done.stdout.strip() if done.returncode == 0 else None


def compare_with_smi(series: list[tuple[str, dict[str, str], float]], gpu: int) -> tuple[int, int]:
    mine = {name: (labels, value) for name, labels, value in series if labels.get("gpu") == str(gpu)}
    agree = total = 0
    print(f"  GPU {gpu}: exporter vs nvidia-smi (same moment, within tolerance)")
    any_labels = next(iter(mine.values()))[0]
    for label, field in SMI_LABELS.items():
        theirs, ours = smi(field, gpu), any_labels.get(label, "")
        ok = theirs is not None and ours.lower().lstrip("0") == theirs.lower().lstrip("0")
        agree, total = agree + ok, total + 1
        print(f"    {'ok  ' if ok else 'DIFF'} label {label:24} {ours!s:42} nvidia-smi {field}: {theirs}")
    for name, (field, tolerance) in SMI_FIELDS.items():
        theirs = smi(field, gpu)
        if name not in mine:
            print(f"    --   {name:30} (not published: unsupported here) nvidia-smi {field}: {theirs}")
            continue
        mine_value = mine[name][1]
        try:
            value = float(int(theirs, 16)) if theirs and theirs.startswith("0x") else float(theirs or "nan")
        except ValueError:
            print(f"    --   {name:30} {mine_value:>14g}  nvidia-smi {field}: {theirs!r}")
            continue
        allowed = tolerance * max(abs(value), 1.0) if 0 < tolerance < 1 else tolerance
        ok = abs(mine_value - value) <= allowed
        agree, total = agree + ok, total + 1
        print(f"    {'ok  ' if ok else 'DIFF'} {name:36} {mine_value:>14g}  nvidia-smi {field}: {theirs}")
    return agree, total
