"""The kubelet attributor driven by hand: labels on the right series, staleness, outages, pod labels, pod UIDs.

No socket: the List answer comes from a function (bytes built by protobuf), the clock is the test's.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from support.cli import gpudash
from support.exposition import parse_exposition
from support.podresources_pb import Pod, list_response

from gpudash.errors import ExporterError
from gpudash.exporter.attribution.kubelet import (
    KubeletAttributor,
    KubeletConfig,
    KubeletUnavailable,
    PodLister,
    load_grpc,
)
from gpudash.exporter.attribution.mig import no_mig
from gpudash.exporter.attribution.pods import PodInfo
from gpudash.exporter.poller import Poller
from gpudash.exporter.sim.fleet import fleet_from_specs
from gpudash.exporter.sim.simulated import SimulatedSource

SOURCE = SimulatedSource(fleet_from_specs(4, 3, workloads=[], faults=[], epoch=0.0))
UUIDS = [g.uuid for g in SOURCE.gpus()]
CONFIG = KubeletConfig(interval=5.0, timeout=10.0)  # stale after 25 s


class Kubelet:
    """A List answer that the test changes, or an outage."""

    def __init__(self, pods: Sequence[Pod]) -> None:
        self.answer: bytes | None = list_response(pods)
        self.calls = 0

    def __call__(self, timeout: float) -> bytes:
        self.calls += 1
        if self.answer is None:
            raise KubeletUnavailable("UNAVAILABLE: connection refused")
        return self.answer


def _gpu(pod: str, *ids: str, ns: str = "ml", resource: str = "nvidia.com/gpu") -> Pod:
    return (ns, pod, {"main": [(resource, list(ids))]})


def _attributor(kubelet: Kubelet, config: KubeletConfig = CONFIG, *, pod_lister: PodLister | None = None,
                mig_parent: Callable[[str], str | None] = no_mig) -> KubeletAttributor:
    return KubeletAttributor(config, lister=kubelet, pod_lister=pod_lister, mig_parent=mig_parent, background=False)


def _series(attributor: KubeletAttributor, now: float) -> dict[str, dict[str, str]]:
    """gpu -> its DCGM_FI_DEV_GPU_UTIL labels after one fast sweep at `now`."""
    poller = Poller(SOURCE, ["gpu_util"], hostname="n1", attributor=attributor)
    poller.sweep("fast", now)
    rows = parse_exposition(poller.exposition.body.decode())["DCGM_FI_DEV_GPU_UTIL"]
    assert len(rows) == 4, rows  # one series per GPU, held or not
    return {labels["gpu"]: labels for labels, _ in rows}


def _pods(series: dict[str, dict[str, str]]) -> dict[str, tuple[str | None, ...]]:
    return {gpu: (s.get("namespace"), s.get("pod"), s.get("container")) for gpu, s in series.items()}


def test_pod_namespace_and_container_go_on_the_series_of_the_gpus_the_container_holds() -> None:
    kubelet = Kubelet([_gpu("trainer-0", UUIDS[1], UUIDS[3]), _gpu("infer", f"{UUIDS[2]}::0", ns="serve"),
                       ("ml", "cpu-only", {"main": [("cpu", ["1"])]})])
    attributor = _attributor(kubelet)
    attributor.poll(100.0)
    assert _pods(_series(attributor, 101.0)) == {
        "0": (None, None, None), "1": ("ml", "trainer-0", "main"), "2": ("serve", "infer", "main"),
        "3": ("ml", "trainer-0", "main")}


def test_the_last_answer_labels_series_until_it_is_stale_then_they_go_out_without(
        caplog: pytest.LogCaptureFixture) -> None:
    kubelet = Kubelet([_gpu("trainer-0", UUIDS[0])])
    attributor = _attributor(kubelet)
    attributor.poll(100.0)
    kubelet.answer = None  # the kubelet restarts
    with caplog.at_level(logging.INFO, logger="gpudash.exporter"):
        for t in (105.0, 110.0, 115.0, 120.0):
            attributor.poll(t)
        assert _series(attributor, 100.0 + CONFIG.stale_after)["0"]["pod"] == "trainer-0"
        assert "pod" not in _series(attributor, 100.1 + CONFIG.stale_after)["0"]
        kubelet.answer = list_response([_gpu("trainer-1", UUIDS[0])])
        attributor.poll(130.0)
        assert _series(attributor, 131.0)["0"]["pod"] == "trainer-1"
    messages = [r.getMessage() for r in caplog.records if r.name == "gpudash.exporter"]
    failed = [m for m in messages if "List failed" in m]
    assert len(failed) == 1 and "UNAVAILABLE: connection refused" in failed[0] and "at most 25s" in failed[0]
    assert sum("answers again" in m for m in messages) == 1
    assert sum("without pod labels" in m and "over 25s old" in m for m in messages) == 1


def test_a_kubelet_that_never_answers_costs_no_series_and_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    kubelet = Kubelet([])
    kubelet.answer = None
    attributor = _attributor(kubelet)
    with caplog.at_level(logging.WARNING, logger="gpudash.exporter"):
        for t in range(0, 60, 5):
            attributor.poll(float(t))
        series = _series(attributor, 60.0)
    assert all("pod" not in s for s in series.values())
    assert sum("List failed" in r.getMessage() for r in caplog.records) == 1


def test_an_answer_that_does_not_decode_is_an_outage_not_a_crash(caplog: pytest.LogCaptureFixture) -> None:
    kubelet = Kubelet([_gpu("p", UUIDS[0])])
    attributor = _attributor(kubelet)
    attributor.poll(0.0)
    kubelet.answer = b"\x0a\x05ab"
    with caplog.at_level(logging.WARNING, logger="gpudash.exporter"):
        attributor.poll(5.0)
    assert "5 bytes announced" in caplog.text
    assert _series(attributor, 6.0)["0"]["pod"] == "p"  # the last good answer, still fresh


def test_pod_labels_come_sanitised_and_allowlisted_and_finished_pods_label_nothing() -> None:
    kubelet = Kubelet([_gpu("w-0", UUIDS[0]), _gpu("old", UUIDS[1])])
    pods = [PodInfo("1a2b-3c", "w-0", "ml", "Running", {"training.kubeflow.org/job-name": "llama",
                                                         "training.kubeflow.org/replica-index": "0", "app": "x"}),
            PodInfo("9f", "old", "ml", "Succeeded", {})]
    config = KubeletConfig(pod_labels=True, label_allowlist=(r"^training\.kubeflow\.org/",))
    attributor = _attributor(kubelet, config, pod_lister=lambda timeout: pods)
    attributor.poll(0.0)
    series = _series(attributor, 1.0)
    assert series["0"]["training_kubeflow_org_job_name"] == "llama"
    assert series["0"]["training_kubeflow_org_replica_index"] == "0" and "app" not in series["0"]
    assert "pod" not in series["1"]  # an older kubelet still lists a finished pod's devices


def test_pod_uid_is_added_when_asked_and_the_api_server_knows_the_pod() -> None:
    kubelet = Kubelet([_gpu("w-0", UUIDS[0]), _gpu("unknown", UUIDS[1])])
    pods = [PodInfo("1a2b3c4d-0000-4000-8000-00000000000a", "w-0", "ml", "Running", {"app": "x"})]
    attributor = _attributor(kubelet, KubeletConfig(pod_uid=True), pod_lister=lambda timeout: pods)
    attributor.poll(0.0)
    series = _series(attributor, 1.0)
    assert series["0"]["pod_uid"] == pods[0].uid and "app" not in series["0"]
    assert series["1"]["pod"] == "unknown" and "pod_uid" not in series["1"]
    plain = _attributor(kubelet, pod_lister=lambda timeout: pods)
    plain.poll(0.0)
    assert "pod_uid" not in _series(plain, 1.0)["0"]


def test_without_pod_labels_enabled_the_api_still_names_pods_by_uid() -> None:
    pods = [PodInfo("1a2b3c4d-0000-4000-8000-00000000000a", "w-0", "ml", "Running", {"app": "x"})]
    attributor = _attributor(Kubelet([_gpu("w-0", UUIDS[0])]), pod_lister=lambda timeout: pods)
    assert attributor.pod_by_uid(pods[0].uid) is None  # nothing read yet
    attributor.poll(0.0)
    assert "app" not in _series(attributor, 1.0)["0"]
    assert attributor.pod_by_uid("1a2b3c4d_0000_4000_8000_00000000000A") == (("pod", "w-0"), ("namespace", "ml"))
    assert attributor.pod_by_uid("ffff") is None


def test_the_api_server_is_asked_when_a_pod_is_new_or_the_list_is_old_not_every_poll(
        caplog: pytest.LogCaptureFixture) -> None:
    kubelet = Kubelet([_gpu("w-0", UUIDS[0])])
    asked: list[float] = []
    failing = [False]

    def pod_lister(timeout: float) -> list[PodInfo]:
        asked.append(timeout)
        if failing[0]:
            raise OSError("HTTP Error 403: Forbidden")
        return [PodInfo("u0", "w-0", "ml", "Running", {}), PodInfo("u1", "w-1", "ml", "Running", {})]

    attributor = _attributor(kubelet, pod_lister=pod_lister)
    for t in (0.0, 5.0, 10.0):
        attributor.poll(t)
    assert len(asked) == 1
    kubelet.answer = list_response([_gpu("w-0", UUIDS[0]), _gpu("w-2", UUIDS[1])])
    attributor.poll(15.0)
    assert len(asked) == 2  # w-2 is new
    attributor.poll(20.0)
    assert len(asked) == 3  # still unknown to the API server: asked again, at most once an interval
    kubelet.answer = list_response([_gpu("w-0", UUIDS[0])])
    attributor.poll(25.0)
    assert len(asked) == 3
    failing[0] = True
    with caplog.at_level(logging.WARNING, logger="gpudash.exporter"):
        attributor.poll(80.0)
        attributor.poll(145.0)
    assert len(asked) == 5 and caplog.text.count("403: Forbidden") == 1
    assert attributor.pod_by_uid("u1") == (("pod", "w-1"), ("namespace", "ml"))  # the last good list stays


def test_mig_ids_are_resolved_on_the_kubelet_thread_once_per_answer_not_per_sweep() -> None:
    mig = "MIG-a1b2c3d4-0000-4000-8000-000000000001"
    asked: list[str] = []

    def mig_parent(uuid: str) -> str | None:
        asked.append(uuid)
        return UUIDS[2]

    attributor = _attributor(Kubelet([_gpu("slice", mig, resource="nvidia.com/mig-1g.18gb")]), mig_parent=mig_parent)
    attributor.poll(0.0)
    for t in (1.0, 2.0, 3.0):
        assert _series(attributor, t)["2"]["pod"] == "slice"
    assert asked == [mig]


def test_a_wrong_id_type_is_named_once(caplog: pytest.LogCaptureFixture) -> None:
    attributor = _attributor(Kubelet([_gpu("gke", "nvidia0")]))
    with caplog.at_level(logging.WARNING, logger="gpudash.exporter"):
        attributor.poll(0.0)
        attributor.poll(5.0)
    assert caplog.text.count("try --kubernetes-gpu-id-type device-name") == 1
    device_name = _attributor(Kubelet([_gpu("gke", "nvidia0")]), KubeletConfig(id_type="device-name"))
    device_name.poll(0.0)
    assert _series(device_name, 1.0)["0"]["pod"] == "gke"  # simulated GPU 0 is /dev/nvidia0


def test_stale_after_is_three_intervals_and_one_timeout() -> None:
    assert KubeletConfig(interval=0.5, timeout=1.0).stale_after == 2.5


# -- the command line -----------------------------------------------------------------------------


def test_kubernetes_without_grpcio_is_one_line_naming_the_extra(monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
    monkeypatch.setitem(sys.modules, "grpc", None)  # what an install without the extra looks like to import
    with pytest.raises(ExporterError, match=r"pip install 'gpudash\[kubernetes\]'"):
        load_grpc()
    done = gpudash("exporter", "--simulate", "1", "--kubernetes", cwd=root, env={"NODE_NAME": None})
    assert done.code == 2
    assert done.err.endswith("gpudash: --kubernetes needs grpcio, which is not installed: "
                             "pip install 'gpudash[kubernetes]'\n"), done.err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kubernetes-enable-pod-labels"], "gpudash: --kubernetes-enable-pod-labels needs --kubernetes\n"),
        (["--kubernetes-gpu-id-type", "device-name"], "gpudash: --kubernetes-gpu-id-type needs --kubernetes\n"),
        (["--kubernetes", "--kubernetes-pod-label-allowlist-regex", "ok,(open"],
         "gpudash: --kubernetes-pod-label-allowlist-regex '(open': not a regex: "),
        (["--kubernetes", "--pod-resources-timeout", "soon"], "gpudash: --pod-resources-timeout 'soon': expected"),
        (["--kubernetes", "--pod-resources-interval", "10ms"], "gpudash: --pod-resources-interval '10ms': must be"),
        (["--kubernetes", "--kubernetes-enable-pod-labels", "--max-labels-per-series", "20"],
         "gpudash: --max-labels-per-series 20: a series may need 21 labels (the exporter's own labels and one pod "
         "label, with __name__ and the scrape's job, instance, cluster and rack); give at least 21\n"),
        (["--kubernetes", "--max-labels-per-series", "12"], "gpudash: --max-labels-per-series 12: a series may need "
         "20 labels (the exporter's own labels"),
        (["--max-labels-per-series", "40"], "gpudash: --max-labels-per-series needs --kubernetes\n"),
        (["--kubernetes-enable-dra"], "gpudash: --kubernetes-enable-dra needs --kubernetes\n"),
        (["--kubernetes-virtual-gpus"], "gpudash: --kubernetes-virtual-gpus needs --kubernetes\n"),
        (["--kubernetes", "--kubernetes-enable-dra", "--kubernetes-enable-pod-labels", "--max-labels-per-series",
          "27"], "gpudash: --max-labels-per-series 27: a series may need 28 labels"),
    ],
)
def test_bad_kubernetes_flags_are_one_line_and_exit_2(root: Path, args: list[str], message: str) -> None:
    done = gpudash("exporter", "--simulate", "1", *args, cwd=root)
    assert done.code == 2
    assert done.err.startswith(message) and done.err.count("\n") == 1, done.err
