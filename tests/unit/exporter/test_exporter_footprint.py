"""The exporter's footprint: per-link NVLink series only when asked and only where links exist, /metrics no
larger per GPU than dcgm-exporter's for the same fields (its line shape checked on a real sample line).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest
from support.exposition import parse_exposition

from gpudash.catalog import (
    BY_DCGM_NAME,
    BY_KEY,
    DRIVER_VERSION_LABEL,
    EXPORTER_LAST_SWEEP,
    EXPORTER_PENDING,
    EXPORTER_SWEEP_SECONDS,
    EXPORTER_UNSUPPORTED,
    PER_LINK_KEYS,
    SIGNALS,
)
from gpudash.exporter.collectors import all_signals, load_collectors, with_nvlink_per_link
from gpudash.exporter.exposition import GpuView, Snapshot, number, render
from gpudash.exporter.poller import Poller
from gpudash.exporter.sim.fleet import fleet_from_specs
from gpudash.exporter.sim.simulated import SimulatedSource
from gpudash.exporter.source import GpuIdentity, LinkHealth

PER_LINK_NAMES = {BY_KEY[key].dcgm_name for key in PER_LINK_KEYS}
HOST = "computeinstance-e00c1p6dpy98xytphp"  # the host of the real sample lines (block 3)
_LABEL = re.compile(r'(\w+)="([^"]*)"')
# DCGM DOUBLE fields, which dcgm-exporter prints with %f (sample blocks 5 and 7: 11.568000, 0.959228).
_DOUBLES = {"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
            "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_SM_OCCUPANCY"}


def _sweep(poller: Poller, times: Iterable[float] = (1000.0, 1010.0)) -> str:
    for now in times:
        for loop in ("static", "slow", "fast"):
            poller.sweep(loop, now=now)
    return poller.exposition.body.decode()


def _names(text: str) -> set[str]:
    return {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}


def test_per_link_nvlink_series_only_when_asked() -> None:
    source = SimulatedSource(fleet_from_specs(2, 7))
    default = _sweep(Poller(source, all_signals().keys, slow_keys=source.costly_keys(), hostname="n"))
    assert not _names(default) & PER_LINK_NAMES
    assert "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL" in _names(default)  # the per-GPU totals stand for them
    assert "DCGM_EXP_GPU_HEALTH_STATUS" in _names(default)
    asked = _sweep(Poller(source, all_signals(nvlink_per_link=True).keys, slow_keys=source.costly_keys(),
                          hostname="n"))
    links = parse_exposition(asked)["gpudash_nvlink_link_up"]
    assert len(links) == 2 * 18 and {labels["link"] for labels, _ in links} == {str(n) for n in range(18)}


def test_the_flag_adds_per_link_series_to_a_counters_file(reference: Path) -> None:
    chosen = load_collectors(reference / "dcgm-exporter" / "default-counters.csv")
    assert not set(chosen.keys) & PER_LINK_KEYS
    added = with_nvlink_per_link(chosen)
    assert set(added.keys) == set(chosen.keys) | PER_LINK_KEYS
    assert list(added.keys) == [s.key for s in SIGNALS if s.key in added.keys]  # still in catalog order


def test_a_gpu_without_links_gets_no_per_link_series_even_when_asked() -> None:
    def view(index: int, links: tuple[LinkHealth, ...]) -> GpuView:
        identity = GpuIdentity(index, f"GPU-{index}", f"00000000:0{index}:00.0", "NVIDIA H200", index)
        return GpuView(identity, True, {"gpu_util": 1.0}, links=links)

    linked = (LinkHealth(0, True, {"crc_flit": 0.0}), LinkHealth(1, False, {"crc_flit": 2.0}))
    text = render(Snapshot([view(0, linked), view(1, ())], sorted(PER_LINK_KEYS), "n")).decode()
    samples = parse_exposition(text)
    assert {labels["gpu"] for labels, _ in samples["gpudash_nvlink_link_up"]} == {"0"}
    assert {labels["gpu"] for labels, _ in samples["gpudash_nvlink_errors_total"]} == {"0"}


# ------------------------------------------------------------------- bytes per GPU against dcgm-exporter


def dcgm_line(name: str, labels: Sequence[tuple[str, str]], value: float) -> str:
    """One series as dcgm-exporter's renderer writes it: labels as given, unescaped, DOUBLE fields with %f."""
    pairs = ",".join(f'{k}="{v}"' for k, v in labels)
    return f"{name}{{{pairs}}} {f'{value:f}' if name in _DOUBLES else str(int(value))}\n"


