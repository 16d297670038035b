"""Comparing a dashboard in the schema Grafana stores it in, and the schema gpudash writes: pure, no server."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from grafana_standin.testkit import THRESHOLDS, make_dashboard
from support.paths import ROOT

from gpudash.catalog import profile
from gpudash.compare.content import MARKER_KEY, marked, marker_annotations
from gpudash.compare.content_v2 import canonical_v2, v2_only
from gpudash.config.loading import load_settings
from gpudash.errors import ConfigError
from gpudash.schema_v2.resource import to_v2 as gpudash_to_v2
from gpudash.sync import schema as schemas
from gpudash.sync.plan import Action, RemoteDashboard, plan_dashboard
from gpudash.sync.remote_apis import remote_of, resource_body
from gpudash.sync.schema import Schema, choose
from gpudash.sync.session import own_conversion
from gpudash.sync.stored import hash_in, storage_of, written_annotations

SITE = "lab-a1b2c3"


def to_v2(v1: dict[str, Any]) -> dict[str, Any]:
    """A small v1 -> v2 conversion by hand (@grafana/schema 13.2 v2 shapes): one Panel element per panel, a grid."""
    elements, items = {}, []
    for panel in v1.get("panels", []):
        if panel.get("type") == "row":
            continue
        key = f"panel-{panel['id']}"
        elements[key] = {"kind": "Panel", "spec": {
            "id": panel["id"], "title": panel["title"],
            "vizConfig": {"kind": "VizConfig", "group": panel["type"], "version": str(panel.get("pluginVersion", "")),
                          "spec": {"options": copy.deepcopy(panel.get("options", {})),
                                   "fieldConfig": copy.deepcopy(panel["fieldConfig"])}}}}
        pos = panel["gridPos"]
        items.append({"kind": "GridLayoutItem", "spec": {"x": pos["x"], "y": pos["y"], "width": pos["w"],
                                                         "height": pos["h"],
                                                         "element": {"kind": "ElementReference", "name": key}}})
    return {"apiVersion": "dashboard.grafana.app/v2", "kind": "Dashboard", "metadata": {"name": v1["uid"]},
            "spec": {"title": v1["title"], "elements": elements,
                     "layout": {"kind": "GridLayout", "spec": {"items": items}}}}


WITH_V2 = Schema("v1", to_v2)
WRITES_V2 = Schema("v2", to_v2)


def as_stored(local: dict[str, Any], stored: str, written: str = "v1", spec: dict[str, Any] | None = None,
              site: str = SITE, failed: bool = False) -> RemoteDashboard:
    """Grafana's copy after gpudash wrote `local` as `written`, read at v1, stored as `stored` (`spec`)."""
    pushed = marked(local, "abc", site)
    annotations = {**marker_annotations(pushed[MARKER_KEY]), "grafana.app/folder": "gpu"}
    stored_spec = spec if spec is not None else (to_v2(local)["spec"] if stored == "v2" else local)
    annotations.update(written_annotations(written, to_v2(local)["spec"] if written == "v2" else local))
    item: dict[str, Any] = {"apiVersion": "dashboard.grafana.app/v1",
                            "metadata": {"name": local["uid"], "resourceVersion": "7", "generation": 3,
                                         "annotations": annotations},
                            "spec": {"title": local["title"]}, "status": {}}
    if stored == "v2" or failed:
        item["status"] = {"conversion": {"failed": failed, "storedVersion": "v2", "error": "lost" if failed else ""}}
    found = remote_of(item)
    assert found.storage is not None
    return replace(found, storage=replace(found.storage, spec=None if failed else copy.deepcopy(stored_spec)))


