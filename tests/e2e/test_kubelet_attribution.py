"""`gpudash exporter --kubernetes` against a fake kubelet: a real grpcio server on a unix socket serving
PodResources v1 `List` with messages built by protobuf (tests/support/podresources_pb.py), scraped over HTTP.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import grpc
import pytest
from support.exposition import parse_exposition
from support.podresources_pb import MESSAGES, Claims, Pod, add_claims
from support.slack import budget
from support.waiting import eventually

from gpudash.exporter.attribution.kubelet import KubeletAttributor, KubeletConfig
from gpudash.exporter.service import Exporter
from gpudash.exporter.sim.fleet import fleet_from_specs
from gpudash.exporter.sim.simulated import SimulatedSource
from gpudash.stack.loopback import LoopbackHTTPServer
from gpudash.stack.process import free_port

SEED = 11
UUIDS = [g.uuid for g in fleet_from_specs(4, SEED, workloads=[], faults=[], epoch=0.0).identities]
MIG = "MIG-a1b2c3d4-0000-4000-8000-000000000001"
TOKEN = "s3cret-service-account-token"


class FakeKubelet:
    """PodResourcesLister.List on a unix socket, answering with whatever `pods` (and their DRA `claims`) hold now."""

    def __init__(self, socket: Path, pods: Sequence[Pod], claims: Claims | None = None) -> None:
        self.socket, self.pods, self.claims, self.calls = socket, list(pods), dict(claims or {}), 0
        self._server: Any = None

    def _list(self, request: Any, context: Any) -> Any:
        self.calls += 1
        answer = MESSAGES["ListPodResourcesResponse"]()
        for namespace, name, containers in self.pods:
            pod = answer.pod_resources.add(name=name, namespace=namespace)
            claimed = [c for ns, p, c in self.claims if (ns, p) == (namespace, name) and c not in containers]
            for container_name in [*containers, *claimed]:
                container = pod.containers.add(name=container_name)
                container.cpu_ids.extend([4, 5])
                for resource, ids in containers.get(container_name, ()):
                    container.devices.add(resource_name=resource, device_ids=list(ids)).topology.nodes.add(ID=0)
                add_claims(container, self.claims.get((namespace, name, container_name), ()))
        return answer

    def start(self) -> FakeKubelet:
        handler = grpc.method_handlers_generic_handler("v1.PodResourcesLister", {
            "List": grpc.unary_unary_rpc_method_handler(
                self._list, request_deserializer=MESSAGES["ListPodResourcesRequest"].FromString,
                response_serializer=lambda message: message.SerializeToString()),
        })
        self._server = grpc.server(ThreadPoolExecutor(max_workers=2))
        self._server.add_generic_rpc_handlers((handler,))
        self._server.add_insecure_port(f"unix://{self.socket}")
        self._server.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(None).wait()
            self._server = None
        self.socket.unlink(missing_ok=True)  # as the kubelet's restart leaves it: no socket until it is back


class FakeApiServer(LoopbackHTTPServer):
    """GET /api/v1/pods?fieldSelector=spec.nodeName=... with a bearer token, as the API server answers it, and
    the ResourceSlices of `slices` under resource.k8s.io/v1 (an older server: v1beta1 only, v1 is 404)."""

    def __init__(self, pods: list[dict[str, Any]], slices: list[dict[str, Any]] | None = None,
                 slice_version: str = "v1") -> None:
        self.pods, self.slices, self.slice_version = pods, slices or [], slice_version
        self.queries: list[dict[str, list[str]]] = []

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    self.send_error(401)
                    return
                if url.path == f"/apis/resource.k8s.io/{api.slice_version}/resourceslices":
                    items: dict[str, Any] = {"kind": "ResourceSliceList", "items": api.slices}
                elif url.path == "/api/v1/pods":
                    items = {"kind": "PodList", "apiVersion": "v1", "items": api.pods}
                else:
                    self.send_error(404)
                    return
                api.queries.append({"path": [url.path], **urllib.parse.parse_qs(url.query)})
                body = json.dumps(items).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

        return Handler


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="kubelet-", dir="/tmp"))  # a unix socket path holds at most 107 bytes
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _gpu(pod: str, *ids: str, ns: str = "ml", resource: str = "nvidia.com/gpu", container: str = "main") -> Pod:
    return (ns, pod, {container: [(resource, list(ids))]})


def _scrape(url: str) -> dict[str, dict[str, str]]:
    """gpu -> labels of its DCGM_FI_DEV_GPU_UTIL series; the scrape itself must succeed."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=budget(5)) as answer:
        assert answer.status == 200
        rows = parse_exposition(answer.read().decode())["DCGM_FI_DEV_GPU_UTIL"]
    assert len(rows) == len({labels["gpu"] for labels, _ in rows}), "one series per GPU"
    return {labels["gpu"]: labels for labels, _ in rows}


