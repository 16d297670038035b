"""Device ids to GPUs: every id shape the kubelet reports, the resource filter, the id type, several holders."""

from __future__ import annotations

import pytest

from gpudash.exporter.attribution.devices import (
    Allocation,
    DeviceRef,
    Holder,
    allocations,
    holders,
    is_gpu_resource,
    parse_device_id,
    unmatched_kinds,
)
from gpudash.exporter.attribution.mig import no_mig
from gpudash.exporter.attribution.podresources import ContainerDevices, ContainerResources, PodResources
from gpudash.exporter.source import GpuIdentity

U0 = "5c9c2a4e-8a45-4d0e-9b0f-8d9d1e4f0a11"
U1 = "0b7e6b7e-1111-4222-8333-944455556666"
MIG = "MIG-a1b2c3d4-0000-4000-8000-000000000001"
GPUS = [GpuIdentity(0, f"GPU-{U0}", "00000000:18:00.0", "H200", 2), GpuIdentity(1, f"GPU-{U1}", "00000000:2A:00.0",
                                                                                 "H200", 0)]


@pytest.mark.parametrize(
    ("device_id", "ref"),
    [
        (f"GPU-{U0}", DeviceRef("uuid", f"GPU-{U0}")),
        (f"GPU-{U0}::3", DeviceRef("uuid", f"GPU-{U0}", "3")),
        (f"MIG-GPU-{U0}/1/0", DeviceRef("uuid", f"GPU-{U0}")),
        (f"MIG-GPU-{U0}/13/2::1", DeviceRef("uuid", f"GPU-{U0}", "1")),
        (MIG, DeviceRef("mig-uuid", MIG)),
        (f"{MIG}::0", DeviceRef("mig-uuid", MIG, "0")),
        ("nvidia3", DeviceRef("device-name", "nvidia3")),
        ("nvidia3/gi2", DeviceRef("device-name", "nvidia3")),
        ("nvidia3/vgpu1", DeviceRef("device-name", "nvidia3", "1")),
        ("nvidia3/gi2/vgpu0", DeviceRef("device-name", "nvidia3", "0")),
    ],
)
def test_each_device_id_shape_points_at_its_gpu(device_id: str, ref: DeviceRef) -> None:
    assert parse_device_id(device_id) == ref


@pytest.mark.parametrize("device_id", ["", "eth1", "GPU-not-a-uuid", f"GPU-{U0}x", "nvidia", "nvidiaX",
                                       f"MIG-GPU-{U0}/1", "nvidia3/gpu2", "::3", f"GPU-{U0}::x"])
def test_ids_of_no_known_shape_point_nowhere(device_id: str) -> None:
    assert parse_device_id(device_id) is None


@pytest.mark.parametrize(
    ("name", "extra", "matched"),
    [
        ("nvidia.com/gpu", (), True),
        ("nvidia.com/mig-1g.10gb", (), True),
        ("nvidia.com/mig-3g.40gb", (), True),
        ("nvidia.com/gpu.shared", (), False),  # time-slicing with renameByDefault: only when named
        ("nvidia.com/gpu.shared", ("nvidia.com/gpu.shared",), True),
        ("amd.com/gpu", (), False),
        ("nvidia.com/gpus", (), False),
    ],
)
def test_resource_names_follow_dcgm_exporter(name: str, extra: tuple[str, ...], matched: bool) -> None:
    assert is_gpu_resource(name, extra) is matched


def _pod(ns: str, name: str, container: str, resource: str, *ids: str) -> PodResources:
    return PodResources(name, ns, (ContainerResources(container, (ContainerDevices(resource, ids),)),))


def test_allocations_keep_gpu_devices_with_their_container_only() -> None:
    pods = [_pod("a", "p", "c", "nvidia.com/gpu", f"GPU-{U0}", "junk"), _pod("b", "q", "d", "example.com/nic", "x"),
            _pod("b", "r", "e", "nvidia.com/gpu.shared", f"GPU-{U1}::1")]
    assert allocations(pods) == (Allocation(Holder("a", "p", "c"), DeviceRef("uuid", f"GPU-{U0}")),)
    assert len(allocations(pods, ["nvidia.com/gpu.shared"])) == 2