def person_saved_v2(local: dict[str, Any], threshold: float | None = None) -> dict[str, Any]:
    """What 13's editor stores for `local`: v2, each panel stamped with the plugin version (and moved, if asked)."""
    saved = copy.deepcopy(local)
    for panel in saved["panels"]:
        panel["pluginVersion"] = "13.2.0"
        if threshold is not None and "fieldConfig" in panel:
            panel["fieldConfig"]["defaults"]["thresholds"]["steps"][1]["value"] = threshold
    return to_v2(saved)["spec"]


def in_tabs(spec: dict[str, Any]) -> dict[str, Any]:
    tabbed = copy.deepcopy(spec)
    tabbed["layout"] = {"kind": "TabsLayout", "spec": {"tabs": [
        {"kind": "TabsLayoutTab", "spec": {"title": "GPUs", "layout": spec["layout"]}},
        {"kind": "TabsLayoutTab", "spec": {"title": "Jobs",
                                           "conditionalRendering": {"kind": "ConditionalRenderingGroup"},
                                           "layout": {"kind": "AutoGridLayout", "spec": {"items": []}}}}]}}
    return tabbed


def test_an_unchanged_v2_save_of_a_v1_push_is_unchanged() -> None:
    local = make_dashboard("a", "A")
    step = plan_dashboard(local, as_stored(local, "v2", spec=person_saved_v2(local)), "gpu", SITE, schema=WITH_V2)
    assert step.action is Action.UNCHANGED and not step.writes


def test_a_changed_threshold_saved_as_v2_is_drift_and_force_names_the_v2_structure() -> None:
    local = make_dashboard("a", "A")
    remote = as_stored(local, "v2", spec=in_tabs(person_saved_v2(local, 97)))
    step = plan_dashboard(local, remote, "gpu", SITE, schema=WITH_V2)
    assert step.action is Action.DRIFTED
    assert "saved as v2 in Grafana's editor since gpudash pushed it as v1" in step.reason
    assert "a v1 write would replace its v2 storage (2 tabs ('GPUs', 'Jobs'), 1 auto grid" in step.reason
    forced = plan_dashboard(local, remote, "gpu", SITE, force=True, schema=WITH_V2)
    assert forced.action is Action.UPDATE and forced.forced
    assert "replaces its v2 storage (2 tabs ('GPUs', 'Jobs'), 1 auto grid, conditional rendering on 1" in forced.reason


def test_a_v2_save_cannot_be_compared_without_a_v2_conversion() -> None:
    local = make_dashboard("a", "A")
    step = plan_dashboard(local, as_stored(local, "v2", spec=person_saved_v2(local)), "gpu", SITE)
    assert step.action is Action.DRIFTED and "gpudash cannot write v2 to compare it there" in step.reason


def test_v1_is_not_written_over_v2_even_when_the_v2_is_what_gpudash_wrote() -> None:
    old = make_dashboard("a", "A")
    local = make_dashboard("a", "A", threshold=90.0)
    remote = as_stored(old, "v2", written="v2")
    assert plan_dashboard(local, remote, "gpu", SITE, schema=WRITES_V2).action is Action.UPDATE
    refused = plan_dashboard(local, remote, "gpu", SITE, schema=WITH_V2)
    assert refused.action is Action.DRIFTED and "as gpudash wrote it; gpudash writes v1 now" in refused.reason


def test_a_v2_dashboard_changed_after_gpudash_wrote_it_is_drift() -> None:
    local = make_dashboard("a", "A")
    remote = as_stored(local, "v2", written="v2", spec=person_saved_v2(local, 97))
    step = plan_dashboard(local, remote, "gpu", SITE, schema=WRITES_V2)
    assert step.action is Action.DRIFTED and "changed in Grafana since gpudash pushed it as v2" in step.reason


def test_a_failed_conversion_is_never_overwritten_unforced_and_others_dashboards_never() -> None:
    local = make_dashboard("a", "A")
    failed = plan_dashboard(local, as_stored(local, "v2", failed=True), "gpu", SITE, schema=WITH_V2)
    assert failed.action is Action.DRIFTED and "could not convert it from v2 (lost" in failed.reason
    theirs = as_stored(local, "v2", spec=person_saved_v2(local), site="other-site")
    assert plan_dashboard(local, theirs, "gpu", SITE, force=True, schema=WITH_V2).action is Action.CONFLICT


