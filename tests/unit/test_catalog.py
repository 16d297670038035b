"""The metric catalog against the real exporters' output: names, types, help and units line up."""

from __future__ import annotations

import re
from pathlib import Path

from support.dcgm_types import declared_types

from gpudash.catalog import BY_DCGM_NAME, DCGM, NVIDIA_SMI, SIGNALS, Publisher


def _default_counters(reference: Path) -> dict[str, tuple[str, str]]:
    rows = {}
    for line in (reference / "dcgm-exporter" / "default-counters.csv").read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, kind, help_ = (part.strip() for part in line.split(",", 2))
        rows[name] = (kind, help_)
    return rows


def test_every_default_counter_is_in_the_catalog_with_its_type_and_help(reference: Path) -> None:
    counters = _default_counters(reference)
    types = declared_types(reference)  # the 2026 file retyped some rows of this older copy
    assert len(counters) > 20
    for name, (kind, help_) in counters.items():
        if kind == "label":
            continue  # DCGM_FI_DRIVER_VERSION is a label on every series, not a metric
        signal = BY_DCGM_NAME[name]
        assert signal.type == types[name], name
        assert signal.help == help_, name
        assert signal.publisher is Publisher.DCGM_DEFAULT, name


def test_signals_outside_the_default_counters_are_marked_optional(reference: Path) -> None:
    counters = _default_counters(reference)
    for signal in SIGNALS:
        assert signal.optional == (signal.dcgm_name not in counters), signal.key


def test_keys_and_names_are_unique() -> None:
    assert len({s.key for s in SIGNALS}) == len(SIGNALS)
    assert len({s.dcgm_name for s in SIGNALS}) == len(SIGNALS)


def test_default_counters_have_no_memory_total(reference: Path) -> None:
    # Memory percentages must come from used / (used + free): real dcgm-exporter deployments have no total.
    counters = _default_counters(reference)
    assert "DCGM_FI_DEV_FB_TOTAL" not in counters
    assert {"DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE"} <= set(counters)


def test_nvidia_smi_profile_names_exist_in_real_nvidia_gpu_exporter_output(reference: Path) -> None:
    text = (reference / "nvidia_gpu_exporter" / "exposition-h100-under-load.metrics").read_text()
    published = set(re.findall(r"^(nvidia_smi_[a-z0-9_]+)", text, re.MULTILINE))
    for key, ref in NVIDIA_SMI.metrics.items():
        assert ref.name in published, f"{key}: {ref.name} is not in nvidia_gpu_exporter's output"
    assert 'uuid="' in text and NVIDIA_SMI.gpu_label == "uuid"


def test_nvidia_smi_conversions_reach_dcgm_units() -> None:
    assert NVIDIA_SMI.ref("gpu_util").convert == "* 100"  # ratio -> %
    assert NVIDIA_SMI.ref("fb_used").convert == "/ 1048576"  # bytes -> MiB
    assert NVIDIA_SMI.ref("sm_clock").convert == "/ 1000000"  # Hz -> MHz
    assert NVIDIA_SMI.ref("gpu_temp").convert == ""


def test_dcgm_profile_reads_dcgm_exporters_names_units_and_labels(reference: Path) -> None:
    counters = _default_counters(reference)
    for signal in SIGNALS:
        if signal.publisher is Publisher.DCGM_DEFAULT:
            ref = DCGM.ref(signal.key)
            assert ref.name in counters and ref.convert == "", signal.key  # its own name, in DCGM units
    # the GPU and host labels as dcgm-exporter renders them (its server test's expected response)
    samples = (reference / "dcgm-exporter" / "exposition-samples.txt").read_text()
    assert f'TEST_METRIC{{{DCGM.gpu_label}="0",' in samples and f',{DCGM.hostname_label}="testhost"}}' in samples