def dcgm_body(ours: str, fields: Sequence[tuple[str, str, str]]) -> str:
    """What dcgm-exporter writes for the same GPUs, fields and readings as ``ours``: its HELP and TYPE lines, its
    label order (sample block 1), the XID gauge's err_code and err_msg attributes (block 4)."""
    samples = parse_exposition(ours)
    out = []
    for name, kind, help_ in fields:
        rows = samples.get(name) or samples.get(f"{name}_total") or []
        out.append(f"# HELP {name} {help_}\n# TYPE {name} {kind}\n")
        for labels, value in rows:
            extra = [("err_code", "0"), ("err_msg", "Unknown Error")] if name == "DCGM_FI_DEV_XID_ERRORS" else []
            out.append(dcgm_line(name, [*labels.items(), *extra], value))
    return "".join(out)


def _families(text: str, names: set[str]) -> str:
    return "".join(line + "\n" for line in text.splitlines()
                   if (line.split(" ")[2] if line.startswith("#") else line.split("{")[0].split(" ")[0]) in names)


def test_the_dcgm_line_shape_is_a_real_lines(reference: Path) -> None:
    text = (reference / "dcgm-exporter" / "exposition-samples.txt").read_text()
    real = next(line for line in text.splitlines() if line.startswith('DCGM_FI_DEV_GPU_UTIL{gpu="1"'))
    name, rest = real.split("{", 1)
    assert dcgm_line(name, _LABEL.findall(rest), float(real.rsplit(" ", 1)[1])) == real + "\n"
    power = next(line for line in text.splitlines() if line.startswith("DCGM_FI_DEV_POWER_USAGE{"))
    assert dcgm_line("DCGM_FI_DEV_POWER_USAGE", _LABEL.findall(power), 11.568).rsplit(" ", 1)[1] == "11.568000\n"


def test_metrics_per_gpu_are_no_larger_than_dcgm_exporters_for_the_same_fields(reference: Path) -> None:
    csv = reference / "dcgm-exporter" / "default-counters.csv"
    fields = [(name, kind, help_) for name, kind, help_ in (
        (part.strip() for part in line.split(",", 2)) for line in csv.read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")) if kind != "label"]
    gpus = 8
    source = SimulatedSource(fleet_from_specs(gpus, 7, faults=["3=xid:48@0"], epoch=0.0))
    ours = _sweep(Poller(source, load_collectors(csv).keys, slow_keys=source.costly_keys(), hostname=HOST,
                         hostname_label="Hostname"), (600.0, 610.0, 620.0))
    names = {name for name, _, _ in fields}
    assert names <= set(BY_DCGM_NAME) and DRIVER_VERSION_LABEL in ours
    shared = _families(ours, names)
    theirs = dcgm_body(ours, [f for f in fields if f[0] != "DCGM_FI_DEV_VGPU_LICENSE_STATUS"])
    assert _names(theirs) == _names(shared) and len(_names(shared)) == len(fields) - 1  # an H200 has no vGPU license
    assert len(shared) / gpus <= len(theirs) / gpus, (len(shared) / gpus, len(theirs) / gpus)
    # beside them only what the exporter always publishes: gpu_up per GPU, the node's and the sweeps' own series,
    # and the fields this GPU cannot give (the vGPU license, here)
    assert _names(ours) - names == {"gpudash_gpu_up", "gpudash_node_gpus_expected", EXPORTER_SWEEP_SECONDS,
                                     EXPORTER_PENDING, EXPORTER_LAST_SWEEP, EXPORTER_UNSUPPORTED}


@pytest.mark.parametrize("value", [0.9279012345678901, 638.0851234567, 1557832720.4999, 0.1 + 0.2, 3e-7, 87.5])
def test_a_value_is_never_longer_than_dcgm_exporters(value: float) -> None:
    # NVML's GPM ratios and computed rates are doubles of 16 digits; dcgm-exporter prints six decimals
    assert len(number(value)) <= len(f"{value:f}")
    assert abs(float(number(value)) - value) <= 5e-7