def test_a_moved_v2_dashboard_is_not_unchanged() -> None:
    local = make_dashboard("a", "A")
    step = plan_dashboard(local, as_stored(local, "v2", spec=person_saved_v2(local)), "elsewhere", SITE,
                          schema=WITH_V2)
    assert step.action is Action.DRIFTED and "a v1 write would replace" in step.reason


def test_canonical_v2_undoes_what_the_editor_fills_in_but_not_a_threshold() -> None:
    local = make_dashboard("a", "A")
    assert canonical_v2(person_saved_v2(local)) == canonical_v2(to_v2(local)["spec"])
    assert canonical_v2(person_saved_v2(local, 97)) != canonical_v2(to_v2(local)["spec"])
    assert hash_in("v2", person_saved_v2(local)) == hash_in("v2", to_v2(local)["spec"])


def test_v2_only_names_tabs_auto_grids_repeats_and_conditional_rendering() -> None:
    spec = person_saved_v2(make_dashboard("a", "A"))
    assert v2_only(spec) == []
    tabbed = in_tabs(spec)
    tabbed["layout"]["spec"]["tabs"][1]["spec"]["layout"]["spec"]["items"] = [
        {"kind": "AutoGridLayoutItem", "spec": {"element": {"kind": "ElementReference", "name": "panel-2"},
                                                "repeat": {"mode": "variable", "value": "gpu"}}}]
    assert v2_only(tabbed) == ["2 tabs ('GPUs', 'Jobs')", "1 auto grid (1 repeat)",
                               "conditional rendering on 1 of its rows, tabs or items"]


def test_a_write_records_the_schema_its_hash_and_always_the_resource_version_it_read() -> None:
    local = make_dashboard("a", "A")
    body = {"dashboard": marked(local, "abc", SITE), "message": "m", "folderUid": "gpu"}
    read = as_stored(local, "v2", spec=person_saved_v2(local))
    v1 = resource_body(body, read, "v1", WITH_V2)
    assert v1["metadata"]["resourceVersion"] == "7" and v1["spec"]["panels"]
    assert v1["metadata"]["annotations"]["gpudash/schema"] == "v1"
    assert "gpudash/contentHashV2" not in v1["metadata"]["annotations"]
    v2 = resource_body(body, read, "v2", WRITES_V2)
    assert v2["apiVersion"] == "dashboard.grafana.app/v2" and "elements" in v2["spec"]
    assert v2["metadata"]["annotations"]["gpudash/schema"] == "v2"
    assert v2["metadata"]["annotations"]["gpudash/contentHashV2"] == hash_in("v2", to_v2(local)["spec"])
    with pytest.raises(Exception, match="no resourceVersion; not written blindly"):
        resource_body(body, replace(read, resource_version=""), "v1", WITH_V2)


def test_the_schema_follows_the_setting_and_what_grafana_serves() -> None:
    schemas.use_v2_converter(to_v2)
    try:
        assert choose("auto", "13.2.0", True).writes == "v2"
        assert choose("auto", "13.2.0", False).writes == "v1"
        assert choose("auto", "12.4.0", True).writes == "v1"
        assert choose("v1", "13.2.0", True).writes == "v1"
        assert choose("v2", "13.0.0", True).writes == "v2"
        with pytest.raises(ConfigError, match=r"does not serve dashboard\.grafana\.app/v2"):
            choose("v2", "12.1.0", False)
    finally:
        schemas.use_v2_converter(None)
    assert choose("auto", "13.2.0", True).writes == "v1"  # no v1 -> v2 conversion in this build
    with pytest.raises(ConfigError, match="no v1 -> v2 dashboard conversion"):
        choose("v2", "13.2.0", True)


