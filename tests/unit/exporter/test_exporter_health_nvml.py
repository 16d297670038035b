"""The GPU-health reads through NVML, against a fake pynvml module holding one H200-like GPU's answers.

The fake implements only the calls the NVML source makes, with pynvml's names and return shapes; a call the
test marks unsupported raises NVMLError(NVML_ERROR_NOT_SUPPORTED) as the real binding does.
"""

from __future__ import annotations

import sys
import time
from types import SimpleNamespace
from typing import Any

import pytest

from gpudash.exporter import health_reads
from gpudash.exporter.nvml_reader import Unsupported
from gpudash.exporter.source import LinkHealth

NOT_SUPPORTED, INVALID_ARGUMENT, FUNCTION_NOT_FOUND, GPU_IS_LOST, UNKNOWN = 3, 2, 13, 15, 999


class FakeNvml:
    """One GPU: ECC counts, remapped rows, thresholds, margin, violations, recovery action and NVLink links."""

    NVML_SUCCESS = 0
    NVML_ERROR_NOT_SUPPORTED = NOT_SUPPORTED
    NVML_ERROR_INVALID_ARGUMENT = INVALID_ARGUMENT
    NVML_ERROR_FUNCTION_NOT_FOUND = FUNCTION_NOT_FOUND
    NVML_ERROR_NO_PERMISSION = 4
    NVML_ERROR_GPU_IS_LOST = GPU_IS_LOST
    NVML_ERROR_RESET_REQUIRED = 14
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25
    NVML_TEMPERATURE_GPU = 0
    NVML_TEMPERATURE_THRESHOLD_SHUTDOWN, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 0, 1
    NVML_TEMPERATURE_THRESHOLD_MEM_MAX, NVML_TEMPERATURE_THRESHOLD_GPU_MAX = 2, 3
    NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 0, 1
    NVML_VOLATILE_ECC, NVML_AGGREGATE_ECC = 0, 1
    NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS, NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 0, 1
    NVML_PERF_POLICY_POWER, NVML_PERF_POLICY_THERMAL = 0, 1
    NVML_FI_DEV_GET_GPU_RECOVERY_ACTION = 230
    NVML_NVLINK_MAX_LINKS = 36

    class NVMLError(Exception):
        def __init__(self, value: int) -> None:
            super().__init__(f"NVML error {value}")
            self.value = value

    def __init__(self, links: int = 18, link_counter_api: bool = True, link_fields: bool = True) -> None:
        self.unsupported: set[str] = set()  # names of calls that raise NotSupported
        self.links = links
        self.link_counter_api = link_counter_api
        self.link_fields = link_fields  # Hopper's NVML_FI_DEV_NVLINK_ERROR_DL_* answer
        self.counter_api_data_crc = 0  # what the older counter call says of the data CRC (an H200 says > 0)
        self.inactive = {5}
        self.ecc = {(0, 0): 7, (1, 0): 2, (0, 1): 311, (1, 1): 3}  # (type, counter) -> count
        self.link_errors = {(4, 2): 1200, (4, 3): 400, (4, 0): 12, (9, 1): 1}  # (link, DL counter) -> count
        self.calls: list[str] = []
        self.lost = False  # the GPU fell off the bus: every call answers GPU_IS_LOST

    def _call(self, name: str) -> None:
        self.calls.append(name)
        if self.lost:
            raise self.NVMLError(GPU_IS_LOST)
        if name in self.unsupported:
            raise self.NVMLError(NOT_SUPPORTED)

    # -- the health calls
    def nvmlDeviceGetTotalEccErrors(self, _h: Any, error_type: int, counter: int) -> int:
        self._call("nvmlDeviceGetTotalEccErrors")
        return self.ecc[(error_type, counter)]

    def nvmlDeviceGetRetiredPages(self, _h: Any, cause: int) -> list[int]:
        self._call("nvmlDeviceGetRetiredPages")
        return [0x1000 * k for k in range(3 if cause == 0 else 1)]

    def nvmlDeviceGetRetiredPagesPendingStatus(self, _h: Any) -> int:
        self._call("nvmlDeviceGetRetiredPagesPendingStatus")
        return 1

    def nvmlDeviceGetTemperatureThreshold(self, _h: Any, which: int) -> int:
        self._call("nvmlDeviceGetTemperatureThreshold")
        return {0: 95, 1: 89, 2: 95, 3: 87}[which]

    def nvmlDeviceGetMarginTemperature(self, _h: Any) -> int:
        self._call("nvmlDeviceGetMarginTemperature")
        return 46

    def nvmlDeviceGetViolationStatus(self, _h: Any, policy: int) -> Any:
        self._call("nvmlDeviceGetViolationStatus")
        return SimpleNamespace(referenceTime=1, violationTime=[5_000_000_000, 120_000_000][policy])

    def nvmlDeviceGetFieldValues(self, _h: Any, ids: list[Any]) -> list[Any]:
        self._call("nvmlDeviceGetFieldValues")
        out = []
        for entry in ids:
            field, scope = entry if isinstance(entry, tuple) else (entry, 0)
            if field == 230:
                out.append(SimpleNamespace(nvmlReturn=0, value=SimpleNamespace(uiVal=2)))
            elif field in (161, 162, 163) and self.link_fields:  # DL replay, recovery, CRC per link
                count = self.link_errors.get((scope, {161: 0, 162: 1, 163: 2}[field]), 0)
                out.append(SimpleNamespace(nvmlReturn=0, value=SimpleNamespace(ullVal=count)))
            else:
                out.append(SimpleNamespace(nvmlReturn=NOT_SUPPORTED, value=None))
        return out

    def nvmlDeviceGetNvLinkState(self, _h: Any, link: int) -> int:
        self._call("nvmlDeviceGetNvLinkState")
        if link >= self.links:
            raise self.NVMLError(INVALID_ARGUMENT)
        return 0 if link in self.inactive else 1

    def nvmlDeviceGetNvLinkErrorCounter(self, _h: Any, link: int, counter: int) -> int:
        self._call("nvmlDeviceGetNvLinkErrorCounter")
        if not self.link_counter_api:
            raise self.NVMLError(NOT_SUPPORTED)
        return self.link_errors.get((link, counter), 0) + (self.counter_api_data_crc if counter == 3 else 0)

    def nvmlDeviceGetRemappedRows(self, _h: Any) -> tuple[int, int, int, int]:
        self._call("nvmlDeviceGetRemappedRows")
        return (2, 1, 1, 0)


