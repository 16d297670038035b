"""The kubelet's PodResources v1 `List` answer, decoded from protobuf wire format without generated code.

The exporter reads these fields of the answer (shared/reference/job-attribution.md §3.2)::

    ListPodResourcesResponse { repeated PodResources pod_resources = 1; }
    PodResources             { string name = 1; string namespace = 2; repeated ContainerResources containers = 3; }
    ContainerResources       { string name = 1; repeated ContainerDevices devices = 2;
                               repeated DynamicResource dynamic_resources = 5; }
    ContainerDevices         { string resource_name = 1; repeated string device_ids = 2; }
    DynamicResource          { string claim_name = 2; string claim_namespace = 3;
                               repeated ClaimResource claim_resources = 4; }
    ClaimResource            { string driver_name = 2; string pool_name = 3; string device_name = 4; }

`dynamic_resources` lists what DRA allocated to the container (the kubelet fills it from 1.34, or with the
KubeletPodResourcesDynamicResources gate before). Everything else (CPU ids, memory, topology, CDI device
names, share ids, fields a newer kubelet adds) is skipped by
its wire type, as protobuf itself does with unknown fields, so no protoc step and no protobuf runtime is
needed on a GPU node: only grpcio, for the transport. The request message has no fields: it is empty bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

LIST_METHOD = "/v1.PodResourcesLister/List"
LIST_REQUEST = b""

_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5


class PodResourcesDecodeError(ValueError):
    """The bytes are not a ListPodResourcesResponse (truncated, or a wire type protobuf 3 never writes)."""


@dataclass(frozen=True)
class ContainerDevices:
    resource_name: str
    device_ids: tuple[str, ...]


@dataclass(frozen=True)
class ClaimResource:
    """One device a DRA claim got: its driver, the pool (the node, for NVIDIA's driver) and the device's name."""

    driver_name: str
    pool_name: str
    device_name: str


@dataclass(frozen=True)
class DynamicResource:
    claim_name: str
    claim_namespace: str
    claim_resources: tuple[ClaimResource, ...]


@dataclass(frozen=True)
class ContainerResources:
    name: str
    devices: tuple[ContainerDevices, ...]
    dynamic_resources: tuple[DynamicResource, ...] = ()


@dataclass(frozen=True)
class PodResources:
    name: str
    namespace: str
    containers: tuple[ContainerResources, ...]


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise PodResourcesDecodeError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift >= 64:
            raise PodResourcesDecodeError("varint longer than 10 bytes")


def fields(data: bytes) -> list[tuple[int, bytes]]:
    """(field number, payload) of each length-delimited field of one message; other wire types are skipped."""
    out: list[tuple[int, bytes]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise PodResourcesDecodeError("field number 0")
        if wire == _VARINT:
            _, pos = _varint(data, pos)
        elif wire == _FIXED64:
            pos += 8
        elif wire == _FIXED32:
            pos += 4
        elif wire == _LENGTH:
            size, pos = _varint(data, pos)
            if pos + size > len(data):
                raise PodResourcesDecodeError(f"field {number}: {size} bytes announced, {len(data) - pos} left")
            out.append((number, data[pos:pos + size]))
            pos += size
        else:
            raise PodResourcesDecodeError(f"field {number}: wire type {wire} (groups) is not protobuf 3")
        if pos > len(data):
            raise PodResourcesDecodeError(f"field {number}: truncated")
    return out


def _text(payload: bytes) -> str:
    return payload.decode("utf-8", errors="replace")


def _string(parts: list[tuple[int, bytes]], number: int) -> str:
    """A singular string field: the last occurrence wins, as in protobuf; absent is ""."""
    return next((_text(p) for n, p in reversed(parts) if n == number), "")


def _devices(data: bytes) -> ContainerDevices:
    parts = fields(data)
    return ContainerDevices(_string(parts, 1), tuple(_text(p) for n, p in parts if n == 2))


def _claim_resource(data: bytes) -> ClaimResource:
    parts = fields(data)
    return ClaimResource(_string(parts, 2), _string(parts, 3), _string(parts, 4))


def _dynamic(data: bytes) -> DynamicResource:
    parts = fields(data)
    return DynamicResource(_string(parts, 2), _string(parts, 3), tuple(_claim_resource(p) for n, p in parts if n == 4))


def _container(data: bytes) -> ContainerResources:
    parts = fields(data)
    return ContainerResources(_string(parts, 1), tuple(_devices(p) for n, p in parts if n == 2),
                              tuple(_dynamic(p) for n, p in parts if n == 5))


def _pod(data: bytes) -> PodResources:
    parts = fields(data)
    return PodResources(_string(parts, 1), _string(parts, 2), tuple(_container(p) for n, p in parts if n == 3))


def decode_list_response(data: bytes) -> tuple[PodResources, ...]:
    """The pods of one `List` answer; raises PodResourcesDecodeError on bytes that are not one."""
    return tuple(_pod(p) for n, p in fields(data) if n == 1)
