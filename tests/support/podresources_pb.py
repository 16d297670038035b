"""The kubelet's PodResources v1 messages built with protobuf itself, apart from gpudash's own decoder.

The schema follows kubernetes/kubelet pkg/apis/podresources/v1/api.proto (shared/reference/
job-attribution.md §3.2), with every field of the messages the List answer carries, so the tests' fake
kubelet sends what a real one does, CPU ids, memory and topology included.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto
_MESSAGES: dict[str, list[tuple[str, int, int, int, str]]] = {
    # name: [(field, number, type, label, message type)]
    "ListPodResourcesRequest": [],
    "ListPodResourcesResponse": [("pod_resources", 1, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".v1.PodResources")],
    "PodResources": [
        ("name", 1, _F.TYPE_STRING, _F.LABEL_OPTIONAL, ""),
        ("namespace", 2, _F.TYPE_STRING, _F.LABEL_OPTIONAL, ""),
        ("containers", 3, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".v1.ContainerResources"),
        ("cpu_ids", 4, _F.TYPE_INT64, _F.LABEL_REPEATED, ""),
        ("memory", 5, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".v1.ContainerMemory"),
    ],
    "ContainerResources": [
        ("name", 1, _F.TYPE_STRING, _F.LABEL_OPTIONAL, ""),
        ("devices", 2, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".v1.ContainerDevices"),
        ("cpu_ids", 3, _F.TYPE_INT64, _F.LABEL_REPEATED, ""),
        ("memory", 4, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".v1.ContainerMemory"),
        ("dynamic_resources", 5, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".v1.DynamicResource"),
    ],
    # field 1 (class_name) was removed in Kubernetes 1.31 and stays reserved
    "DynamicResource": [
        ("claim_name", 2, _F.TYPE_STRING, _F.LABEL_OPTIONAL, ""),
        ("claim_namespace", 3, _F.TYPE_STRING, _F.LABEL_OPTIONAL, ""),
        ("claim_resources", 4, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".v1.ClaimResource"),
    ],
    "ClaimResource": [
        ("cdi_devices", 1, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".v1.CDIDevice"),
        ("driver_name", 2, _F.TYPE_STRING, _F.LABEL_OPTIONAL, ""),
        ("pool_name", 3, _F.TYPE_STRING, _F.LABEL_OPTIONAL, ""),
        ("device_name", 4, _F.TYPE_STRING, _F.LABEL_OPTIONAL, ""),
        ("share_id", 5, _F.TYPE_STRING, _F.LABEL_OPTIONAL, ""),
    ],
    "CDIDevice": [("name", 1, _F.TYPE_STRING, _F.LABEL_OPTIONAL, "")],
    "ContainerDevices": [
        ("resource_name", 1, _F.TYPE_STRING, _F.LABEL_OPTIONAL, ""),
        ("device_ids", 2, _F.TYPE_STRING, _F.LABEL_REPEATED, ""),
        ("topology", 3, _F.TYPE_MESSAGE, _F.LABEL_OPTIONAL, ".v1.TopologyInfo"),
    ],
    "TopologyInfo": [("nodes", 1, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".v1.NUMANode")],
    "NUMANode": [("ID", 1, _F.TYPE_INT64, _F.LABEL_OPTIONAL, "")],
    "ContainerMemory": [
        ("memory_type", 1, _F.TYPE_STRING, _F.LABEL_OPTIONAL, ""),
        ("size", 2, _F.TYPE_UINT64, _F.LABEL_OPTIONAL, ""),
        ("topology", 3, _F.TYPE_MESSAGE, _F.LABEL_OPTIONAL, ".v1.TopologyInfo"),
    ],
}


def _classes() -> dict[str, Any]:
    file = descriptor_pb2.FileDescriptorProto(name="podresources_v1_test.proto", package="v1", syntax="proto3")
    for name, fields in _MESSAGES.items():
        message = file.message_type.add(name=name)
        for field, number, kind, label, type_name in fields:
            message.field.add(name=field, number=number, type=kind, label=label, type_name=type_name or None)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"v1.{name}")) for name in _MESSAGES}


MESSAGES = _classes()

# A pod: (namespace, name, {container: [(resource name, [device ids])]})
Pod = tuple[str, str, Mapping[str, Sequence[tuple[str, Sequence[str]]]]]
# A DRA claim of one container: (claim name, claim namespace, [(driver, pool, device name)])
Claim = tuple[str, str, Sequence[tuple[str, str, str]]]
# Claims by (namespace, pod, container)
Claims = Mapping[tuple[str, str, str], Sequence[Claim]]


def add_claims(container: Any, claims: Sequence[Claim]) -> None:
    """`dynamic_resources` as the kubelet fills them, CDI device names and a share id included."""
    for claim_name, claim_namespace, devices in claims:
        dynamic = container.dynamic_resources.add(claim_name=claim_name, claim_namespace=claim_namespace)
        for driver, pool, device in devices:
            resource = dynamic.claim_resources.add(driver_name=driver, pool_name=pool, device_name=device,
                                                   share_id="7f1c")
            resource.cdi_devices.add(name=f"k8s.{driver}/claim={claim_name}-{device}")


def list_response(pods: Sequence[Pod], claims: Claims | None = None) -> bytes:
    """A serialized ListPodResourcesResponse, with CPU ids, memory and NUMA topology as a real kubelet sends,
    and the DRA claims of `claims` (a container named only there is added to its pod)."""
    answer = MESSAGES["ListPodResourcesResponse"]()
    wanted = dict(claims or {})
    for namespace, name, containers in pods:
        pod = answer.pod_resources.add(name=name, namespace=namespace)
        names = [*containers, *(c for ns, p, c in wanted if (ns, p) == (namespace, name) and c not in containers)]
        for container_name in names:
            container = pod.containers.add(name=container_name)
            container.cpu_ids.extend([2, 3, 130])
            container.memory.add(memory_type="memory", size=2**34).topology.nodes.add(ID=1)
            for resource, ids in containers.get(container_name, ()):
                entry = container.devices.add(resource_name=resource)
                entry.device_ids.extend(ids)
                entry.topology.nodes.add(ID=0)
            add_claims(container, wanted.get((namespace, name, container_name), ()))
    return bytes(answer.SerializeToString())
