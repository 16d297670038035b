"""The health series in /metrics: dcgm-exporter's names, labels and types, the windowed counts, the node's count."""

from __future__ import annotations

import re

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpudash.catalog import BY_KEY, NODE_SIGNALS
from gpudash.exporter.collectors import parse_collectors
from gpudash.exporter.exposition import GpuView, Snapshot, render
from gpudash.exporter.source import GpuIdentity, LinkHealth, XidLedger, count_in_window

BASE = ["gpu", "UUID", "pci_bus_id", "device", "modelName", "hostname", "DCGM_FI_DRIVER_VERSION"]
NOW = 1_700_000_000.0


def _identity(index: int = 0) -> GpuIdentity:
    return GpuIdentity(index, f"GPU-{index:08d}-0000-0000-0000-000000000000", f"00000000:{index + 0x18:02X}:00.0",
                       "NVIDIA H200", index)


def _snap(views: list[GpuView], keys: tuple[str, ...], **kw: object) -> Snapshot:
    fields: dict[str, object] = {"hostname": "node-1", "driver_version": "580.159.04", "now": NOW}
    fields.update(kw)
    return Snapshot(views, keys, **fields)  # type: ignore[arg-type]


def _lines(text: str, name: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(name + "{")]


def _labels(line: str) -> list[str]:
    return re.findall(r'([A-Za-z_]+)="', line)


def test_xid_window_counts_per_code_inside_the_window_only() -> None:
    ledger = XidLedger()
    for when, code in ((NOW - 400, 48), (NOW - 200, 48), (NOW - 100, 48), (NOW - 10, 63), (NOW - 1, 79)):
        ledger.record(code, when)
    view = GpuView(_identity(), True, {}, ledger.state(NOW))
    text = render(_snap([view], ("xid_count_window", "xid_total"))).decode()
    lines = _lines(text, "DCGM_EXP_XID_ERRORS_COUNT")
    counts = {re.search(r'xid="(\d+)"', line).group(1): line.rsplit(" ", 1)[1] for line in lines}  # type: ignore[union-attr]
    assert counts == {"48": "2", "63": "1", "79": "1"}  # the 48 at -400 s fell out of the 300 s window
    assert all(_labels(line) == [*BASE, "xid", "window_size_in_ms"] for line in lines)
    assert all('window_size_in_ms="300000"' in line for line in lines)
    assert "# TYPE DCGM_EXP_XID_ERRORS_COUNT gauge" in text  # as dcgm-exporter 4.8 declares it: a count in a window
    assert 'gpudash_xid_errors_total{' in text and 'xid="48"} 3' in text  # the counter keeps every one


def test_no_xid_in_the_window_is_one_zero_series_without_xid() -> None:
    ledger = XidLedger()
    ledger.record(13, NOW - 3600)
    view = GpuView(_identity(), True, {}, ledger.state(NOW))
    text = render(_snap([view], ("xid_count_window",), count_window=60.0)).decode()
    (line,) = _lines(text, "DCGM_EXP_XID_ERRORS_COUNT")
    assert _labels(line) == [*BASE, "window_size_in_ms"] and line.endswith('window_size_in_ms="60000"} 0')


def test_count_in_window_is_half_open() -> None:
    events = [(90.0, 1), (100.0, 1), (100.0, 2), (40.0, 2)]
    assert count_in_window(events, 100.0, 10.0) == {1: 1, 2: 1}
    assert count_in_window(events, 100.0, 60.0) == {1: 2, 2: 1}  # 40 is exactly 60 s back: out


def test_clock_events_count_uses_dcgm_exporter_label_values() -> None:
    view = GpuView(_identity(), True, {"clock_event_reasons": 0x24}, clock_events=(
        (NOW - 500, 0x4), (NOW - 100, 0x4), (NOW - 50, 0x4), (NOW - 20, 0x20), (NOW - 5, 0x1)))
    text = render(_snap([view], ("clock_events_count",))).decode()
    got = {re.search(r'clock_event="([a-z_]+)"', line).group(1): line.rsplit(" ", 1)[1]  # type: ignore[union-attr]
           for line in _lines(text, "DCGM_EXP_CLOCK_EVENTS_COUNT")}
    assert got == {"gpu_idle": "1", "power_cap": "2", "sw_thermal": "1"}  # not gpudash's sw_power_cap names


