"""The PodResources v1 decoder against answers built by protobuf itself (tests/support/podresources_pb.py)."""

from __future__ import annotations

import pytest
from support.podresources_pb import MESSAGES, list_response

from gpudash.exporter.attribution.podresources import (
    ContainerDevices,
    ContainerResources,
    PodResources,
    PodResourcesDecodeError,
    decode_list_response,
)

GPU0 = "GPU-5c9c2a4e-8a45-4d0e-9b0f-8d9d1e4f0a11"


def test_an_answer_with_cpu_memory_and_topology_keeps_pods_containers_and_devices() -> None:
    data = list_response([
        ("team-a", "trainer-0", {"main": [("nvidia.com/gpu", [GPU0, "GPU-x::3"]), ("example.com/nic", ["eth1"])],
                                  "sidecar": []}),
        ("kube-system", "coredns", {}),
    ])
    assert decode_list_response(data) == (
        PodResources("trainer-0", "team-a", (
            ContainerResources("main", (ContainerDevices("nvidia.com/gpu", (GPU0, "GPU-x::3")),
                                        ContainerDevices("example.com/nic", ("eth1",)))),
            ContainerResources("sidecar", ()),
        )),
        PodResources("coredns", "kube-system", ()),
    )


def test_an_empty_answer_is_no_pod() -> None:
    assert decode_list_response(b"") == ()


def test_fields_a_newer_kubelet_adds_are_skipped_whatever_their_wire_type() -> None:
    pod = MESSAGES["PodResources"](name="p", namespace="n")
    # Unknown fields appended by hand: a varint (field 9), a fixed64 (10), a fixed32 (11), bytes (12).
    unknown = bytes([9 << 3 | 0, 0x96, 0x01, 10 << 3 | 1, *b"\x00" * 8, 11 << 3 | 5, *b"\x01" * 4,
                     12 << 3 | 2, 3, *b"abc"])
    body = pod.SerializeToString() + unknown
    data = bytes([1 << 3 | 2, len(body)]) + body
    assert decode_list_response(data) == (PodResources("p", "n", ()),)


def test_a_repeated_singular_string_keeps_the_last_as_protobuf_does() -> None:
    body = bytes([1 << 3 | 2, 1, *b"a", 1 << 3 | 2, 1, *b"b"])
    assert decode_list_response(bytes([1 << 3 | 2, len(body)]) + body)[0].name == "b"


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (bytes([1 << 3 | 2, 5, *b"ab"]), "5 bytes announced, 2 left"),
        (bytes([1 << 3 | 2, 0x80]), "truncated varint"),
        (bytes([1 << 3 | 3]), "wire type 3"),
        (bytes([0 << 3 | 2, 0]), "field number 0"),
        (bytes([2 << 3 | 1, 1, 2]), "truncated"),
    ],
)
def test_bytes_that_are_not_an_answer_raise_a_decode_error_naming_why(data: bytes, why: str) -> None:
    with pytest.raises(PodResourcesDecodeError, match=why):
        decode_list_response(data)


def test_invalid_utf8_in_a_name_does_not_fail_the_answer() -> None:
    body = bytes([1 << 3 | 2, 2, 0xFF, 0x41])
    assert decode_list_response(bytes([1 << 3 | 2, len(body)]) + body)[0].name == "\ufffdA"
