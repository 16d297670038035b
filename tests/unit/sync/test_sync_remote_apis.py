"""The /apis translation: resources in, the plan's view out; a legacy save body in, a resource out."""

from __future__ import annotations

from typing import Any

from gpudash.compare.content import MARKER_KEY, marked, marker_annotations, provenance
from gpudash.sync.remote_apis import remote_of, resource_body, served_version


def resource(annotations: dict[str, str], spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"kind": "Dashboard", "apiVersion": "dashboard.grafana.app/v1",
            "metadata": {"name": "gpu-node", "resourceVersion": "1758777451428472", "generation": 4,
                         "annotations": annotations},
            "spec": spec or {"title": "GPU node", "schemaVersion": 42}}


def test_discovery_prefers_v1_then_v1beta1() -> None:
    listed = {"versions": [{"version": "v0alpha1"}, {"version": "v1beta1"}, {"version": "v1"}]}
    assert served_version(listed) == "v1"
    assert served_version({"versions": [{"version": "v1beta1"}, {"version": "v0alpha1"}]}) == "v1beta1"
    assert served_version({"versions": [{"version": "v0alpha1"}]}) == ""
    assert served_version("<html>") == ""


def test_a_resource_reads_as_the_plan_reads_a_dashboard() -> None:
    marker = marked({"uid": "gpu-node", "title": "GPU node"}, "abc", "site-a")[MARKER_KEY]
    remote = remote_of(resource({"grafana.app/folder": "gpu", "grafana.app/updatedBy": "user:alice",
                                 **marker_annotations(marker)}))
    assert (remote.uid, remote.version, remote.folder_uid, remote.updated_by) == ("gpu-node", 4, "gpu", "user:alice")
    assert remote.resource_version == "1758777451428472"
    assert remote.dashboard["uid"] == "gpu-node" and remote.dashboard[MARKER_KEY] == marker
    assert remote_of(resource({})).folder_uid == "" and MARKER_KEY not in remote_of(resource({})).dashboard


def test_a_marker_in_the_json_from_before_apis_still_counts() -> None:
    old = {"contentHash": "sha256:00", "commit": "abc", "site": "site-a", "uid": "gpu-node"}
    remote = remote_of(resource({}, {"title": "GPU node", MARKER_KEY: old}))
    assert remote.dashboard[MARKER_KEY] == old


def test_an_update_keeps_other_annotations_and_sends_the_resource_version() -> None:
    read = remote_of(resource({"grafana.app/folder": "old", "grafana.app/createdBy": "user:alice",
                               "grafana.app/message": "older message", "team/owner": "ml-platform"}))
    body = {"dashboard": marked({"uid": "gpu-node", "title": "GPU node", "id": 3, "version": 4}, "abc", "site-a"),
            "message": "gpudash for site site-a", "folderUid": "gpu"}
    written = resource_body(body, read, "v1")
    metadata, spec = written["metadata"], written["spec"]
    assert metadata["name"] == "gpu-node" and metadata["resourceVersion"] == "1758777451428472"
    annotations = metadata["annotations"]
    assert annotations["team/owner"] == "ml-platform" and "grafana.app/createdBy" not in annotations
    assert annotations["grafana.app/folder"] == "gpu" and annotations["grafana.app/message"] == body["message"]
    assert annotations["gpudash/site"] == "site-a" and annotations["grafana.app/managedBy"] == "kubectl"
    assert spec == {"title": "GPU node"}  # no id, uid, version or marker in the spec
    created = resource_body({**body, "folderUid": ""}, None, "v1")
    assert "resourceVersion" not in created["metadata"]
    assert "grafana.app/folder" not in created["metadata"]["annotations"]


def test_a_dashboard_stored_as_v2_or_not_converted_counts_as_edited() -> None:
    pushed = marked({"uid": "gpu-node", "title": "GPU node"}, "abc", "site-a")
    annotations = marker_annotations(pushed[MARKER_KEY])
    as_pushed = resource(annotations, {"title": "GPU node"})
    assert provenance(remote_of(as_pushed).dashboard) == "pushed"
    v2 = {**as_pushed, "status": {"conversion": {"failed": False, "storedVersion": "v2beta1"}}}
    assert provenance(remote_of(v2).dashboard) == "edited"
    failed = {**as_pushed, "spec": None, "status": {"conversion": {"failed": True, "storedVersion": "v2",
                                                                  "error": "data loss"}}}
    assert provenance(remote_of(failed).dashboard) == "edited"
    from_api = {**as_pushed, "status": {"conversion": {"failed": False, "storedVersion": "v0alpha1"}}}
    assert provenance(remote_of(from_api).dashboard) == "pushed"  # saved through /api: converted on read only
