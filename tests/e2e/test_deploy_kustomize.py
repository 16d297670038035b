"""deploy/kubernetes through the real `kubectl kustomize`: it renders, the render is the committed example,
and every resource in it passes the Kubernetes schemas offline (tests/support/kubeschema.py).

Any kubectl from Debian's 1.20 (kustomize 2.0.3) on renders the same resources; the YAML layout differs
between versions, so the comparison is of the parsed documents.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
from typing import Any

import pytest
from support.kubeschema import documents, problems
from support.paths import ROOT
from support.slack import budget

DEPLOY = ROOT / "deploy" / "kubernetes"


def _kustomize() -> str:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.fail("kubectl is not installed: `make deps` installs Debian's kubernetes-client")
    done = subprocess.run([kubectl, "kustomize", str(DEPLOY)], capture_output=True, text=True, timeout=budget(60),
                          check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _by_kind_and_name(docs: list[dict[str, Any]]) -> dict[tuple[str, str], Any]:
    """The resources by (kind, name); a Secret's data decoded (kustomize 5 folds the base64, 2.0.3 does not)."""
    out = {}
    for doc in docs:
        if doc["kind"] == "Secret":
            doc = {**doc, "data": {k: base64.b64decode(v) for k, v in doc.get("data", {}).items()}}
        out[(doc["kind"], doc["metadata"]["name"])] = doc
    return out


def test_kustomize_renders_the_committed_example_and_it_is_valid() -> None:
    rendered = documents(_kustomize())
    committed = documents((DEPLOY / "rendered.example.yaml").read_text(encoding="utf-8"))
    assert _by_kind_and_name(rendered) == _by_kind_and_name(committed), "run `make kubernetes-example`"
    assert {kind for kind, _ in _by_kind_and_name(rendered)} == {"ServiceAccount", "Secret", "Service", "DaemonSet"}
    assert [p for doc in rendered for p in problems(doc)] == []


def test_the_rendered_daemonset_is_what_a_gpu_node_needs() -> None:
    resources = _by_kind_and_name(documents(_kustomize()))
    daemonset = resources[("DaemonSet", "gpudash-exporter")]
    pod = daemonset["spec"]["template"]["spec"]
    assert daemonset["metadata"]["namespace"] == "monitoring"
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    assert pod["hostPID"] is False and pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["pod-resources"] == {"name": "pod-resources", "mountPath": "/var/lib/kubelet/pod-resources",
                                       "readOnly": True}
    assert "--web-config=/etc/gpudash/web-config.yml" in container["args"]
    assert container["resources"]["requests"] and container["resources"]["limits"]
    assert container["readinessProbe"]["tcpSocket"]["port"] == "metrics"
    secret = resources[("Secret", "gpudash-exporter-web-config")]
    assert secret["data"]["web-config.yml"] == (DEPLOY / "web-config.yml").read_bytes()
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["web-config"]["secret"]["secretName"] == "gpudash-exporter-web-config"
