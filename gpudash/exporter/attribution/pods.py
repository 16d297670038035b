"""Pods on this node from the Kubernetes API server: their UIDs, phases and labels, and which labels go on series.

PodResources names a pod but has no UID and no labels (shared/reference/job-attribution.md §3.2), so both
come from the API server, as dcgm-exporter's pod mapper reads them: the pods with
`spec.nodeName=$NODE_NAME`, with the pod's service-account token and CA (in-cluster config; the API URL
and the account directory can be given instead). The token file is read again for each request, since a
projected token is rotated under a running pod.

Pod labels on series follow dcgm-exporter's `--kubernetes-enable-pod-labels`: the allowlist regexes match
the raw key (`^training\\.kubeflow\\.org/.*`), every character outside `[a-zA-Z0-9_]` becomes `_`, no
prefix. Unlike dcgm-exporter, a key that sanitises to a label the exporter sets itself (`pod`, `gpu`, ...),
to a name Prometheus rejects (a leading digit, `__`), or to the same name as another key of the pod is
skipped, with one warning per key, rather than overwriting or producing a scrape Prometheus refuses.
"""

from __future__ import annotations

import json
import logging
import os
import re
import ssl
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpudash.catalog import ATTRIBUTION_LABELS, DRA_LABELS, DRIVER_VERSION_LABEL
from gpudash.exporter.attribution import Labels

log = logging.getLogger("gpudash.exporter")

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
# Labels the exporter writes itself, and the target labels Prometheus adds: a pod label never replaces one.
FIXED_LABELS = frozenset({"gpu", "UUID", "pci_bus_id", "device", "modelName", "hostname", "Hostname",
                          DRIVER_VERSION_LABEL, "clock_event", "xid", "pid", "process_name", "job", "instance",
                          "pod_uid", "vgpu", *ATTRIBUTION_LABELS, *DRA_LABELS})
_NOT_LABEL_CHAR = re.compile(r"[^a-zA-Z0-9_]")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def sanitize(key: str) -> str:
    """dcgm-exporter's label-name rule: `training.kubeflow.org/job-name` -> `training_kubeflow_org_job_name`."""
    return _NOT_LABEL_CHAR.sub("_", key)


class PodLabelFilter:
    """Which pod labels go on series, under which names; remembers what it warned about."""

    def __init__(self, allowlist: Sequence[str] = (), limit: int | None = None) -> None:
        """`allowlist`: regexes matched (re.search) against the raw key; empty lets every key through. `limit`:
        the most labels one pod gives (gpudash.exporter.label_budget); the first by name are kept."""
        self.allowlist = tuple(re.compile(pattern) for pattern in allowlist)
        self.limit = limit
        self._warned: set[str] = set()

    def allowed(self, key: str) -> bool:
        return not self.allowlist or any(pattern.search(key) for pattern in self.allowlist)

    def labels(self, raw: Mapping[str, str]) -> Labels:
        """The pod's allowed labels as (sanitised name, value), sorted by name, collisions left out."""
        names: dict[str, list[str]] = {}
        for key in sorted(raw):
            if self.allowed(key):
                names.setdefault(sanitize(key), []).append(key)
        out = []
        for name, keys in sorted(names.items()):
            problem = self._problem(name, keys)
            if problem is None:
                out.append((name, raw[keys[0]]))
            elif name not in self._warned:
                self._warned.add(name)
                log.warning("pod label %s: %s; left out (warned once)", " and ".join(repr(k) for k in keys), problem)
        if self.limit is not None and len(out) > self.limit:
            dropped = ", ".join(name for name, _ in out[self.limit:])
            if f"limit:{dropped}" not in self._warned:
                self._warned.add(f"limit:{dropped}")
                log.warning("a pod has %d allowed labels, more than the %d that fit in a series under "
                            "--max-labels-per-series: %s left out (warned once; narrow "
                            "--kubernetes-pod-label-allowlist-regex)", len(out), self.limit, dropped)
            out = out[:self.limit]
        return tuple(out)

    @staticmethod
    def _problem(name: str, keys: Sequence[str]) -> str | None:
        if len(keys) > 1:
            return f"both become {name!r}"
        if name in FIXED_LABELS:
            return f"becomes {name!r}, a label the exporter or Prometheus sets itself"
        if not _LABEL_NAME.fullmatch(name) or name.startswith("__"):
            return f"becomes {name!r}, which is not a Prometheus label name"
        return None


@dataclass(frozen=True)
class PodInfo:
    uid: str
    name: str
    namespace: str
    phase: str
    labels: Mapping[str, str]

    @property
    def finished(self) -> bool:
        """A pod whose containers all ended: older kubelets still list its devices (§3.3)."""
        return self.phase in ("Succeeded", "Failed")


@dataclass(frozen=True)
class ApiAccess:
    """Where the API server is and how to authenticate: the in-cluster config, or given."""

    url: str
    node_name: str
    token_file: Path | None = None
    ca_file: Path | None = None


def api_access(url: str | None, account_dir: Path, node_name: str | None,
               env: Mapping[str, str] = os.environ) -> ApiAccess | str:
    """The API server access of this pod, or why there is none (one line, for a warning)."""
    if not node_name:
        return "NODE_NAME is not set (give it from the downward API, fieldRef spec.nodeName)"
    if url is None:
        host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT", "443")
        if not host:
            return "not running in a pod (KUBERNETES_SERVICE_HOST unset) and no --kubernetes-api-url"
        url = f"https://{f'[{host}]' if ':' in host else host}:{port}"
    token = account_dir / "token"
    ca = account_dir / "ca.crt"
    if url.startswith("https://") and not ca.is_file():
        return f"no CA certificate at {ca}"
    return ApiAccess(url.rstrip("/"), node_name, token if token.is_file() else None, ca if ca.is_file() else None)


def pods_url(access: ApiAccess) -> str:
    query = urllib.parse.urlencode({"fieldSelector": f"spec.nodeName={access.node_name}", "resourceVersion": "0"})
    return f"{access.url}/api/v1/pods?{query}"


def get_json(access: ApiAccess, url: str, timeout: float) -> Any:
    """GET one API server URL with this pod's token and CA; raises OSError (unreachable, HTTP error)."""
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    if access.token_file is not None:
        request.add_header("Authorization", f"Bearer {access.token_file.read_text().strip()}")
    context = ssl.create_default_context(cafile=str(access.ca_file)) if access.ca_file else None
    with urllib.request.urlopen(request, timeout=timeout, context=context) as answer:
        return json.loads(answer.read())


def list_node_pods(access: ApiAccess, timeout: float) -> tuple[PodInfo, ...]:
    """GET the pods of this node; raises OSError (unreachable, HTTP error) or ValueError (not a pod list)."""
    return parse_pod_list(get_json(access, pods_url(access), timeout))


def parse_pod_list(data: Any) -> tuple[PodInfo, ...]:
    if not isinstance(data, dict) or not isinstance(data.get("items"), list):
        raise ValueError("the answer is not a pod list (no items)")
    pods = []
    for item in data["items"]:
        meta = item.get("metadata") or {}
        labels = meta.get("labels") or {}
        pods.append(PodInfo(str(meta.get("uid", "")), str(meta.get("name", "")), str(meta.get("namespace", "")),
                            str((item.get("status") or {}).get("phase", "")),
                            {str(k): str(v) for k, v in labels.items()}))
    return tuple(pods)
