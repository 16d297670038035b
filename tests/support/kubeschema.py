"""Offline schema checks of Kubernetes resources: Kubernetes' own kinds against kubernetes-validate's schemas,
the Prometheus Operator's kinds against the operator's CRD models (cloudcoil.models.prometheus_operator).

Both are pinned in pyproject.toml's dev extras; the operator's model version is the operator version
gpudash targets (0.80.1.x = prometheus-operator v0.80.1). The models ignore unknown fields, so a resource
must also survive the round trip through its model unchanged: a misspelt field is dropped there, and
named. AlertmanagerConfig's child routes are untyped in the CRD; each is checked as a Route here.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import kubernetes_validate
import pydantic
import yaml
from cloudcoil.models.prometheus_operator import v1, v1alpha1

KUBERNETES_VERSION = "1.30.0"  # the oldest Kubernetes still in wide use that gpudash's resources must fit
OPERATOR_MODELS = version("cloudcoil.models.prometheus_operator")

_OPERATOR_KINDS: dict[tuple[str, str], type[pydantic.BaseModel]] = {
    ("monitoring.coreos.com/v1", "PrometheusRule"): v1.PrometheusRule,
    ("monitoring.coreos.com/v1", "ServiceMonitor"): v1.ServiceMonitor,
    ("monitoring.coreos.com/v1", "PodMonitor"): v1.PodMonitor,
    ("monitoring.coreos.com/v1alpha1", "AlertmanagerConfig"): v1alpha1.AlertmanagerConfig,
}


def _dropped(given: Any, kept: Any, where: str) -> Iterator[str]:
    """Paths in `given` that the model's dump `kept` lost or changed (unknown or misspelt fields)."""
    if isinstance(given, dict) and isinstance(kept, dict):
        for key, value in given.items():
            if key not in kept:
                yield f"{where}.{key}: unknown field"
            else:
                yield from _dropped(value, kept[key], f"{where}.{key}")
    elif isinstance(given, list) and isinstance(kept, list) and len(given) == len(kept):
        for index, (a, b) in enumerate(zip(given, kept, strict=True)):
            yield from _dropped(a, b, f"{where}[{index}]")
    elif given != kept:
        yield f"{where}: {given!r} read back as {kept!r}"


def _model_problems(model: type[pydantic.BaseModel], data: Any, where: str) -> list[str]:
    try:
        dumped = model.model_validate(data).model_dump(mode="json", by_alias=True, exclude_unset=True)
    except pydantic.ValidationError as exc:
        return [f"{where}.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]
    return list(_dropped(data, dumped, where))


def _child_routes(route: Any, where: str) -> Iterator[tuple[Any, str]]:
    for index, child in enumerate(route.get("routes", []) if isinstance(route, dict) else []):
        yield child, f"{where}.routes[{index}]"
        yield from _child_routes(child, f"{where}.routes[{index}]")


def problems(resource: Any) -> list[str]:
    """What is wrong with one resource against its schema; empty when it is valid."""
    if not isinstance(resource, dict) or "apiVersion" not in resource or "kind" not in resource:
        return ["not a Kubernetes resource (apiVersion and kind)"]
    name = f"{resource['kind']}/{resource.get('metadata', {}).get('name', '?')}"
    model = _OPERATOR_KINDS.get((resource["apiVersion"], resource["kind"]))
    if model is None:
        if resource["apiVersion"].startswith("monitoring.coreos.com/"):
            return [f"{name}: no schema for {resource['apiVersion']} {resource['kind']}"]
        try:
            kubernetes_validate.validate(resource, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            return [f"{name}: {'.'.join(str(p) for p in exc.path)}: {exc.message}"]
        except kubernetes_validate.SchemaNotFoundError as exc:
            return [f"{name}: {exc.message}"]
        return []
    found = _model_problems(model, resource, name)
    if resource["kind"] == "AlertmanagerConfig":
        for child, where in _child_routes(resource.get("spec", {}).get("route", {}), f"{name}.spec.route"):
            # A child route's own `routes` are checked on their own; the model types them as opaque objects.
            found += _model_problems(v1alpha1.Route, child, where)
    return found


def documents(text: str) -> list[Any]:
    return [doc for doc in yaml.safe_load_all(text) if doc is not None]


def file_problems(paths: Iterable[Path]) -> dict[str, list[str]]:
    """Every resource in every file checked: {file: problems}, only files with problems."""
    out = {}
    for path in paths:
        found = [p for doc in documents(path.read_text(encoding="utf-8")) for p in problems(doc)]
        if found:
            out[str(path)] = found
    return out
