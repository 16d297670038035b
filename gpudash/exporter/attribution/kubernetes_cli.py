"""The exporter's Kubernetes flags (dcgm-exporter's names and environment variables) and the attributor they build.

`@kubernetes_options` adds the flags to a click command and hands it one `kubernetes` argument, a
KubeletConfig or None when `--kubernetes` is off. Importing this module imports neither grpc nor pynvml:
a node without Kubernetes never needs them.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from gpudash.catalog import DRA_LABELS
from gpudash.config.options import option_seconds
from gpudash.errors import UsageError
from gpudash.exporter.attribution.devices import ID_TYPES
from gpudash.exporter.attribution.kubelet import DEFAULT_SOCKET, KubeletAttributor, KubeletConfig, api_sources
from gpudash.exporter.attribution.mig import no_mig
from gpudash.exporter.attribution.pods import SERVICE_ACCOUNT_DIR
from gpudash.exporter.label_budget import MAX_LABELS_PER_SERIES, fixed_labels, pod_label_room

log = logging.getLogger("gpudash.exporter")

_OPTIONS = (
    click.option("--kubernetes", "-k", is_flag=True, envvar="DCGM_EXPORTER_KUBERNETES",
                 help="Add pod, namespace and container to the series of each GPU a container holds, from the "
                      "kubelet's PodResources API (needs pip install 'gpudash[kubernetes]'). Scrape with "
                      "honorLabels: true, or a ServiceMonitor's default renames them exported_pod, ..."),
    click.option("--pod-resources-kubelet-socket", type=click.Path(path_type=Path), default=DEFAULT_SOCKET,
                 show_default=True, envvar="DCGM_POD_RESOURCES_KUBELET_SOCKET",
                 help="The kubelet's PodResources socket. Mount its directory into the pod, not the socket: "
                      "the kubelet recreates the socket when it restarts."),
    click.option("--kubernetes-gpu-id-type", type=click.Choice(ID_TYPES), default="uid", show_default=True,
                 envvar="DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE",
                 help="How the kubelet names GPUs: uid (GPU-/MIG- UUIDs, NVIDIA's device plugin) or "
                      "device-name (nvidia0, ..., GKE's device plugin)."),
    click.option("--nvidia-resource-names", default="", envvar="NVIDIA_RESOURCE_NAMES", metavar="NAMES",
                 help="Comma list of more resource names that are NVIDIA GPUs, besides nvidia.com/gpu and "
                      "nvidia.com/mig-* (e.g. nvidia.com/gpu.shared when time-slicing renames them)."),
    click.option("--kubernetes-enable-pod-labels", is_flag=True, envvar="DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS",
                 help="Also copy the pod's labels onto its GPUs' series, every character outside [a-zA-Z0-9_] "
                      "made _ (training.kubeflow.org/job-name -> training_kubeflow_org_job_name). Reads the API "
                      "server: needs NODE_NAME and RBAC list on pods."),
    click.option("--kubernetes-enable-pod-uid", is_flag=True, envvar="DCGM_EXPORTER_KUBERNETES_ENABLE_POD_UID",
                 help="Also add pod_uid (from the API server) to the series of held GPUs."),
    click.option("--kubernetes-enable-dra", is_flag=True, envvar="KUBERNETES_ENABLE_DRA",
                 help="Also attribute GPUs allocated through DRA ResourceClaims (NVIDIA's driver gpu.nvidia.com): "
                      "one copy of the GPU's series per container, with dra_claim_name, dra_claim_namespace, "
                      "dra_driver_name, dra_pool_name, dra_device_name (and dra_mig_profile, dra_mig_device_uuid "
                      "for a MIG device). Reads the node's ResourceSlices: needs NODE_NAME and RBAC list on "
                      "resourceslices.resource.k8s.io."),
    click.option("--kubernetes-virtual-gpus", is_flag=True, envvar="KUBERNETES_VIRTUAL_GPUS",
                 help="One copy of a shared (time-sliced, MPS) GPU's series per container holding it, with vgpu "
                      "(the replica), instead of one container's labels."),
    click.option("--kubernetes-pod-label-allowlist-regex", default="", metavar="REGEXES",
                 envvar="DCGM_EXPORTER_KUBERNETES_POD_LABEL_ALLOWLIST_REGEX",
                 help="Comma list of regexes matched against the raw label key (^training\\.kubeflow\\.org/.*); "
                      "only matching labels are copied. Empty: all."),
    click.option("--max-labels-per-series", type=int, default=MAX_LABELS_PER_SERIES, show_default=True,
                 metavar="N", envvar="GPUDASH_EXPORTER_MAX_LABELS_PER_SERIES",
                 help="Labels a stored series may carry (Mimir's max_label_names_per_series), counting __name__ "
                      "and the job, instance, cluster and rack the scrape adds: pod labels get what the "
                      "exporter's own leave, the first by name."),
    click.option("--pod-resources-interval", default="5s", show_default=True, metavar="DURATION",
                 help="How often the kubelet is asked. Its last answer labels series for 3 intervals + the "
                      "timeout after it stops answering."),
    click.option("--pod-resources-timeout", default="10s", show_default=True, metavar="DURATION",
                 help="Deadline of one PodResources List (and of one API server request)."),
    click.option("--node-name", envvar="NODE_NAME", metavar="NAME",
                 help="This node's Kubernetes name, to list its pods (set NODE_NAME from fieldRef spec.nodeName)."),
    click.option("--kubernetes-api-url", metavar="URL",
                 help="The API server (default: in-cluster, https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT)."),
    click.option("--kubernetes-service-account-dir", type=click.Path(path_type=Path, file_okay=False),
                 default=SERVICE_ACCOUNT_DIR, show_default=True, help="Where the token and ca.crt are."),
)
_NAMES = ("kubernetes", "pod_resources_kubelet_socket", "kubernetes_gpu_id_type", "nvidia_resource_names",
          "kubernetes_enable_pod_labels", "kubernetes_enable_pod_uid", "kubernetes_enable_dra",
          "kubernetes_virtual_gpus", "kubernetes_pod_label_allowlist_regex",
          "max_labels_per_series", "pod_resources_interval", "pod_resources_timeout", "node_name", "kubernetes_api_url",
          "kubernetes_service_account_dir")


def kubernetes_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add the Kubernetes flags; the command receives `kubernetes: KubeletConfig | None` instead."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        values = {name: kwargs.pop(name) for name in _NAMES}
        kwargs["kubernetes"] = kubelet_config(click.get_current_context(), **values)
        return command(*args, **kwargs)

    for option in reversed(_OPTIONS):
        wrapper = option(wrapper)
    return wrapper


def _seconds(flag: str, text: str) -> float:
    return option_seconds(flag, text, minimum=0.1, examples="500ms, 5s or 1m")


def _comma_list(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def kubelet_config(ctx: click.Context, **values: Any) -> KubeletConfig | None:
    """The settings the flags give, or None without --kubernetes (then a Kubernetes flag on the command line
    is a mistake, said in one line)."""
    if not values["kubernetes"]:
        given = [name for name in _NAMES[1:] if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE]
        if given:
            raise UsageError(f"--{given[0].replace('_', '-')} needs --kubernetes")
        return None
    allowlist = _comma_list(values["kubernetes_pod_label_allowlist_regex"])
    for pattern in allowlist:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise UsageError(f"--kubernetes-pod-label-allowlist-regex {pattern!r}: not a regex: {exc}") from None
    room = _pod_label_room(values)
    return KubeletConfig(
        socket=values["pod_resources_kubelet_socket"],
        id_type=values["kubernetes_gpu_id_type"],
        resource_names=_comma_list(values["nvidia_resource_names"]),
        pod_labels=values["kubernetes_enable_pod_labels"],
        pod_uid=values["kubernetes_enable_pod_uid"],
        label_allowlist=allowlist,
        max_pod_labels=room if values["kubernetes_enable_pod_labels"] else None,
        dra=values["kubernetes_enable_dra"],
        virtual_gpus=values["kubernetes_virtual_gpus"],
        interval=_seconds("--pod-resources-interval", values["pod_resources_interval"]),
        timeout=_seconds("--pod-resources-timeout", values["pod_resources_timeout"]),
        api_url=values["kubernetes_api_url"],
        account_dir=values["kubernetes_service_account_dir"],
        node_name=values["node_name"],
    )


def _pod_label_room(values: dict[str, Any]) -> int:
    """The pod labels a series has room for under --max-labels-per-series; a limit too low is refused."""
    limit = values["max_labels_per_series"]
    extra = (*(("pod_uid",) if values["kubernetes_enable_pod_uid"] else ()),
             *(("vgpu",) if values["kubernetes_virtual_gpus"] else ()),
             *(DRA_LABELS if values["kubernetes_enable_dra"] else ()))
    pod_labels = values["kubernetes_enable_pod_labels"]
    least = fixed_labels(extra) + (1 if pod_labels else 0)
    if limit < least:
        what = "the exporter's own labels and one pod label" if pod_labels else "the exporter's own labels"
        raise UsageError(f"--max-labels-per-series {limit}: a series may need {least} labels ({what}, with "
                         f"__name__ and the scrape's job, instance, cluster and rack); give at least {least}")
    return pod_label_room(extra, limit)


def kubelet_attributor(config: KubeletConfig, *, simulated: bool) -> KubeletAttributor:
    """The attributor of this node: grpc to the kubelet, NVML for MIG ids (none on a simulated node)."""
    mig_parent: Callable[[str], str | None] = no_mig
    if not simulated:
        from gpudash.exporter.attribution.mig import NvmlMigLookup

        try:
            mig_parent = NvmlMigLookup()
        except Exception as exc:  # MIG ids then label nothing; whole-GPU ids still work
            log.warning("MIG device ids cannot be resolved without NVML (%s): MIG pods label no GPU", exc)
    pod_lister, slice_lister = api_sources(config)
    return KubeletAttributor(config, pod_lister=pod_lister, slice_lister=slice_lister, mig_parent=mig_parent)