def _pods(url: str) -> dict[str, str | None]:
    return {gpu: (f"{s['namespace']}/{s['pod']}/{s['container']}" if "pod" in s else None)
            for gpu, s in _scrape(url).items()}


class ExporterProcess:
    def __init__(self, root: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        environment = {k: v for k, v in os.environ.items() if k not in ("NODE_NAME", "KUBERNETES_SERVICE_HOST")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gpudash", "exporter", "--listen", f"127.0.0.1:{self.port}", "--simulate", "4",
             "--seed", str(SEED), "--interval", "100ms", "--pod-resources-interval", "200ms",
             "--pod-resources-timeout", "1s", *args],
            cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**environment, "PYTHONPATH": str(root), **(env or {})},
        )

        def ready() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"the exporter exited: {self.proc.communicate()[1]}")
            return urllib.request.urlopen(f"{self.url}/-/ready", timeout=budget(1)).status == 200

        eventually(ready, timeout=30, what="the exporter to answer /-/ready", ignoring=(OSError,))

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGTERM)
        _, stderr = self.proc.communicate(timeout=budget(15))
        assert self.proc.returncode == 0, stderr
        return stderr


def test_labels_follow_the_kubelet_and_a_kubelet_outage_never_fails_a_scrape(root: Path, socket_dir: Path) -> None:
    socket = socket_dir / "kubelet.sock"
    kubelet = FakeKubelet(socket, [
        _gpu("trainer-0", UUIDS[0], UUIDS[1]),
        _gpu("slice", f"MIG-{UUIDS[2]}/1/0", resource="nvidia.com/mig-1g.18gb", ns="serve", container="vllm"),
        _gpu("shared", f"{UUIDS[3]}::1", ns="dev", resource="nvidia.com/gpu.shared"),
        ("ml", "nic-only", {"main": [("example.com/nic", ["eth1"])]}),
    ]).start()
    exporter = ExporterProcess(root, "--kubernetes", "--pod-resources-kubelet-socket", str(socket),
                               "--nvidia-resource-names", "nvidia.com/gpu.shared")
    try:
        held = {"0": "ml/trainer-0/main", "1": "ml/trainer-0/main", "2": "serve/slice/vllm", "3": "dev/shared/main"}
        eventually(lambda: _pods(exporter.url) == held, timeout=20, what="pod labels on the held GPUs")
        kubelet.stop()
        none: dict[str, str | None] = dict.fromkeys(held)
        eventually(lambda: _pods(exporter.url) == none, timeout=20, what="labels gone once the answer is stale")
        kubelet = FakeKubelet(socket, [_gpu("trainer-1", UUIDS[1])]).start()
        eventually(lambda: _pods(exporter.url) == {**none, "1": "ml/trainer-1/main"}, timeout=20,
                   what="labels back with the kubelet")
    finally:
        try:
            stderr = exporter.stop()
        finally:
            kubelet.stop()
    assert stderr.count("kubelet PodResources List failed") == 1, stderr
    assert stderr.count("kubelet PodResources answers again") == 1, stderr
    assert "NODE_NAME is not set" in stderr


