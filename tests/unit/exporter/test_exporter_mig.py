"""MIG instances through NVML, against a fake pynvml holding one H200 partitioned as `nvidia-smi mig -cgi` leaves it.

The fake implements the calls the NVML source makes, with pynvml's names and return shapes: MIG mode, the MIG
device slots (an empty slot raises NOT_FOUND), each MIG device's GPU instance id, name, UUID and memory, and GPM
sampled per GPU instance. Every other call is NotSupported, as on a GPU without the feature.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gpudash.doctor.observed import parse_exposition
from gpudash.exporter.attribution.hpc import HpcJobMapping
from gpudash.exporter.mig_reads import MigReader, profile_of
from gpudash.exporter.poller import Poller
from gpudash.exporter.source import MIG_INSTANCES

NOT_SUPPORTED, NOT_FOUND = 3, 6
MIB = 1024 * 1024
GPU_UUID = "GPU-20b58ddd-cb81-1ae9-b420-d83856eb4609"


class FakeNvml:
    """One H200: MIG on, GPU instances 1 (3g.71gb) and 7 (1g.18gb, two compute instances), GPM per instance."""

    NVML_SUCCESS = 0
    NVML_ERROR_NOT_SUPPORTED = NOT_SUPPORTED
    NVML_ERROR_NOT_FOUND = NOT_FOUND
    NVML_ERROR_INVALID_ARGUMENT = 2
    NVML_ERROR_FUNCTION_NOT_FOUND = 13
    NVML_ERROR_NO_PERMISSION = 4
    NVML_ERROR_GPU_IS_LOST = 15
    NVML_ERROR_RESET_REQUIRED = 14
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25
    NVML_DEVICE_MIG_ENABLE = 1
    NVML_GPM_METRICS_GET_VERSION = 1
    nvmlEventTypeXidCriticalError = 8

    class NVMLError(Exception):
        def __init__(self, value: int) -> None:
            super().__init__(f"NVML error {value}")
            self.value = value

    def __init__(self) -> None:
        self.mig_mode: int | None = 1  # None: a GPU without MIG (NotSupported)
        # slot -> (GPU instance id, name, MiB used, MiB total); slot 2 is GI 7's second compute instance
        self.slots = {0: (1, "NVIDIA H200 MIG 3g.71gb", 30_000, 71_424),
                      1: (7, "NVIDIA H200 MIG 1g.18gb", 2_000, 16_384),
                      2: (7, "NVIDIA H200 MIG 1g.18gb", 2_000, 16_384)}
        self.gpm = True
        self.activity = {1: 80.0, 7: 10.0}  # GPU instance -> graphics engine activity, %
        self.mig_samples: list[tuple[str, int]] = []  # (handle, GPU instance) of each nvmlGpmMigSampleGet

    # -- the node
    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlSystemGetDriverVersion(self) -> str: return "580.159.04"
    def nvmlDeviceGetCount(self) -> int: return 1
    def nvmlDeviceGetHandleByIndex(self, i: int) -> str: return f"h{i}"
    def nvmlDeviceGetPciInfo(self, _h: Any) -> Any: return SimpleNamespace(busId=b"00000000:00:06.0")
    def nvmlDeviceGetMinorNumber(self, _h: Any) -> int: return 0

    def nvmlEventSetCreate(self) -> Any:
        raise self.NVMLError(NOT_SUPPORTED)

    def nvmlDeviceGetUUID(self, h: str) -> str:
        return GPU_UUID if h == "h0" else f"MIG-0000000{h[-1]}-aaaa-bbbb-cccc-000000000000"

    def nvmlDeviceGetName(self, h: str) -> str:
        return "NVIDIA H200" if h == "h0" else self.slots[int(h[-1])][1]

    def nvmlDeviceGetMemoryInfo(self, h: str, version: Any = None) -> Any:
        if h == "h0":
            return SimpleNamespace(used=34_000 * MIB, free=110_000 * MIB, total=144_000 * MIB, reserved=0)
        _gi, _name, used, total = self.slots[int(h[-1])]
        return SimpleNamespace(used=used * MIB, free=(total - used) * MIB, total=total * MIB)

    # -- MIG
    def nvmlDeviceGetMigMode(self, _h: str) -> tuple[int, int]:
        if self.mig_mode is None:
            raise self.NVMLError(NOT_SUPPORTED)
        return self.mig_mode, self.mig_mode

    def nvmlDeviceGetMaxMigDeviceCount(self, _h: str) -> int:
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, _h: str, slot: int) -> str:
        if slot not in self.slots:
            raise self.NVMLError(NOT_FOUND)
        return f"m{slot}"

    def nvmlDeviceGetGpuInstanceId(self, h: str) -> int:
        return self.slots[int(h[-1])][0]

    # -- GPM, per GPU instance (the whole GPU's answers NotSupported in MIG mode)
    def nvmlGpmQueryDeviceSupport(self, _h: str) -> Any:
        return SimpleNamespace(isSupportedDevice=int(self.gpm))

    def nvmlGpmSampleAlloc(self) -> Any:
        return SimpleNamespace(gi=None)

    def nvmlGpmSampleFree(self, _sample: Any) -> None: ...

    def nvmlGpmSampleGet(self, _h: str, _sample: Any) -> None:
        raise self.NVMLError(NOT_SUPPORTED)

    def nvmlGpmMigSampleGet(self, h: str, gpu_instance: int, sample: Any) -> None:
        self.mig_samples.append((h, gpu_instance))
        sample.gi = gpu_instance

    def c_nvmlGpmMetricsGet_t(self) -> Any:
        return SimpleNamespace(metrics=[SimpleNamespace() for _ in range(8)])

    def nvmlGpmMetricsGet(self, request: Any) -> None:
        for metric in request.metrics[: request.numMetrics]:
            supported = metric.metricId in (1, 2, 5)  # graphics, SM, tensor activity
            metric.nvmlReturn = self.NVML_SUCCESS if supported else NOT_SUPPORTED
            metric.value = self.activity[request.sample2.gi] / metric.metricId

    def __getattr__(self, name: str) -> Any:
        """Every other call is NotSupported on this fake GPU; every other constant is 0."""
        if name.startswith("NVML_"):
            return 0

        def unsupported(*_args: Any, **_kwargs: Any) -> Any:
            raise self.NVMLError(NOT_SUPPORTED)

        return unsupported


@pytest.fixture
def nv(monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    fake = FakeNvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    return fake


KEYS = frozenset({"fb_used", "fb_free", "fb_total", "gr_engine_active", "sm_active", "tensor_active"})


def test_profile_from_the_mig_device_name() -> None:
    assert profile_of("NVIDIA H200 MIG 1g.18gb") == "1g.18gb"
    assert profile_of("NVIDIA A100-SXM4-40GB MIG 1g.5gb+me") == "1g.5gb+me"
    assert profile_of("NVIDIA H200") == ""


def test_instances_with_their_ids_profiles_memory_and_activity(nv: FakeNvml) -> None:
    reader = MigReader(nv)
    first = reader.read("h0", 0, KEYS)
    assert first is not None
    assert [(i.gpu_instance, i.profile) for i in first] == [(1, "3g.71gb"), (7, "1g.18gb")]  # GI 7 read once
    three, one = first
    assert three.uuid.startswith("MIG-") and three.values == {"fb_used": 30_000, "fb_free": 41_424,
                                                               "fb_total": 71_424}
    assert one.values["fb_used"] == 2_000 and one.values["fb_total"] == 16_384
    # activity is a window: the second read has it, per GPU instance, sampled by its id on the parent GPU
    second = reader.read("h0", 0, KEYS)
    assert second is not None
    assert [i.values["gr_engine_active"] for i in second] == [pytest.approx(0.8), pytest.approx(0.1)]
    assert [i.values["tensor_active"] for i in second] == [pytest.approx(0.8 / 5), pytest.approx(0.1 / 5)]
    assert "sm_occupancy" not in second[0].values  # not asked for
    assert {("h0", 1), ("h0", 7)} == set(nv.mig_samples)


def test_mig_off_is_no_instance_and_a_gpu_without_mig_is_unsupported(nv: FakeNvml) -> None:
    reader = MigReader(nv)
    nv.mig_mode = 0
    assert reader.read("h0", 0, KEYS) == ()
    nv.mig_mode = None
    assert reader.read("h0", 0, KEYS) is None


def test_the_source_reads_instances_on_the_slow_loop_and_marks_a_gpu_without_mig(nv: FakeNvml) -> None:
    from gpudash.exporter.nvml import NvmlSource

    source = NvmlSource()
    assert MIG_INSTANCES in source.costly_keys()
    reading = source.read(0, frozenset({MIG_INSTANCES, "fb_used"}), time.time())
    assert reading.instances is not None and [i.gpu_instance for i in reading.instances] == [1, 7]
    assert reading.values["fb_used"] == 34_000  # the whole GPU's own, beside its instances'
    nv.mig_mode = None
    plain = source.read(0, frozenset({MIG_INSTANCES, "fb_used"}), time.time())
    assert plain.instances is None and MIG_INSTANCES in plain.unsupported
    source.close()


def _poller(published: list[str], **kw: Any) -> Poller:
    from gpudash.exporter.nvml import NvmlSource

    source = NvmlSource()
    return Poller(source, published, slow_keys=source.costly_keys(), hostname="node-1", **kw)


def _metrics(poller: Poller) -> dict[str, Any]:
    for loop in ("static", "slow", "fast", "slow"):
        poller.sweep(loop)
    return parse_exposition(poller.exposition.body.decode())


def test_instances_are_published_with_dcgm_exporters_labels_beside_their_gpu(nv: FakeNvml) -> None:
    samples = _metrics(_poller(["fb_used", "gr_engine_active"]))
    used = {s.labels.get("GPU_I_ID"): (s.labels.get("GPU_I_PROFILE"), s.value) for s in samples["DCGM_FI_DEV_FB_USED"]}
    assert used == {None: (None, 34_000), "1": ("3g.71gb", 30_000), "7": ("1g.18gb", 2_000)}
    active = {s.labels["GPU_I_ID"]: s.value for s in samples["DCGM_FI_PROF_GR_ENGINE_ACTIVE"]}
    assert active == {"1": pytest.approx(0.8), "7": pytest.approx(0.1)}  # the whole GPU has none in MIG mode
    instance = next(s for s in samples["DCGM_FI_DEV_FB_USED"] if s.labels.get("GPU_I_ID") == "7")
    assert (instance.labels["gpu"], instance.labels["UUID"], instance.labels["hostname"]) == ("0", GPU_UUID, "node-1")


def test_label_order_is_dcgm_exporters(nv: FakeNvml) -> None:
    poller = _poller(["fb_used"])
    poller.sweep("slow")
    line = next(line for line in poller.exposition.body.decode().splitlines() if 'GPU_I_ID="7"' in line)
    names = [part.split("=", 1)[0] for part in line[line.index("{") + 1: line.index("}")].split(",")]
    assert names == ["gpu", "UUID", "pci_bus_id", "device", "modelName", "GPU_I_PROFILE", "GPU_I_ID", "hostname",
                     "DCGM_FI_DRIVER_VERSION"]


def test_a_gpu_instance_file_attributes_that_instance_only(nv: FakeNvml, tmp_path: Path) -> None:
    (tmp_path / "0.7").write_text("48213\n")
    mapping = HpcJobMapping(tmp_path, clock_ns=lambda: time.time_ns() + 10**10)
    samples = _metrics(_poller(["fb_used"], attributor=mapping))
    jobs = {s.labels.get("GPU_I_ID"): s.labels.get("hpc_job") for s in samples["DCGM_FI_DEV_FB_USED"]}
    assert jobs == {None: None, "1": None, "7": "48213"}
    # a whole-GPU file labels the GPU, not its instances
    (tmp_path / "0").write_text("48299\n")
    samples = _metrics(_poller(["fb_used"], attributor=HpcJobMapping(tmp_path,
                                                                     clock_ns=lambda: time.time_ns() + 10**10)))
    jobs = {s.labels.get("GPU_I_ID"): s.labels.get("hpc_job") for s in samples["DCGM_FI_DEV_FB_USED"]}
    assert jobs == {None: "48299", "1": None, "7": "48213"}
