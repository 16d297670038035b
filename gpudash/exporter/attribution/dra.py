"""DRA attribution, dcgm-exporter's `--kubernetes-enable-dra`: the GPUs a container got through a ResourceClaim.

The kubelet's PodResources answer names a DRA device by driver, pool and device name (`dynamic_resources`,
gpudash.exporter.attribution.podresources); which GPU that is, the node's ResourceSlices say
(resource.k8s.io, read from the API server, `spec.nodeName` = this node): NVIDIA's DRA driver (`gpu.nvidia.com`)
publishes each device with its attributes, `uuid`, and for a MIG device `parentUUID` and `profile` too, as
dcgm-exporter reads them. A MIG device labels the series of the GPU it lives on, with `dra_mig_profile` and
`dra_mig_device_uuid`.

Each container holding a GPU through a claim gets its own copy of that GPU's series (dcgm-exporter: one copy
per claim consumer, the unlabelled series kept where there is none), labelled `pod`, `namespace`,
`container` and `dra_claim_name`, `dra_claim_namespace`, `dra_driver_name`, `dra_pool_name`, `dra_device_name`.
"""

from __future__ import annotations

import urllib.error
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpudash.exporter.attribution import Labels
from gpudash.exporter.attribution.devices import Holder
from gpudash.exporter.attribution.podresources import PodResources
from gpudash.exporter.attribution.pods import ApiAccess, get_json

DRA_GPU_DRIVER = "gpu.nvidia.com"
# resource.k8s.io versions, newest first: v1 (Kubernetes 1.34) keeps attributes on the device, v1beta1 under `basic`
_VERSIONS = ("v1", "v1beta2", "v1beta1")


@dataclass(frozen=True)
class DraDevice:
    """The GPU one DRA device is, or lives on (a MIG device: with its profile and its own UUID)."""

    gpu_uuid: str
    mig_profile: str | None = None
    mig_uuid: str | None = None


DeviceTable = Mapping[tuple[str, str], DraDevice]  # (pool, device name) -> the GPU


def _attribute(attributes: Mapping[str, Any], name: str, driver: str) -> str | None:
    """A string attribute, named plainly or qualified by the driver's domain (`gpu.nvidia.com/uuid`)."""
    for key in (name, f"{driver}/{name}"):
        value = attributes.get(key)
        if isinstance(value, dict) and isinstance(value.get("string"), str):
            return str(value["string"])
    return None


def parse_resource_slices(data: Any, driver: str = DRA_GPU_DRIVER) -> dict[tuple[str, str], DraDevice]:
    """The GPU devices of a ResourceSliceList (any resource.k8s.io version); raises ValueError on no list."""
    if not isinstance(data, dict) or not isinstance(data.get("items"), list):
        raise ValueError("the answer is not a ResourceSlice list (no items)")
    table: dict[tuple[str, str], DraDevice] = {}
    for item in data["items"]:
        spec = (item.get("spec") if isinstance(item, dict) else None) or {}
        if spec.get("driver") != driver:
            continue
        pool = str((spec.get("pool") or {}).get("name", ""))
        for device in spec.get("devices") or []:
            attributes = device.get("attributes") or (device.get("basic") or {}).get("attributes") or {}
            uuid = _attribute(attributes, "uuid", driver)
            parent = _attribute(attributes, "parentUUID", driver)
            if uuid is None:
                continue
            if parent is not None:
                table[(pool, str(device.get("name", "")))] = DraDevice(parent, _attribute(attributes, "profile",
                                                                                           driver), uuid)
            else:
                table[(pool, str(device.get("name", "")))] = DraDevice(uuid)
    return table


def slices_url(access: ApiAccess, version: str) -> str:
    query = urllib.parse.urlencode({"fieldSelector": f"spec.nodeName={access.node_name}"})
    return f"{access.url}/apis/resource.k8s.io/{version}/resourceslices?{query}"


def list_node_slices(access: ApiAccess, timeout: float) -> dict[tuple[str, str], DraDevice]:
    """This node's DRA GPU devices, from the newest resource.k8s.io version the API server serves."""
    for version in _VERSIONS[:-1]:
        try:
            return parse_resource_slices(get_json(access, slices_url(access, version), timeout))
        except urllib.error.HTTPError as exc:
            if exc.code != 404:  # 404: this API server does not serve the version
                raise
    return parse_resource_slices(get_json(access, slices_url(access, _VERSIONS[-1]), timeout))


@dataclass(frozen=True)
class DraConsumer:
    """A container holding (part of) one GPU through a claim, with the claim's labels."""

    gpu_uuid: str
    holder: Holder
    labels: Labels


def dra_consumers(pods: Sequence[PodResources], table: DeviceTable) -> tuple[tuple[DraConsumer, ...],
                                                                            frozenset[tuple[str, str]]]:
    """Each container's GPUs from its claims (one per GPU and container, the first claim wins), and the
    (pool, device) pairs of NVIDIA's driver the table does not know (a newer slice: read it again)."""
    out: dict[tuple[str, Holder], DraConsumer] = {}
    unknown: set[tuple[str, str]] = set()
    for pod in pods:
        for container in pod.containers:
            holder = Holder(pod.namespace, pod.name, container.name)
            for claim in container.dynamic_resources:
                for resource in claim.claim_resources:
                    if resource.driver_name != DRA_GPU_DRIVER:
                        continue
                    device = table.get((resource.pool_name, resource.device_name))
                    if device is None:
                        unknown.add((resource.pool_name, resource.device_name))
                        continue
                    mig = (("dra_mig_profile", device.mig_profile or ""), ("dra_mig_device_uuid", device.mig_uuid)) \
                        if device.mig_uuid is not None else ()
                    labels: Labels = (("dra_claim_name", claim.claim_name),
                                      ("dra_claim_namespace", claim.claim_namespace),
                                      ("dra_driver_name", resource.driver_name),
                                      ("dra_pool_name", resource.pool_name),
                                      ("dra_device_name", resource.device_name), *mig)
                    out.setdefault((device.gpu_uuid, holder), DraConsumer(device.gpu_uuid, holder, labels))
    return tuple(sorted(out.values(), key=lambda c: (c.gpu_uuid, c.holder))), frozenset(unknown)
