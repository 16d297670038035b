"""Snapshot -> exposition: dcgm-exporter's label order, escaping, number format, promtool's verdict."""

from __future__ import annotations

import gzip
import re

import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.exposition import full_simulated_output

from gpudash.catalog import BY_KEY, SIGNALS
from gpudash.exporter.exposition import Exposition, GpuView, Snapshot, number, render
from gpudash.exporter.health_reads import RETIRED_KEYS
from gpudash.exporter.source import GpuIdentity, ProcessUsage, XidState

NASTY = 'a "quoted" \\back\\slash\nnew line'
BASE_LABELS = ["gpu", "UUID", "pci_bus_id", "device", "modelName", "hostname", "DCGM_FI_DRIVER_VERSION"]


def _identity(index: int = 0, model: str = "NVIDIA H200") -> GpuIdentity:
    uuid = f"GPU-{index:08d}-0000-0000-0000-000000000000"
    return GpuIdentity(index, uuid, f"00000000:{index + 0x18:02X}:00.0", model, index)


def _snapshot(**overrides: object) -> Snapshot:
    view = GpuView(
        _identity(),
        True,
        {"fb_used": 1024.0, "power": 612.5, "clock_event_reasons": float(0x1 | 0x40), "gpu_util": 97.0},
        XidState({13: 2, 79: 1}, 79, 1_700_000_000.5),
        (ProcessUsage(4242, NASTY, 1000.0),),
    )
    fields: dict[str, object] = {
        "gpus": [view],
        "keys": ("fb_used", "power", "gpu_util", "clock_event_active", "xid_total", "xid_last", "xid_last_time",
                 "process_fb_used", "gpu_up"),
        "hostname": "node-1",
        "driver_version": "580.159.04",
        "sweep_seconds": {"fast": 0.0012},
        "errors_total": {"energy": 3},
        "last_sweep": 1_700_000_001.0,
    }
    fields.update(overrides)
    return Snapshot(**fields)  # type: ignore[arg-type]


def _samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    return [(s.name, dict(s.labels), s.value) for f in text_string_to_metric_families(text) for s in f.samples]


def test_labels_in_dcgm_exporter_order() -> None:
    text = render(_snapshot()).decode()
    line = next(line for line in text.splitlines() if line.startswith("DCGM_FI_DEV_FB_USED{"))
    assert re.findall(r'([A-Za-z_]+)="', line) == BASE_LABELS
    assert line.endswith("} 1024")
    reason = next(line for line in text.splitlines() if line.startswith("gpudash_clock_event_active{"))
    assert re.findall(r'([A-Za-z_]+)="', reason) == [*BASE_LABELS, "clock_event"]


def test_legacy_and_absent_host_label() -> None:
    legacy = render(_snapshot(hostname_label="Hostname")).decode()
    assert 'modelName="NVIDIA H200",Hostname="node-1",DCGM_FI_DRIVER_VERSION="580.159.04"}' in legacy
    bare = render(_snapshot(hostname=None, driver_version=None)).decode()
    assert 'modelName="NVIDIA H200"} 1024' in bare and "ostname" not in bare


def test_help_type_and_values_come_from_the_catalog() -> None:
    text = render(_snapshot()).decode()
    for key in ("fb_used", "xid_total", "gpu_up"):
        signal = BY_KEY[key]
        assert f"# HELP {signal.dcgm_name} {signal.help}\n# TYPE {signal.dcgm_name} {signal.type}\n" in text
    samples = _samples(text)
    events = {labels["clock_event"]: value for name, labels, value in samples if name == "gpudash_clock_event_active"}
    assert events["gpu_idle"] == 1 and events["hw_thermal_slowdown"] == 1 and events["sw_power_cap"] == 0
    xid = {labels["xid"]: value for name, labels, value in samples if name == "gpudash_xid_errors_total"}
    assert xid == {"13": 2, "79": 1}
    assert ("DCGM_FI_DEV_XID_ERRORS", 79.0) in [(n, v) for n, _, v in samples]
    assert 'gpudash_exporter_collection_errors_total{field="energy"} 3\n' in text


def test_escaping_round_trips_through_a_parser() -> None:
    snap = _snapshot(gpus=[GpuView(_identity(model=NASTY), True, {"fb_used": 1.0}, XidState(),
                                   (ProcessUsage(7, NASTY, 2.0),))], hostname=NASTY)
    text = render(snap).decode()
    assert '\\"quoted\\" \\\\back\\\\slash\\nnew line' in text
    assert "\nnew line" not in text  # no raw newline inside a label value
    procs = [labels for name, labels, _ in _samples(text) if name == "gpudash_process_fb_used_mib"]
    assert procs == [{**procs[0], "process_name": NASTY}] and procs[0]["modelName"] == NASTY
    assert procs[0]["hostname"] == NASTY


def test_lost_gpu_reports_only_up_and_its_xids() -> None:
    down = GpuView(_identity(1), False, {}, XidState({79: 1}, 79, 5.0))
    text = render(_snapshot(gpus=[down])).decode()
    names = {name for name, _, _ in _samples(text)}
    assert names == {"gpudash_gpu_up", "gpudash_xid_errors_total", "gpudash_xid_last_timestamp_seconds",
                     "gpudash_exporter_collection_duration_seconds", "gpudash_exporter_collection_errors_total",
                     "gpudash_exporter_last_sweep_timestamp_seconds"}
    assert 'gpudash_gpu_up{gpu="1"' in text and text.split('gpudash_gpu_up{gpu="1"')[1].split("\n")[0].endswith(" 0")


@pytest.mark.parametrize(
    ("value", "text"),
    [(3.0, "3"), (612.5, "612.5"), (0.1 + 0.2, "0.3"), (0.9279012345678901, "0.927901"), (4e-6, "4e-06"),
     (2.0000001, "2"), (-0.0000001, "0"), (float("nan"), "NaN"), (float("inf"), "+Inf"), (2.5e16, "2.5e+16"),
     (7, "7"), (-1.0, "-1")],
)
def test_number_format(value: float, text: str) -> None:
    assert number(value) == text


def test_gzip_body_is_the_same_bytes() -> None:
    exposition = Exposition(render(_snapshot()))
    assert gzip.decompress(exposition.gzipped()) == exposition.body
    assert exposition.gzipped() is exposition.gzipped()  # compressed once


def test_every_catalog_signal_is_published_by_the_simulated_node() -> None:
    names = {name for name, _, _ in _samples(full_simulated_output())}
    published = {n[: -len("_total")] if n.endswith("_total") else n for n in names}
    unsupported = {"vgpu_license"} | RETIRED_KEYS  # an H200 has no vGPU license and remaps rows instead
    expected = {s.dcgm_name.removesuffix("_total") for s in SIGNALS if s.key not in unsupported}
    assert expected <= published
