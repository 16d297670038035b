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
    ],
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


def list_response(pods: Sequence[Pod]) -> bytes:
    """A serialized ListPodResourcesResponse, with CPU ids, memory and NUMA topology as a real kubelet sends."""
    answer = MESSAGES["ListPodResourcesResponse"]()
    for namespace, name, containers in pods:
        pod = answer.pod_resources.add(name=name, namespace=namespace)
        for container_name, devices in containers.items():
            container = pod.containers.add(name=container_name)
            container.cpu_ids.extend([2, 3, 130])
            container.memory.add(memory_type="memory", size=2**34).topology.nodes.add(ID=1)
            for resource, ids in devices:
                entry = container.devices.add(resource_name=resource)
                entry.device_ids.extend(ids)
                entry.topology.nodes.add(ID=0)
    return bytes(answer.SerializeToString())
