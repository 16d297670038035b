"""DRA claims, shared GPUs and per-process pods, through the kubelet attributor driven by hand.

The List answer is built by protobuf (tests/support/podresources_pb.py), ResourceSlices are JSON as the API
server serves them, processes' cgroup files come from tests/fixtures/cgroup/.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from support.exposition import parse_exposition
from support.podresources_pb import Claims, Pod, list_response

from gpudash.exporter.attribution import combined
from gpudash.exporter.attribution.dra import DraDevice, parse_resource_slices
from gpudash.exporter.attribution.kubelet import KubeletAttributor, KubeletConfig, SliceLister
from gpudash.exporter.attribution.podresources import ClaimResource, DynamicResource, decode_list_response
from gpudash.exporter.attribution.pods import PodInfo
from gpudash.exporter.attribution.procs import ProcessAttribution
from gpudash.exporter.poller import Poller
from gpudash.exporter.sim.fleet import fleet_from_specs
from gpudash.exporter.sim.simulated import SimulatedSource
from gpudash.exporter.source import GpuReading, ProcessUsage

SOURCE = SimulatedSource(fleet_from_specs(4, 3, workloads=[], faults=[], epoch=0.0))
UUIDS = [g.uuid for g in SOURCE.gpus()]
MIG = "MIG-5e6f7a8b-0000-4000-8000-00000000002a"
DRIVER = "gpu.nvidia.com"
NODE = "gpu-node-7"


def _slices(version: str = "v1") -> dict[str, Any]:
    def device(name: str, **attributes: str) -> dict[str, Any]:
        values = {key: {"string": value} for key, value in attributes.items()}
        return {"name": name, **({"attributes": values} if version == "v1" else {"basic": {"attributes": values}})}

    return {"kind": "ResourceSliceList", "items": [
        {"spec": {"driver": DRIVER, "nodeName": NODE, "pool": {"name": NODE, "generation": 1}, "devices": [
            device("gpu-0", uuid=UUIDS[0], type="gpu", productName="NVIDIA H200"),
            device("gpu-1", uuid=UUIDS[1], type="gpu"),
            device("gpu-2-mig-1g18gb-0", uuid=MIG, parentUUID=UUIDS[2], profile="1g.18gb", type="mig"),
        ]}},
        {"spec": {"driver": "compute-domain.nvidia.com", "pool": {"name": NODE},
                  "devices": [device("channel-0", uuid=UUIDS[3])]}},
    ]}


def _attributor(pods: Sequence[Pod], claims: Claims, config: KubeletConfig, *,
                slice_lister: SliceLister | None = None, pods_api: Sequence[PodInfo] = ()) -> KubeletAttributor:
    answer = list_response(pods, claims)
    return KubeletAttributor(config, lister=lambda _t: answer, pod_lister=lambda _t: pods_api,
                             slice_lister=slice_lister or (lambda _t: parse_resource_slices(_slices())),
                             background=False)


def _copies(attributor: Any, source: SimulatedSource = SOURCE, metric: str = "DCGM_FI_DEV_GPU_UTIL",
            ) -> dict[str, list[dict[str, str]]]:
    """gpu -> the labels of each copy of its series (beyond the GPU's own), after one fast sweep."""
    poller = Poller(source, ["gpu_util", "process_fb_used", "process_sm_util"], hostname="n1", attributor=attributor)
    poller.sweep("fast", 600.0)
    out: dict[str, list[dict[str, str]]] = {}
    for labels, _ in parse_exposition(poller.exposition.body.decode())[metric]:
        own = {k: v for k, v in labels.items()
               if k not in ("gpu", "UUID", "pci_bus_id", "device", "modelName", "hostname", "DCGM_FI_DRIVER_VERSION")}
        out.setdefault(labels["gpu"], []).append(own)
    return {gpu: sorted(rows, key=lambda r: sorted(r.items())) for gpu, rows in out.items()}


CLAIMS: Claims = {
    ("serve", "vllm-0", "engine"): [("gpu-claim", "serve", [(DRIVER, NODE, "gpu-0")])],
    ("serve", "vllm-0", "sidecar"): [("gpu-claim", "serve", [(DRIVER, NODE, "gpu-0")])],
    ("dev", "nb-1", "main"): [("slice", "dev", [(DRIVER, NODE, "gpu-2-mig-1g18gb-0")]),
                              ("nic", "dev", [("rdma.example.com", NODE, "eth1")])],
}
PODS: list[Pod] = [("serve", "vllm-0", {}), ("dev", "nb-1", {}),
                   ("ml", "train-0", {"main": [("nvidia.com/gpu", [UUIDS[1]])]})]


def test_the_kubelet_answer_carries_each_containers_claims() -> None:
    (vllm, nb, train) = decode_list_response(list_response(PODS, CLAIMS))
    assert [c.name for c in vllm.containers] == ["engine", "sidecar"]
    assert nb.containers[0].dynamic_resources == (
        DynamicResource("slice", "dev", (ClaimResource(DRIVER, NODE, "gpu-2-mig-1g18gb-0"),)),
        DynamicResource("nic", "dev", (ClaimResource("rdma.example.com", NODE, "eth1"),)))
    assert train.containers[0].dynamic_resources == ()


@pytest.mark.parametrize("version", ["v1", "v1beta1"])
def test_resource_slices_name_each_gpu_and_a_mig_devices_parent(version: str) -> None:
    assert parse_resource_slices(_slices(version)) == {
        (NODE, "gpu-0"): DraDevice(UUIDS[0]), (NODE, "gpu-1"): DraDevice(UUIDS[1]),
        (NODE, "gpu-2-mig-1g18gb-0"): DraDevice(UUIDS[2], "1g.18gb", MIG)}  # another driver's slice left out


def test_attributes_qualified_by_the_drivers_domain_are_read_too() -> None:
    data = {"items": [{"spec": {"driver": DRIVER, "pool": {"name": "p"}, "devices": [
        {"name": "gpu-0", "attributes": {f"{DRIVER}/uuid": {"string": UUIDS[0]}}}]}}]}
    assert parse_resource_slices(data) == {("p", "gpu-0"): DraDevice(UUIDS[0])}
    with pytest.raises(ValueError, match="not a ResourceSlice list"):
        parse_resource_slices({"kind": "Status"})


def test_each_claim_consumer_gets_its_own_copy_and_a_gpu_without_one_stays_unlabelled() -> None:
    attributor = _attributor(PODS, CLAIMS, KubeletConfig(dra=True))
    attributor.poll(600.0)
    claim = {"dra_claim_name": "gpu-claim", "dra_claim_namespace": "serve", "dra_driver_name": DRIVER,
             "dra_pool_name": NODE, "dra_device_name": "gpu-0", "pod": "vllm-0", "namespace": "serve"}
    assert _copies(attributor) == {
        "0": [{**claim, "container": "engine"}, {**claim, "container": "sidecar"}],
        "1": [{"pod": "train-0", "namespace": "ml", "container": "main"}],  # the device plugin's, as before
        "2": [{"pod": "nb-1", "namespace": "dev", "container": "main", "dra_claim_name": "slice",
               "dra_claim_namespace": "dev", "dra_driver_name": DRIVER, "dra_pool_name": NODE,
               "dra_device_name": "gpu-2-mig-1g18gb-0", "dra_mig_profile": "1g.18gb", "dra_mig_device_uuid": MIG}],
        "3": [{}],
    }


def test_without_the_flag_claims_label_nothing() -> None:
    attributor = _attributor(PODS, CLAIMS, KubeletConfig())
    attributor.poll(600.0)
    assert [gpu for gpu, rows in _copies(attributor).items() if rows != [{}]] == ["1"]


def test_a_device_the_slices_do_not_know_yet_reads_them_again() -> None:
    tables = [{(NODE, "gpu-0"): DraDevice(UUIDS[0])}, parse_resource_slices(_slices())]
    calls: list[float] = []

    def slices(timeout: float) -> dict[tuple[str, str], DraDevice]:
        calls.append(timeout)
        return tables[min(len(calls), 2) - 1]

    attributor = _attributor(PODS, CLAIMS, KubeletConfig(dra=True, interval=5.0), slice_lister=slices)
    attributor.poll(600.0)
    assert "dra_mig_profile" not in str(_copies(attributor)["2"])
    attributor.poll(602.0)  # sooner than an interval after the last read: not again
    assert len(calls) == 1
    attributor.poll(606.0)
    assert len(calls) == 2 and _copies(attributor)["2"][0]["dra_mig_profile"] == "1g.18gb"
    attributor.poll(612.0)  # every device known: no read until pod_refresh
    assert len(calls) == 2


SHARED: list[Pod] = [("ml", "a", {"main": [("nvidia.com/gpu", [f"{UUIDS[0]}::0"])]}),
                     ("ml", "b", {"main": [("nvidia.com/gpu", [f"{UUIDS[0]}::1"])]})]


def test_virtual_gpus_give_each_sharing_container_a_copy_with_its_replica() -> None:
    virtual = _attributor(SHARED, {}, KubeletConfig(virtual_gpus=True))
    virtual.poll(600.0)
    assert _copies(virtual)["0"] == [{"pod": "a", "namespace": "ml", "container": "main", "vgpu": "0"},
                                     {"pod": "b", "namespace": "ml", "container": "main", "vgpu": "1"}]
    default = _attributor(SHARED, {}, KubeletConfig())
    default.poll(600.0)
    assert _copies(default)["0"] == [{"pod": "a", "namespace": "ml", "container": "main"}]  # one, chosen on purpose


class SharedGpu(SimulatedSource):
    """The simulated node, with GPU 0 shared by three processes: two pods' and one outside Kubernetes."""

    PROCESSES = (ProcessUsage(4101, "python3", 11000.0, 61.0), ProcessUsage(4102, "vllm", 23000.0, 27.0),
                 ProcessUsage(4103, "nvidia-smi", 2.0, 0.0))

    def read(self, index: int, keys: frozenset[str], now: float) -> GpuReading:
        reading = super().read(index, keys, now)
        if index != 0 or reading.processes is None:
            return reading
        return GpuReading(**{**reading.__dict__, "processes": self.PROCESSES})


def test_each_process_on_a_shared_gpu_carries_its_own_pod(tmp_path: Path, reference: Path) -> None:
    recorded = reference / "cgroup"
    for pid, name in ((4101, "containerd-systemd-v2"), (4102, "crio-cgroupfs-hybrid"), (4103, "host-process")):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(f"{pid} (proc) S {' '.join(['0'] * 18)} {9000 + pid} 0 0\n")
        (tmp_path / str(pid) / "cgroup").write_bytes((recorded / f"{name}.cgroup").read_bytes())
    api = [PodInfo("7c1d2e3f-4a5b-4c6d-8e7f-90a1b2c3d4e5", "a", "ml", "Running", {}),
           PodInfo("0b1c2d3e-4f5a-4b6c-9d7e-8f9a0b1c2d3e", "b", "ml", "Running", {})]
    kubelet = _attributor(SHARED, {}, KubeletConfig(virtual_gpus=True), pods_api=api)
    kubelet.poll(600.0)
    attributor = combined([kubelet, ProcessAttribution(tmp_path, pod_lookup=kubelet.pod_by_uid)])
    source = SharedGpu(fleet_from_specs(4, 3, workloads=[], faults=[], epoch=0.0))
    for metric in ("gpudash_process_fb_used_mib", "gpudash_process_sm_util_percent"):
        rows = _copies(attributor, source, metric)["0"]
        by_pid = {row["pid"]: (row.get("namespace"), row.get("pod")) for row in rows}
        assert by_pid == {"4101": ("ml", "a"), "4102": ("ml", "b"), "4103": (None, None)}, metric
        assert len(rows) == 3  # a process's series once, not once per copy of the GPU's
    poller = Poller(source, ["process_sm_util"], hostname="n1", attributor=attributor)
    poller.sweep("fast", 600.0)
    sm = {labels["pod"]: value for labels, value in
          parse_exposition(poller.exposition.body.decode())["gpudash_process_sm_util_percent"] if "pod" in labels}
    assert sm == {"a": 61.0, "b": 27.0}  # each pod's share of the GPU it shares
