"""Field selection from a dcgm-exporter counters CSV."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpudash.catalog import BY_KEY
from gpudash.errors import ExporterError
from gpudash.exporter.collectors import load_collectors, parse_collectors
from gpudash.exporter.poller import Poller
from gpudash.exporter.sim.fleet import fleet_from_specs
from gpudash.exporter.sim.simulated import SimulatedSource


def _uncommented_fields(path: Path) -> set[str]:
    lines = (line.strip() for line in path.read_text().splitlines())
    return {line.split(",")[0].strip() for line in lines if line and not line.startswith("#")}


def test_dcgm_exporters_default_counters_load(reference: Path) -> None:
    path = reference / "dcgm-exporter" / "default-counters.csv"
    chosen = load_collectors(path)
    fields = _uncommented_fields(path) - {"DCGM_FI_DRIVER_VERSION"}
    assert {BY_KEY[key].dcgm_name for key in chosen.keys} == fields | {"gpudash_gpu_up", "gpudash_node_gpus_expected"}
    assert chosen.driver_version_label and chosen.origin == str(path)


def test_only_the_chosen_fields_are_published(reference: Path) -> None:
    chosen = load_collectors(reference / "dcgm-exporter" / "default-counters.csv")
    source = SimulatedSource(fleet_from_specs(2, epoch=0))
    poller = Poller(source, chosen.keys, slow_keys=source.costly_keys(), hostname="n",
                    driver_version_label=chosen.driver_version_label)
    for loop in ("static", "slow", "fast"):
        poller.sweep(loop, now=300.0)
    names = {line.split("{")[0] for line in poller.exposition.body.decode().splitlines() if not line.startswith("#")}
    gpu_names = {n for n in names if not n.startswith("gpudash_exporter_")}
    expected = _uncommented_fields(reference / "dcgm-exporter" / "default-counters.csv")
    expected -= {"DCGM_FI_DRIVER_VERSION", "DCGM_FI_DEV_VGPU_LICENSE_STATUS"}  # not supported on an H200
    assert gpu_names == expected | {"gpudash_gpu_up", "gpudash_node_gpus_expected"}


def test_gpudash_fields_and_a_custom_selection() -> None:
    chosen = parse_collectors(
        "# mine\nDCGM_FI_DEV_FB_USED, gauge, used\n\ngpudash_xid_errors_total, counter, xids\n", "mine.csv"
    )
    assert chosen.keys == ("fb_used", "xid_total", "gpu_up", "gpus_expected") and not chosen.driver_version_label


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("DCGM_FI_DEV_FB_USED, gauge, x\nDCGM_FI_DEV_NOPE, gauge, y\n", r"c\.csv:2: unknown field 'DCGM_FI_DEV_NOPE'"),
        ("DCGM_FI_DEV_SYNC_BOOST_VIOLATION, counter, x\n", r"c\.csv:1: unknown field .DCGM_FI_DEV_SYNC_BOOST_"),
        ("DCGM_FI_DEV_FB_USED, histogram, x\n", r"c\.csv:1: DCGM_FI_DEV_FB_USED: type must be gauge, counter or label"),
        ("DCGM_FI_DEV_SERIAL, label, x\n", r"c\.csv:1: label field 'DCGM_FI_DEV_SERIAL' is not supported"),
        ("DCGM_FI_DEV_FB_USED\n", r"c\.csv:1: expected 'FIELD, type, help'"),
        ("# nothing\n", r"c\.csv: names no field"),
    ],
)
def test_bad_counters_are_one_clear_error(text: str, message: str) -> None:
    with pytest.raises(ExporterError, match=message):
        parse_collectors(text, "c.csv")


def test_unreadable_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ExporterError, match=r"missing\.csv: cannot read collectors file"):
        load_collectors(tmp_path / "missing.csv")


def test_a_collectors_file_over_the_config_limit_is_one_line_read_no_further(tmp_path: Path) -> None:
    path = tmp_path / "counters.csv"
    path.write_text("DCGM_FI_DEV_GPU_UTIL, gauge, utilization\n" + "#" * (1 << 20))
    with pytest.raises(ExporterError) as info:
        load_collectors(path)
    assert info.value.format_message() == (f"{path}: collectors file: {path.stat().st_size:,} bytes; "
                                           "a config file is at most 1,048,576 bytes")
