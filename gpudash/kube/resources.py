"""What every generated Kubernetes resource shares: metadata with gpudash's labels, names, multi-document YAML."""

from __future__ import annotations

import re
from typing import Any

from gpudash.config.kubernetes import KubeSite, Labels
from gpudash.yamltext import dump

MANAGED_BY = ("app.kubernetes.io/managed-by", "gpudash")  # on every resource gpudash renders
PART_OF = ("app.kubernetes.io/part-of", "gpudash")


def slug(text: str, limit: int = 40) -> str:
    """`text` as part of a Kubernetes name: lower case, runs of anything else as one '-', trimmed."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower())[:limit].strip("-") or "x"


def metadata(kube: KubeSite, name: str, labels: Labels, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """name, namespace, the selector labels given and gpudash's own; annotations when there are any."""
    out: dict[str, Any] = {"name": name, "namespace": kube.namespace,
                           "labels": dict([PART_OF, MANAGED_BY, *labels])}
    if annotations:
        out["annotations"] = annotations
    return out


def documents(resources: list[dict[str, Any]]) -> str:
    """The resources as one YAML stream, each document introduced by `---`."""
    return "".join("---\n" + dump(resource) for resource in resources)