def test_device_names_match_on_gke(root: Path, socket_dir: Path) -> None:
    socket = socket_dir / "kubelet.sock"
    kubelet = FakeKubelet(socket, [_gpu("a", "nvidia1"), _gpu("b", "nvidia2/gi1", resource="nvidia.com/mig-1g.10gb"),
                                   _gpu("c", f"{UUIDS[3]}")]).start()
    exporter = ExporterProcess(root, "--kubernetes", "--pod-resources-kubelet-socket", str(socket),
                               "--kubernetes-gpu-id-type", "device-name")
    try:
        eventually(lambda: _pods(exporter.url) == {"0": None, "1": "ml/a/main", "2": "ml/b/main", "3": None},
                   timeout=20, what="pod labels by device name")
    finally:
        try:
            stderr = exporter.stop()
        finally:
            kubelet.stop()
    assert "kubelet lists uuid device ids, which --kubernetes-gpu-id-type device-name never matches" in stderr


def test_pod_labels_from_a_fake_api_server(root: Path, socket_dir: Path, tmp_path: Path) -> None:
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text(TOKEN + "\n")
    pods = [{"metadata": {"name": "trainer-0", "namespace": "ml", "uid": "0d6e2f7a-1b2c-4d3e-8f9a-0b1c2d3e4f5a",
                          "labels": {"training.kubeflow.org/job-name": "llama-70b",
                                     "training.kubeflow.org/replica-index": "0", "app": "not-allowed",
                                     "pod": "not-the-pod-name"}},
             "status": {"phase": "Running"}}]
    socket = socket_dir / "kubelet.sock"
    kubelet = FakeKubelet(socket, [_gpu("trainer-0", UUIDS[2])]).start()
    with FakeApiServer(pods) as api:
        exporter = ExporterProcess(
            root, "--kubernetes", "--pod-resources-kubelet-socket", str(socket), "--kubernetes-enable-pod-labels",
            "--kubernetes-pod-label-allowlist-regex", r"^training\.kubeflow\.org/job-name$,replica-index$,^pod$",
            "--kubernetes-api-url", api.url, "--kubernetes-service-account-dir", str(account),
            env={"NODE_NAME": "gpu-node-7"})
        try:
            # the pod's labels, not only its name: on a busy machine the first pod list may miss its deadline
            series = eventually(lambda: (s := _scrape(exporter.url)) and "training_kubeflow_org_job_name" in s["2"]
                                and s, timeout=20, what="pod labels on GPU 2")
            with urllib.request.urlopen(f"{exporter.url}/metrics", timeout=budget(5)) as answer:
                info = parse_exposition(answer.read().decode())["gpudash_job_info"]
        finally:
            try:
                stderr = exporter.stop()
            finally:
                kubelet.stop()
    labels = series["2"]
    assert labels["training_kubeflow_org_job_name"] == "llama-70b"
    assert labels["training_kubeflow_org_replica_index"] == "0"
    assert "app" not in labels and labels["pod"] == "trainer-0"
    assert "pod label 'pod': becomes 'pod', a label the exporter or Prometheus sets itself" in stderr
    assert all("pod" not in series[g] for g in ("0", "1", "3"))
    # who holds the job: one gpudash_job_info per pod with a GPU, its namespace and its allow-listed labels
    assert [{k: v for k, v in labels.items() if k != "hostname"} for labels, _ in info] == [{
        "pod": "trainer-0", "namespace": "ml", "training_kubeflow_org_job_name": "llama-70b",
        "training_kubeflow_org_replica_index": "0"}]
    assert api.queries[0]["fieldSelector"] == ["spec.nodeName=gpu-node-7"]
    assert TOKEN not in stderr