def test_ecc_reads_the_four_counters_in_their_place() -> None:
    values = health_reads.ecc(FakeNvml(), "h")
    assert values == {"ecc_sbe_vol": 7, "ecc_dbe_vol": 2, "ecc_sbe_agg": 311, "ecc_dbe_agg": 3}


def test_retired_pages_count_pages_per_cause_and_the_pending_flag() -> None:
    assert health_reads.retired_pages(FakeNvml(), "h") == {"retired_sbe": 3, "retired_dbe": 1, "retired_pending": 1}


def test_max_operating_temperatures_ask_for_gpu_max_and_mem_max() -> None:
    nv = FakeNvml()
    assert health_reads.threshold(nv, "h", "gpu_max_op_temp") == {"gpu_max_op_temp": 87}
    assert health_reads.threshold(nv, "h", "mem_max_op_temp") == {"mem_max_op_temp": 95}


def test_margin_and_a_binding_without_the_call() -> None:
    assert health_reads.margin(FakeNvml(), "h") == {"temp_margin": 46}
    old = SimpleNamespace()  # an nvidia-ml-py before R570 has no nvmlDeviceGetMarginTemperature
    with pytest.raises(Unsupported):
        health_reads.margin(old, "h")


def test_violation_time_in_ns_per_policy() -> None:
    nv = FakeNvml()
    assert health_reads.violation(nv, "h", "thermal_violation") == {"thermal_violation": 120_000_000}
    assert health_reads.violation(nv, "h", "power_violation") == {"power_violation": 5_000_000_000}


def test_recovery_action_from_field_230() -> None:
    assert health_reads.recovery_action(FakeNvml(), "h") == {"recovery_action": 2}


