"""Pod labels (allowlist on raw keys, sanitising, collisions) and the API server's pod list and access."""

from __future__ import annotations

import logging
import urllib.parse
from pathlib import Path

import pytest

from gpudash.exporter.attribution.pods import (
    ApiAccess,
    PodInfo,
    PodLabelFilter,
    api_access,
    parse_pod_list,
    pods_url,
    sanitize,
)


@pytest.mark.parametrize(
    ("key", "name"),
    [
        ("training.kubeflow.org/job-name", "training_kubeflow_org_job_name"),
        ("jobset.sigs.k8s.io/jobset-name", "jobset_sigs_k8s_io_jobset_name"),
        ("batch.kubernetes.io/job-completion-index", "batch_kubernetes_io_job_completion_index"),
        ("app", "app"),
        ("Team_1", "Team_1"),
    ],
)
def test_keys_are_sanitised_as_dcgm_exporter_does(key: str, name: str) -> None:
    assert sanitize(key) == name


def test_the_allowlist_matches_raw_keys_and_empty_lets_all_through() -> None:
    raw = {"training.kubeflow.org/job-name": "llama", "training.kubeflow.org/replica-index": "3", "app": "x"}
    assert PodLabelFilter([r"^training\.kubeflow\.org/job-name$"]).labels(raw) == (
        ("training_kubeflow_org_job_name", "llama"),)
    # The sanitised spelling is not what the allowlist sees.
    assert PodLabelFilter([r"^training_kubeflow_org_job_name$"]).labels(raw) == ()
    assert PodLabelFilter([r"^app$", r"replica"]).labels(raw) == (
        ("app", "x"), ("training_kubeflow_org_replica_index", "3"))
    assert [name for name, _ in PodLabelFilter().labels(raw)] == [
        "app", "training_kubeflow_org_job_name", "training_kubeflow_org_replica_index"]


def test_collisions_with_fixed_labels_bad_names_and_each_other_are_left_out_and_warned_once(
        caplog: pytest.LogCaptureFixture) -> None:
    raw = {"pod": "mine", "gpu": "7", "UUID": "u", "hpc_job": "1", "job": "j", "9lives": "x", "__meta": "y",
           "a.b": "1", "a/b": "2", "team": "ml"}
    labels_filter = PodLabelFilter()
    with caplog.at_level(logging.WARNING, logger="gpudash.exporter"):
        assert labels_filter.labels(raw) == (("team", "ml"),)
        assert labels_filter.labels(raw) == (("team", "ml"),)
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 8, warnings
    assert any("'a.b' and 'a/b': both become 'a_b'" in w for w in warnings)
    assert any("'pod': becomes 'pod', a label the exporter or Prometheus sets itself" in w for w in warnings)
    assert any("'9lives'" in w and "not a Prometheus label name" in w for w in warnings)


def test_a_pod_list_gives_uid_names_phase_and_labels() -> None:
    data = {"kind": "PodList", "items": [
        {"metadata": {"name": "w-0", "namespace": "ml", "uid": "1f2e-3d", "labels": {"app": "t"}},
         "status": {"phase": "Running"}},
        {"metadata": {"name": "done", "namespace": "ml", "uid": "9a"}, "status": {"phase": "Succeeded"}},
    ]}
    pods = parse_pod_list(data)
    assert pods[0] == PodInfo("1f2e-3d", "w-0", "ml", "Running", {"app": "t"})
    assert not pods[0].finished and pods[1].finished and pods[1].labels == {}


@pytest.mark.parametrize("data", [[], {"kind": "Status"}, {"items": "no"}])
def test_an_answer_that_is_no_pod_list_is_an_error(data: object) -> None:
    with pytest.raises(ValueError, match="not a pod list"):
        parse_pod_list(data)


def test_in_cluster_access_from_the_service_environment_and_account(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("t0ken\n")
    (tmp_path / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    access = api_access(None, tmp_path, "gpu-node-7", env)
    assert access == ApiAccess("https://10.96.0.1:443", "gpu-node-7", tmp_path / "token", tmp_path / "ca.crt")
    v6 = api_access(None, tmp_path, "n", {"KUBERNETES_SERVICE_HOST": "fd00::1"})
    assert isinstance(v6, ApiAccess) and v6.url == "https://[fd00::1]:443"
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(pods_url(access)).query)
    assert query == {"fieldSelector": ["spec.nodeName=gpu-node-7"], "resourceVersion": ["0"]}


@pytest.mark.parametrize(
    ("url", "node", "env", "why"),
    [
        (None, None, {"KUBERNETES_SERVICE_HOST": "10.96.0.1"}, "NODE_NAME is not set"),
        (None, "n", {}, "not running in a pod"),
        ("https://api:6443", "n", {}, "no CA certificate at"),
    ],
)
def test_without_api_access_the_reason_is_one_line(tmp_path: Path, url: str | None, node: str | None,
                                                   env: dict[str, str], why: str) -> None:
    reason = api_access(url, tmp_path, node, env)
    assert isinstance(reason, str) and why in reason and "\n" not in reason


def test_a_plain_http_url_needs_no_ca_and_a_missing_token_sends_none(tmp_path: Path) -> None:
    assert api_access("http://127.0.0.1:8001/", tmp_path, "n", {}) == ApiAccess("http://127.0.0.1:8001", "n")