def test_mig_uuids_through_an_injected_lookup(socket_dir: Path) -> None:
    socket = socket_dir / "kubelet.sock"
    kubelet = FakeKubelet(socket, [_gpu("mig-pod", MIG, resource="nvidia.com/mig-2g.35gb"),
                                   _gpu("unknown-mig", "MIG-ffffffff-0000-4000-8000-000000000009",
                                        resource="nvidia.com/mig-1g.18gb")]).start()
    source = SimulatedSource(fleet_from_specs(4, SEED, workloads=[], faults=[]))
    attributor = KubeletAttributor(KubeletConfig(socket=socket, interval=0.2, timeout=1.0),
                                   mig_parent={MIG: UUIDS[1]}.get)
    try:
        with Exporter(source, interval=0.1, attributor=attributor) as exporter:
            eventually(lambda: _pods(exporter.url) == {"0": None, "1": "ml/mig-pod/main", "2": None, "3": None},
                       timeout=20, what="the MIG pod on its parent GPU")
    finally:
        kubelet.stop()


def test_without_kubernetes_grpc_is_never_imported(root: Path) -> None:
    code = ("import sys; from gpudash.cli import main\n"
            "import gpudash.exporter.cli, gpudash.exporter.attribution.kubelet\n"
            "from gpudash.exporter.attribution.kubelet import KubeletConfig\n"
            "assert 'grpc' not in sys.modules and 'google.protobuf' not in sys.modules, sorted(sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(root)}, timeout=budget(60))
    assert done.returncode == 0, done.stderr


def test_dra_claims_and_shared_gpus_label_their_copies(root: Path, socket_dir: Path, tmp_path: Path) -> None:
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text(TOKEN + "\n")
    slices = [{"spec": {"driver": "gpu.nvidia.com", "nodeName": "gpu-node-7", "pool": {"name": "gpu-node-7"},
                        "devices": [{"name": "gpu-0", "basic": {"attributes": {"uuid": {"string": UUIDS[0]}}}}]}}]
    claims: Claims = {("serve", "vllm-0", c): [("gpu-claim", "serve", [("gpu.nvidia.com", "gpu-node-7", "gpu-0")])]
                      for c in ("engine", "sidecar")}
    kubelet = FakeKubelet(socket_dir / "kubelet.sock", [
        ("serve", "vllm-0", {}),
        _gpu("a", f"{UUIDS[2]}::0", ns="dev"), _gpu("b", f"{UUIDS[2]}::1", ns="dev"),
    ], claims).start()
    with FakeApiServer([], slices, slice_version="v1beta1") as api:
        exporter = ExporterProcess(
            root, "--kubernetes", "--pod-resources-kubelet-socket", str(socket_dir / "kubelet.sock"),
            "--kubernetes-enable-dra", "--kubernetes-virtual-gpus", "--kubernetes-api-url", api.url,
            "--kubernetes-service-account-dir", str(account), env={"NODE_NAME": "gpu-node-7"})

        def copies() -> dict[str, list[tuple[str, ...]]]:
            with urllib.request.urlopen(f"{exporter.url}/metrics", timeout=budget(5)) as answer:
                rows = parse_exposition(answer.read().decode())["DCGM_FI_DEV_GPU_UTIL"]
            out: dict[str, list[tuple[str, ...]]] = {}
            for labels, _ in rows:
                out.setdefault(labels["gpu"], []).append(tuple(labels.get(k, "") for k in (
                    "namespace", "pod", "container", "vgpu", "dra_claim_name", "dra_device_name")))
            return {gpu: sorted(rows) for gpu, rows in out.items()}

        want = {"0": [("serve", "vllm-0", "engine", "", "gpu-claim", "gpu-0"),
                      ("serve", "vllm-0", "sidecar", "", "gpu-claim", "gpu-0")],
                "1": [("", "", "", "", "", "")],
                "2": [("dev", "a", "main", "0", "", ""), ("dev", "b", "main", "1", "", "")],
                "3": [("", "", "", "", "", "")]}
        try:
            eventually(lambda: copies() == want, timeout=20, what="a copy per claim consumer and per sharing pod")
        finally:
            try:
                stderr = exporter.stop()
            finally:
                kubelet.stop()
    paths = [q["path"][0] for q in api.queries]
    assert "/apis/resource.k8s.io/v1beta1/resourceslices" in paths  # after v1 answered 404
    assert TOKEN not in stderr