def test_nvlink_links_states_and_counters_summed_into_the_dcgm_totals() -> None:
    nv = FakeNvml(link_fields=False)  # before Hopper: the per-link counter call
    links = health_reads.nvlink_health(nv, "h")
    assert [link.link for link in links] == list(range(18))  # links 18-35 answer InvalidArgument: absent
    assert [link.link for link in links if not link.up] == [5]
    assert links[4].errors == {"replay": 12, "recovery": 0, "crc_flit": 1200, "crc_data": 400}
    assert health_reads.link_totals(links) == {"nvlink_crc_flit": 1200, "nvlink_crc_data": 400, "nvlink_replay": 12,
                                               "nvlink_recovery": 1}


def test_hopper_reads_field_values_and_has_no_data_crc() -> None:
    nv = FakeNvml()
    nv.counter_api_data_crc = 210  # as the H200 run saw on idle links: not what nvidia-smi nvlink -e shows
    links = health_reads.nvlink_health(nv, "h")
    assert "nvmlDeviceGetNvLinkErrorCounter" not in nv.calls
    assert links[4].errors == {"replay": 12, "recovery": 0, "crc_flit": 1200}
    totals = health_reads.link_totals(links)
    assert "nvlink_crc_data" not in totals and totals["nvlink_crc_flit"] == 1200


def test_a_gpu_without_nvlink_is_unsupported() -> None:
    with pytest.raises(Unsupported):
        health_reads.nvlink_health(FakeNvml(links=0), "h")


# -- through NvmlSource: what ends up in a reading ----------------------------------------------------

class FakeNvmlNode(FakeNvml):
    """FakeNvml plus what NvmlSource needs to start: one GPU, no XID events, no GPM."""

    nvmlEventTypeXidCriticalError = 8

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlSystemGetDriverVersion(self) -> str: return "580.159.04"
    def nvmlDeviceGetCount(self) -> int: return 1
    def nvmlDeviceGetHandleByIndex(self, i: int) -> str: return f"h{i}"
    def nvmlDeviceGetPciInfo(self, _h: Any) -> Any: return SimpleNamespace(busId=b"00000000:18:00.0")
    def nvmlDeviceGetMinorNumber(self, _h: Any) -> int: return 0
    def nvmlDeviceGetUUID(self, _h: Any) -> str: return "GPU-00000000-0000-0000-0000-000000000001"
    def nvmlDeviceGetName(self, _h: Any) -> str: return "NVIDIA H200"
    def nvmlGpmQueryDeviceSupport(self, _h: Any) -> Any: return SimpleNamespace(isSupportedDevice=0)

    def nvmlEventSetCreate(self) -> Any:
        raise self.NVMLError(NOT_SUPPORTED)

    def __getattr__(self, name: str) -> Any:
        """Every other call is NotSupported on this fake GPU; every other constant is 0."""
        if name.startswith("NVML_"):
            return 0

        def unsupported(*_args: Any, **_kwargs: Any) -> Any:
            raise self.NVMLError(NOT_SUPPORTED)

        return unsupported


@pytest.fixture
def node(monkeypatch: pytest.MonkeyPatch) -> FakeNvmlNode:
    fake = FakeNvmlNode(link_counter_api=False)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    return fake


def test_source_reads_health_and_marks_what_hopper_lacks(node: FakeNvmlNode) -> None:
    from gpudash.exporter.nvml import NvmlSource

    node.unsupported |= {"nvmlDeviceGetRetiredPages"}  # Hopper remaps rows instead
    source = NvmlSource()
    keys = health_reads.ECC_KEYS | health_reads.RETIRED_KEYS | health_reads.NVLINK_KEYS | {"row_remap_pending"}
    reading = source.read(0, frozenset(keys), time.time())
    assert reading.values["ecc_dbe_vol"] == 2 and reading.values["row_remap_pending"] == 1
    assert reading.unsupported >= health_reads.RETIRED_KEYS
    assert "nvlink_crc_data" in reading.unsupported  # no data CRC on the field-value path
    assert reading.values["nvlink_crc_flit"] == 1200
    assert reading.links is not None and len(reading.links) == 18
    assert isinstance(reading.links[0], LinkHealth)
    node.calls.clear()
    again = source.read(0, frozenset(keys), time.time())
    assert "nvmlDeviceGetRetiredPages" not in node.calls  # NotSupported is asked once
    assert again.unsupported >= health_reads.RETIRED_KEYS  # and still reported, for a poller that starts later
    assert again.links is not None and again.links[4].errors["crc_flit"] == 1200