def _alloc(ns: str, pod: str, device_id: str) -> Allocation:
    ref = parse_device_id(device_id)
    assert ref is not None
    return Allocation(Holder(ns, pod, "main"), ref)


def test_uid_mode_matches_uuids_and_mig_parents_and_never_device_names() -> None:
    found = [_alloc("a", "p", f"GPU-{U1}"), _alloc("b", "q", MIG), _alloc("c", "r", "nvidia2")]
    assert holders(found, GPUS, "uid", {MIG: f"GPU-{U0}"}.get) == {1: Holder("a", "p", "main"),
                                                                    0: Holder("b", "q", "main")}
    assert holders(found, GPUS, "uid", no_mig) == {1: Holder("a", "p", "main")}


def test_device_name_mode_matches_the_minor_number_not_the_index() -> None:
    found = [_alloc("a", "p", "nvidia0"), _alloc("b", "q", "nvidia2/gi1"), _alloc("c", "r", f"GPU-{U0}")]
    # GPU 0 is /dev/nvidia2 and GPU 1 is /dev/nvidia0 on this node.
    assert holders(found, GPUS, "device-name", no_mig) == {1: Holder("a", "p", "main"), 0: Holder("b", "q", "main")}


def test_several_holders_of_one_gpu_give_one_stable_choice() -> None:
    found = [_alloc("z", "late", f"GPU-{U0}::1"), _alloc("a", "early", f"GPU-{U0}::0")]
    first = holders(found, GPUS, "uid", no_mig)
    assert first == {0: Holder("a", "early", "main")}
    # A newcomer that sorts first does not take the GPU's labels from the pod that had them...
    newcomer = [*found, _alloc("0", "first", f"GPU-{U0}::2")]
    assert holders(newcomer, GPUS, "uid", no_mig, first) == first
    # ...until that pod lets go.
    assert holders(newcomer[::2], GPUS, "uid", no_mig, first) == {0: Holder("0", "first", "main")}


def test_a_wrong_id_type_shows_in_the_kinds_it_never_matches() -> None:
    gke = [_alloc("a", "p", "nvidia0")]
    assert unmatched_kinds(gke, "uid") == {"device-name"}
    assert unmatched_kinds(gke, "device-name") == frozenset()
    assert unmatched_kinds([_alloc("a", "p", MIG)], "device-name") == {"mig-uuid"}


class FakeNvml:
    """The few pynvml calls the MIG lookup makes, over a fixed MIG layout."""

    class NVMLError(Exception):
        pass

    def __init__(self, parents: dict[str, str]) -> None:
        self.parents, self.calls, self.initialised = parents, 0, 0

    def nvmlInit(self) -> None:
        self.initialised += 1

    def nvmlShutdown(self) -> None:
        self.initialised -= 1

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> str:
        self.calls += 1
        if uuid not in self.parents:
            raise self.NVMLError("Not Found")
        return uuid

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, handle: str) -> str:
        return self.parents[handle]

    def nvmlDeviceGetUUID(self, handle: str) -> str:
        return handle


def test_the_nvml_mig_lookup_asks_once_per_device_and_warns_once_per_unknown(caplog: pytest.LogCaptureFixture) -> None:
    from gpudash.exporter.attribution.mig import NvmlMigLookup

    nv = FakeNvml({MIG: f"GPU-{U1}"})
    lookup = NvmlMigLookup(nv)
    assert nv.initialised == 1
    assert [lookup(MIG), lookup(MIG)] == [f"GPU-{U1}", f"GPU-{U1}"] and nv.calls == 1
    gone = "MIG-ffffffff-0000-4000-8000-000000000009"
    assert lookup(gone) is None and lookup(gone) is None
    assert caplog.text.count("NVML does not know this MIG device") == 1
    lookup.close()
    assert nv.initialised == 0
