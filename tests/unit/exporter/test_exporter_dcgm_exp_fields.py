"""dcgm-exporter 4.8's own fields: the edge-counted totals, the health status per watch and the P2P status."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from support.dcgm_types import declared_48

from gpudash.exporter.collectors import parse_collectors
from gpudash.exporter.exposition import GpuView, Snapshot, render
from gpudash.exporter.health_status import FAIL, OK, PASS, WARN, health_watches
from gpudash.exporter.p2p import peer_status
from gpudash.exporter.poller import Poller
from gpudash.exporter.sim.fleet import fleet_from_specs
from gpudash.exporter.sim.simulated import SimulatedSource
from gpudash.exporter.source import GpuIdentity, GpuReading, LinkHealth, PeerStatus, XidLedger

BASE = ["gpu", "UUID", "pci_bus_id", "device", "modelName", "hostname", "DCGM_FI_DRIVER_VERSION"]
POWER_CAP, HW_THERMAL, POWER_BRAKE = 0x4, 0x40, 0x80
GPU0 = GpuIdentity(0, "GPU-00000000-0000-0000-0000-000000000000", "00000000:18:00.0", "NVIDIA H200", 0)


class Toggling:
    """One GPU whose power-cap reason is on for the first half of every 10 s, lost while ``lost`` says so."""

    def __init__(self) -> None:
        self.lost = False
        self.xids = XidLedger()

    def driver_version(self) -> str:
        return "580.159.04"

    def gpus(self) -> Sequence[GpuIdentity]:
        return [GPU0]

    def costly_keys(self) -> frozenset[str]:
        return frozenset()

    def read(self, index: int, keys: frozenset[str], now: float) -> GpuReading:
        if self.lost:
            return GpuReading(index, up=False, xid=self.xids.state(now))
        mask = POWER_CAP if now % 10 < 5 else 0
        return GpuReading(index, values={"clock_event_reasons": float(mask)} if "clock_event_reasons" in keys else {},
                          xid=self.xids.state(now))

    def close(self) -> None:
        """Nothing to release."""


def _value(text: str, name: str, **labels: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_clock_events_total_counts_every_rise_since_start_beyond_the_window() -> None:
    source = Toggling()
    poller = Poller(source, ("clock_events_count", "clock_events_total"), count_window=30.0, hostname="n")
    for t in range(1000, 1100):  # ten rises of power_cap, at 1000, 1010, ... 1090
        poller.sweep("fast", now=float(t))
    text = poller.exposition.body.decode()
    assert _value(text, "DCGM_EXP_CLOCK_EVENTS_TOTAL", clock_event="power_cap") == 10
    assert _value(text, "DCGM_EXP_CLOCK_EVENTS_COUNT", clock_event="power_cap") == 3  # 1070, 1080, 1090
    assert _value(text, "DCGM_EXP_CLOCK_EVENTS_TOTAL", clock_event="hw_thermal") == 0  # every reason from 0
    assert "# TYPE DCGM_EXP_CLOCK_EVENTS_TOTAL counter" in text and "# TYPE DCGM_EXP_CLOCK_EVENTS_COUNT gauge" in text
    source.lost = True
    poller.sweep("fast", now=1100.0)
    assert "DCGM_EXP_CLOCK_EVENTS_TOTAL{" not in poller.exposition.body.decode()  # a lost GPU reads nothing
    source.lost = False
    for t in range(1101, 1112):
        poller.sweep("fast", now=float(t))
    # back: the count goes on from where it was (a counter never drops); a GPU back from the bus has been reset,
    # so the reason it comes back with is a new activation (1101), then the rise at 1110
    assert _value(poller.exposition.body.decode(), "DCGM_EXP_CLOCK_EVENTS_TOTAL", clock_event="power_cap") == 12


def test_xid_errors_total_is_a_counter_per_code_since_start() -> None:
    source = Toggling()
    poller = Poller(source, ("xid_count_window", "xid_count_total"), count_window=60.0, hostname="n")
    for when, code in ((1000.0, 48), (1010.0, 48), (1200.0, 79)):
        source.xids.record(code, when)
    poller.sweep("fast", now=1210.0)
    text = poller.exposition.body.decode()
    assert _value(text, "DCGM_EXP_XID_ERRORS_TOTAL", xid="48") == 2  # long out of the 60 s window
    assert _value(text, "DCGM_EXP_XID_ERRORS_COUNT", xid="48") is None
    assert _value(text, "DCGM_EXP_XID_ERRORS_TOTAL", xid="79") == 1
    assert _value(text, "DCGM_EXP_XID_ERRORS_COUNT", xid="79") == 1
    line = next(line for line in text.splitlines() if line.startswith("DCGM_EXP_XID_ERRORS_TOTAL{"))
    assert re.findall(r'([A-Za-z_]+)="', line) == ["gpu", "UUID", "pci_bus_id", "device", "modelName", "hostname",
                                                   "DCGM_FI_DRIVER_VERSION", "xid"]


LINKS_UP = (LinkHealth(0, True), LinkHealth(1, True))


def test_each_watch_shows_its_worst_incident_with_dcgm_error_code() -> None:
    healthy = {"ecc_dbe_vol": 0.0, "row_remap_failure": 0.0, "row_remap_pending": 0.0, "clock_event_reasons": 0.0}
    assert health_watches(healthy, LINKS_UP) == [("MEM", PASS, OK), ("NVLINK", PASS, OK), ("THERMAL", PASS, OK),
                                                 ("POWER", PASS, OK)]
    sick = {**healthy, "ecc_dbe_vol": 4.0, "row_remap_pending": 1.0, "clock_event_reasons": float(HW_THERMAL)}
    assert health_watches(sick, (LinkHealth(0, True), LinkHealth(1, False))) == [
        ("MEM", FAIL, "DCGM_FR_VOLATILE_DBE_DETECTED"), ("NVLINK", FAIL, "DCGM_FR_NVLINK_DOWN"),
        ("THERMAL", WARN, "DCGM_FR_CLOCK_THROTTLE_THERMAL"), ("POWER", PASS, OK)]
    assert health_watches({"row_remap_pending": 1.0}, ()) == [("MEM", WARN, "DCGM_FR_PENDING_ROW_REMAP")]
    assert health_watches({"clock_event_reasons": float(POWER_BRAKE | POWER_CAP)}, ()) == [
        ("THERMAL", PASS, OK), ("POWER", WARN, "DCGM_FR_CLOCK_THROTTLE_POWER")]  # a power cap alone is no incident
    assert health_watches({"gpu_temp": 40.0}, ()) == []  # nothing it can judge: no watch claims a pass


def test_health_status_series_carry_watch_and_code_after_the_gpu_labels() -> None:
    view = GpuView(GPU0, True, {"ecc_dbe_vol": 1.0}, links=LINKS_UP)
    down = GpuView(GpuIdentity(1, "GPU-1", "00000000:19:00.0", "NVIDIA H200", 1), False, {"ecc_dbe_vol": 1.0})
    snap = Snapshot([view, down], ("gpu_health_status",), "node-1", driver_version="580.159.04")
    lines = [line for line in render(snap).decode().splitlines() if line.startswith("DCGM_EXP_GPU_HEALTH_STATUS{")]
    assert [re.findall(r'([A-Za-z_]+)="', line) for line in lines] == [[*BASE, "health_watch", "health_error_code"]] * 2
    assert lines[0].endswith('health_watch="MEM",health_error_code="DCGM_FR_VOLATILE_DBE_DETECTED"} 20')
    assert lines[1].endswith('health_watch="NVLINK",health_error_code="DCGM_FR_OK"} 0')


def test_simulated_dbe_burst_fails_the_memory_watch_until_the_reset() -> None:
    fleet = fleet_from_specs(2, seed=3, faults=["1=dbe-burst@1m+5m"], epoch=0)
    poller = Poller(SimulatedSource(fleet), ("gpu_health_status",), hostname="n")

    def mem(t: float, gpu: int) -> tuple[float | None, str]:
        for loop in ("static", "slow", "fast"):
            poller.sweep(loop, now=t)
        text = poller.exposition.body.decode()
        line = next(line for line in text.splitlines()
                    if line.startswith("DCGM_EXP_GPU_HEALTH_STATUS{") and f'gpu="{gpu}"' in line and '"MEM"' in line)
        return float(line.rsplit(" ", 1)[1]), line.split('health_error_code="')[1].split('"')[0]

    assert mem(30.0, 1) == (PASS, OK)
    assert mem(120.0, 1) == (FAIL, "DCGM_FR_VOLATILE_DBE_DETECTED") and mem(120.0, 0) == (PASS, OK)
    assert mem(400.0, 1) == (PASS, OK)  # reset: the volatile count and the pending remap are cleared


def test_simulated_p2p_reads_ok_to_every_peer_and_leaves_a_lost_one_out() -> None:
    fleet = fleet_from_specs(3, seed=3, faults=["2=fell-off-bus@1m"], epoch=0)
    source = SimulatedSource(fleet)
    assert source.read(0, frozenset({"p2p_status"}), 30.0).peers == (PeerStatus(1, 0), PeerStatus(2, 0))
    assert source.read(0, frozenset({"p2p_status"}), 90.0).peers == (PeerStatus(1, 0),)
    assert source.read(0, frozenset({"gpu_temp"}), 90.0).peers is None  # not asked: not read
    poller = Poller(source, ("p2p_status",), slow_keys=source.costly_keys(), hostname="n")
    for loop in ("static", "slow", "fast"):
        poller.sweep(loop, now=30.0)
    text = poller.exposition.body.decode()
    assert "# TYPE DCGM_EXP_P2P_STATUS gauge" in text
    assert _value(text, "DCGM_EXP_P2P_STATUS", gpu="1", peer_gpu="2") == 0
    assert text.count("DCGM_EXP_P2P_STATUS{") == 6  # 3 GPUs x 2 peers


class FakeP2pNvml:
    """pynvml's P2P call and constants: status by (gpu, peer) handle, or an NVML error code to raise."""

    NVML_P2P_CAPS_INDEX_NVLINK = 2
    NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_FUNCTION_NOT_FOUND, NVML_ERROR_GPU_IS_LOST = 3, 13, 15

    class NVMLError(Exception):
        def __init__(self, value: int) -> None:
            super().__init__(f"NVML error {value}")
            self.value = value

    def __init__(self, answers: dict[tuple[str, str], int | Exception]) -> None:
        self.answers = answers
        self.asked: list[tuple[str, str, int]] = []

    def nvmlDeviceGetP2PStatus(self, gpu: Any, peer: Any, index: int) -> int:
        self.asked.append((gpu, peer, index))
        answer = self.answers[(gpu, peer)]
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_nvml_p2p_status_per_peer_over_nvlink() -> None:
    nv = FakeP2pNvml({("h0", "h1"): 0, ("h0", "h2"): 5, ("h0", "h3"): 0})
    nv.answers[("h0", "h2")] = 5  # NVML_P2P_STATUS_NOT_SUPPORTED between these two: a status, published
    got = peer_status(nv, "h0", 0, ["h0", "h1", "h2", "h3"], [False, False, False, True])
    assert got == (PeerStatus(1, 0), PeerStatus(2, 5))  # GPU 3 is lost: not asked
    assert [(peer, index) for _gpu, peer, index in nv.asked] == [("h1", 2), ("h2", 2)]  # NVLINK caps index