def test_source_without_link_keys_returns_no_links(node: FakeNvmlNode) -> None:
    from gpudash.exporter.nvml import NvmlSource

    reading = NvmlSource().read(0, frozenset({"ecc_sbe_vol"}), time.time())
    assert reading.links is None and reading.values["ecc_sbe_vol"] == 7
    assert "nvmlDeviceGetNvLinkState" not in node.calls


def test_a_gpu_that_falls_off_the_bus_reads_down_and_comes_back(node: FakeNvmlNode) -> None:
    from gpudash.exporter.nvml import NvmlSource

    source = NvmlSource()
    keys = frozenset(health_reads.ECC_KEYS | health_reads.NVLINK_KEYS)
    node.lost = True
    down = source.read(0, keys, time.time())
    assert not down.up and down.values == {} and down.links is None
    assert source.gpus()[0].uuid == "GPU-00000000-0000-0000-0000-000000000001"  # its identity is kept
    node.lost = False
    node.nvmlDeviceGetHandleByUUID = lambda uuid: "h0"  # type: ignore[method-assign]
    node.nvmlDeviceGetTemperature = lambda h, sensor: 40  # type: ignore[method-assign]
    back = source.read(0, keys, time.time())
    assert back.up and back.values["ecc_sbe_vol"] == 7 and back.links is not None


class TwoGpuNode(FakeNvmlNode):
    """Two GPUs on one NVLink fabric: P2P status by (gpu, peer) handle."""

    def __init__(self) -> None:
        super().__init__(link_counter_api=False)
        self.p2p = {("h0", "h1"): 0, ("h1", "h0"): 0}

    def nvmlDeviceGetCount(self) -> int: return 2

    def nvmlDeviceGetP2PStatus(self, gpu: Any, peer: Any, _caps: int) -> int:
        self._call("nvmlDeviceGetP2PStatus")
        return self.p2p[(gpu, peer)]


def test_source_reads_p2p_status_per_peer_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpudash.exporter.nvml import NvmlSource
    from gpudash.exporter.source import PeerStatus

    fake = TwoGpuNode()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    source = NvmlSource()
    fake.p2p[("h1", "h0")] = 6  # NVML_P2P_STATUS_UNKNOWN
    assert source.read(0, frozenset({"p2p_status"}), time.time()).peers == (PeerStatus(1, 0),)
    assert source.read(1, frozenset({"p2p_status"}), time.time()).peers == (PeerStatus(0, 6),)
    fake.calls.clear()
    assert source.read(0, frozenset({"ecc_sbe_vol"}), time.time()).peers is None
    assert "nvmlDeviceGetP2PStatus" not in fake.calls


def test_p2p_not_supported_is_marked_and_asked_once(node: FakeNvmlNode) -> None:
    from gpudash.exporter.nvml import NvmlSource

    source = NvmlSource()  # one GPU: no peer to ask
    assert source.read(0, frozenset({"p2p_status"}), time.time()).peers == ()
    monkey = TwoGpuNode()
    monkey.unsupported.add("nvmlDeviceGetP2PStatus")
    sys.modules["pynvml"] = monkey  # the fixture's monkeypatch restores the real module
    two = NvmlSource()
    first = two.read(0, frozenset({"p2p_status"}), time.time())
    assert first.peers is None and "p2p_status" in first.unsupported
    monkey.calls.clear()
    assert "p2p_status" in two.read(0, frozenset({"p2p_status"}), time.time()).unsupported
    assert "nvmlDeviceGetP2PStatus" not in monkey.calls