def test_nvlink_series_per_link_and_error_kind() -> None:
    links = (LinkHealth(0, True, {"crc_flit": 5.0, "replay": 1.0, "recovery": 0.0}), LinkHealth(1, False, {}))
    view = GpuView(_identity(), True, {"nvlink_crc_flit": 5.0}, links=links)
    text = render(_snap([view], ("nvlink_crc_flit", "nvlink_link_errors", "nvlink_link_up"))).decode()
    errors = _lines(text, "gpudash_nvlink_errors_total")
    assert [_labels(line)[-2:] for line in errors] == [["link", "error"]] * 3
    assert 'link="0",error="crc_flit"} 5' in text and 'error="crc_data"' not in text  # not read: left out
    assert [line.rsplit(" ", 1)[1] for line in _lines(text, "gpudash_nvlink_link_up")] == ["1", "0"]
    assert "# TYPE gpudash_nvlink_errors_total counter" in text and "# TYPE gpudash_nvlink_link_up gauge" in text
    assert _lines(text, "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL")[0].endswith("} 5")


def test_gpus_expected_is_one_node_series_without_gpu_labels() -> None:
    views = [GpuView(_identity(0), True), GpuView(_identity(1), False)]
    text = render(_snap(views, ("gpu_up", "gpus_expected"), gpus_expected=8)).decode()
    (line,) = [x for x in text.splitlines() if x.startswith("gpudash_node_gpus_expected")]
    assert line == 'gpudash_node_gpus_expected{hostname="node-1",DCGM_FI_DRIVER_VERSION="580.159.04"} 8'
    up = {m.group(1): m.group(2) for m in re.finditer(r'gpudash_gpu_up\{gpu="(\d)".*\} (\d)', text)}
    assert up == {"0": "1", "1": "0"}  # the lost GPU stays, at 0, with its labels
    assert {"gpus_expected"} == NODE_SIGNALS
    families = {f.name: f.type for f in text_string_to_metric_families(text)}
    assert families["gpudash_node_gpus_expected"] == "gauge"


@pytest.mark.parametrize("key", ["ecc_dbe_vol", "row_remap_pending", "gpu_max_op_temp", "temp_margin",
                                 "thermal_violation", "recovery_action", "retired_pending"])
def test_plain_health_values_carry_catalog_names_and_types(key: str) -> None:
    view = GpuView(_identity(), True, {key: 3.0})
    text = render(_snap([view], (key,))).decode()
    signal = BY_KEY[key]
    assert f"# HELP {signal.dcgm_name} {signal.help}\n# TYPE {signal.dcgm_name} {signal.type}\n" in text
    (line,) = _lines(text, signal.dcgm_name)
    assert _labels(line) == BASE and line.endswith("} 3")


def test_a_counters_csv_can_enable_every_optional_health_field() -> None:
    names = ["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_ROW_REMAP_PENDING", "DCGM_EXP_XID_ERRORS_COUNT",
             "DCGM_EXP_CLOCK_EVENTS_COUNT", "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
             "DCGM_FI_DEV_GPU_TEMP_LIMIT", "DCGM_FI_DEV_GPU_RECOVERY_ACTION", "gpudash_node_gpus_expected"]
    chosen = parse_collectors("".join(f"{n}, counter, x\n" for n in names), "c.csv")
    assert {BY_KEY[k].dcgm_name for k in chosen.keys} == {*names, "gpudash_gpu_up"}  # gpus_expected: named


def test_new_link_readings_are_rendered_not_the_previous_text() -> None:
    first = (LinkHealth(0, True, {"crc_flit": 1.0}),)
    second = (LinkHealth(0, False, {"crc_flit": 9.0}),)
    keys = ("nvlink_link_errors", "nvlink_link_up")
    a = render(_snap([GpuView(_identity(), True, links=first)], keys)).decode()
    again = render(_snap([GpuView(_identity(), True, links=first)], keys)).decode()
    b = render(_snap([GpuView(_identity(), True, links=second)], keys)).decode()
    assert a == again and 'error="crc_flit"} 1\n' in a and 'link="0"} 1\n' in a
    assert 'error="crc_flit"} 9\n' in b and 'link="0"} 0\n' in b


def test_rising_bits_are_the_reasons_that_just_turned_on() -> None:
    from gpudash.exporter.poller import rising_bits

    assert rising_bits(0x0, 0x25) == [0x1, 0x4, 0x20]
    assert rising_bits(0x25, 0x25) == [] and rising_bits(0x25, 0x0) == []
    assert rising_bits(0x5, 0x48) == [0x8, 0x40]