def test_a_session_writes_v2_with_gpudash_own_conversion_for_the_site_profile(tmp_path: Path) -> None:
    site = tmp_path / "gpudash.yaml"
    site.write_text("profile: nvidia_smi\n")
    own = own_conversion(load_settings(THRESHOLDS, site))
    node = json.loads((ROOT / "dashboards" / "json" / "gpudash-node.json").read_text())
    chosen = choose("auto", "13.2.0", True, own=own)
    assert chosen.writes == "v2" and chosen.converter is own
    assert chosen.spec_of(node, "v2") == gpudash_to_v2(node, profile=profile("nvidia_smi"))["spec"]
    assert chosen.spec_of(node, "v2") != gpudash_to_v2(node, profile=profile("dcgm"))["spec"]  # the site's profile
    assert choose("v2", "13.2.0", True, own=own).writes == "v2"
    assert choose("auto", "12.4.0", True, own=own).writes == "v1"
    schemas.use_v2_converter(to_v2)
    try:
        assert choose("auto", "13.2.0", True, own=own).converter is to_v2  # one installed comes first
    finally:
        schemas.use_v2_converter(None)


def test_the_storage_comes_from_status_conversion_and_the_recorded_schema() -> None:
    annotations = {"gpudash/schema": "v2", "gpudash/contentHashV2": "sha256:ab"}
    at_v2 = storage_of({"apiVersion": "dashboard.grafana.app/v2", "spec": {"title": "A"}, "status": {}},
                       annotations, None)
    assert (at_v2.stored, at_v2.read, at_v2.written, at_v2.spec) == ("v2", "v2", "v2", {"title": "A"})
    assert at_v2.hashes == {"v2": "sha256:ab"} and not at_v2.person_saved
    converted = storage_of({"apiVersion": "dashboard.grafana.app/v1", "spec": {"title": "A"},
                            "status": {"conversion": {"failed": False, "storedVersion": "v2beta1"}}}, {}, "sha256:cd")
    assert (converted.stored, converted.read, converted.written) == ("v2", "v1", "v1")
    assert converted.spec is None and converted.person_saved and converted.compared_as_stored  # never the converted
    from_api = storage_of({"apiVersion": "dashboard.grafana.app/v1", "spec": {"title": "A"},
                           "status": {"conversion": {"failed": False, "storedVersion": "v0alpha1"}}}, {}, "h")
    assert from_api.stored == "v1" and from_api.spec == {"title": "A"} and not from_api.compared_as_stored
    failed = storage_of({"apiVersion": "dashboard.grafana.app/v1", "spec": None,
                         "status": {"conversion": {"failed": True, "storedVersion": "v2", "error": "data loss"}}},
                        {}, "h")
    assert failed.failed == "data loss" and failed.spec is None and failed.compared_as_stored


def test_with_v2_chosen_a_v1_dashboard_gpudash_wrote_is_rewritten_as_v2_and_a_persons_v1_is_kept() -> None:
    local = make_dashboard("a", "A")
    ours = as_stored(local, "v1")
    ours = replace(ours, storage=replace(ours.storage, read="v2")) if ours.storage is not None else ours
    step = plan_dashboard(local, ours, "gpu", SITE, schema=WRITES_V2)
    assert step.action is Action.UPDATE and not step.forced and "written as v2 now" in step.reason
    assert plan_dashboard(local, ours, "gpu", SITE, schema=WITH_V2).action is Action.UNCHANGED
    edited = copy.deepcopy(local)
    edited["description"] = "a person's"
    theirs = as_stored(local, "v1", spec=edited)
    theirs = replace(theirs, storage=replace(theirs.storage, read="v2")) if theirs.storage is not None else theirs
    assert plan_dashboard(local, theirs, "gpu", SITE, schema=WRITES_V2).action is Action.DRIFTED
