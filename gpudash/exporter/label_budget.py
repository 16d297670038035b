"""At most 30 labels a series, as Grafana Mimir takes them (its default `max_label_names_per_series`).

Mimir counts every label of a stored series, `__name__` included, and Prometheus adds some on the way in.
The exporter's own labels are bounded (the GPU's, MIG's, one signal's, the job or pod's); only the pod's
labels (`--kubernetes-enable-pod-labels`) have no bound of their own, so they get what is left: the room
is worked out once from the flags, and a pod with more allowed labels keeps the first by name.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpudash.catalog import DRIVER_VERSION_LABEL, HPC_JOB_LABEL, POD_LABELS, SIGNALS

MAX_LABELS_PER_SERIES = 30  # Mimir's default max_label_names_per_series
# What a stored series carries besides the exporter's labels: its name, the target's job and instance, and the
# cluster and rack gpudash's scrape config adds (`gpudash rules`: scrape/).
SCRAPE_LABELS = ("__name__", "job", "instance", "cluster", "rack")
# Every series of a GPU: its identity (MIG instances add GPU_I_PROFILE and GPU_I_ID), the host, the driver.
GPU_LABELS = ("gpu", "UUID", "pci_bus_id", "device", "modelName", "GPU_I_PROFILE", "GPU_I_ID", "hostname",
              DRIVER_VERSION_LABEL)
# The most labels one signal adds of its own (`link` and `error`, `health_watch` and `health_error_code`, ...).
SIGNAL_LABELS = max(len(s.labels) for s in SIGNALS)
# The job and pod labels every attribution mode may add: hpc_job, and pod, namespace, container.
ATTRIBUTION_LABELS = (HPC_JOB_LABEL, *POD_LABELS)


def fixed_labels(extra: Iterable[str] = ()) -> int:
    """The most labels a stored series carries before pod labels, with the optional attribution labels `extra`
    (pod_uid, vgpu, the dra_* labels) that the flags turn on."""
    return len(SCRAPE_LABELS) + len(GPU_LABELS) + SIGNAL_LABELS + len(ATTRIBUTION_LABELS) + len(tuple(extra))


def pod_label_room(extra: Iterable[str] = (), limit: int = MAX_LABELS_PER_SERIES) -> int:
    """How many pod labels a series may carry within `limit` (negative: not even the fixed labels fit)."""
    return limit - fixed_labels(extra)