def test_nvml_p2p_errors_leave_the_peer_out_and_not_supported_everywhere_is_unsupported() -> None:
    nv = FakeP2pNvml({})
    nv.answers = {("h0", "h1"): nv.NVMLError(nv.NVML_ERROR_GPU_IS_LOST), ("h0", "h2"): 0}
    assert peer_status(nv, "h0", 0, ["h0", "h1", "h2"], [False] * 3) == (PeerStatus(2, 0),)
    nv.answers = {("h0", "h1"): nv.NVMLError(nv.NVML_ERROR_NOT_SUPPORTED),
                  ("h0", "h2"): nv.NVMLError(nv.NVML_ERROR_NOT_SUPPORTED)}
    assert peer_status(nv, "h0", 0, ["h0", "h1", "h2"], [False] * 3) is None
    assert peer_status(nv, "h0", 0, ["h0"], [False]) == ()  # one GPU: no peer, nothing to say


def test_a_4_8_counters_file_selects_dcgm_exporter_own_fields(reference: Path) -> None:
    rows = [f"{name}, {kind}, {help_}" for name, (kind, help_) in declared_48(reference).items()]
    chosen = parse_collectors("\n".join(["DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).", *rows]), "4.8.csv")
    assert set(chosen.keys) >= {"xid_count_window", "xid_count_total", "clock_events_count", "clock_events_total",
                                "gpu_health_status", "p2p_status", "gpu_temp"}
