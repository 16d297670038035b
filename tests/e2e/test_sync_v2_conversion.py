"""Sync with gpudash's own v1 -> v2 conversion, on the generated dashboards (dashboards/json): `auto` pushes
v2 to a Grafana 13 that serves it, the same spec as the committed dashboards/v2 files, and v1 to a Grafana
that serves no v2. No other conversion is installed here, so what is compared is what gpudash writes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from grafana_standin import StandIn
from grafana_standin.migrate import set_threshold_v2
from grafana_standin.testkit import GrafanaUnderTest, write_set
from support.paths import ROOT

from gpudash.sync import schema

V1 = "/apis/dashboard.grafana.app/v1/namespaces/default/dashboards"
V2 = "/apis/dashboard.grafana.app/v2/namespaces/default/dashboards"
GENERATED = ROOT / "dashboards" / "json"
COMMITTED_V2 = ROOT / "dashboards" / "v2"


def generated() -> list[dict[str, Any]]:
    return [json.loads(path.read_text()) for path in sorted(GENERATED.glob("*.json"))]


def committed_spec(uid: str) -> dict[str, Any]:
    return dict(json.loads((COMMITTED_V2 / f"{uid}.json").read_text())["spec"])


def _grafana(tmp_path: Path, version: str) -> Iterator[GrafanaUnderTest]:
    assert schema.v2_converter() is None  # gpudash's own conversion, not one a test installed
    with StandIn(version) as standin:
        grafana = GrafanaUnderTest(standin.url, standin.token, version, tmp_path, standin)
        grafana.site.write_text(grafana.site.read_text() + "  schema: auto\n")
        yield grafana


@pytest.fixture
def grafana13(tmp_path: Path) -> Iterator[GrafanaUnderTest]:
    yield from _grafana(tmp_path, "13.2.0")


def writes(grafana: GrafanaUnderTest) -> list[tuple[str, str]]:
    assert grafana.standin is not None
    return [(method, path) for method, path in grafana.standin.received if method in ("PUT", "POST")]


def stored(grafana: GrafanaUnderTest, uid: str) -> tuple[str, dict[str, Any]]:
    """The version the dashboard is stored in, and its spec as Grafana answers it at that version."""
    assert grafana.standin is not None
    version = grafana.standin.store.dashboards[uid].stored_version
    path = V2 if version == "v2" else V1
    answer = grafana._person().get(f"{grafana.url}{path}/{uid}", timeout=10).json()
    assert "conversion" not in answer["status"], answer["status"]  # read as stored, not converted
    return version, dict(answer["spec"])


def test_auto_pushes_the_generated_dashboards_as_the_committed_v2(grafana13: GrafanaUnderTest) -> None:
    local = generated()
    assert len(local) >= 4
    pushed = grafana13.push(local)
    assert pushed.code == 0, pushed.text
    assert "schema v2" in pushed.out.splitlines()[0] and f"{len(local)} created" in pushed.out
    dashboard_writes = [(m, p) for m, p in writes(grafana13) if "/dashboards" in p]
    assert {p.rpartition("/")[0] if m == "PUT" else p for m, p in dashboard_writes} == {V2}, dashboard_writes
    assert len(dashboard_writes) == len(local)
    for item in local:
        version, spec = stored(grafana13, item["uid"])
        assert version == "v2"
        assert spec == committed_spec(item["uid"])
    assert grafana13.standin is not None
    grafana13.standin.reset_log()
    again = grafana13.gpudash("sync")
    assert again.code == 0 and again.writes == 0 and f"{len(local)} unchanged" in again.out, again.text
    assert grafana13.standin.writes == 0


def test_an_unchanged_ui_save_is_not_drift_and_a_changed_threshold_is_refused(grafana13: GrafanaUnderTest) -> None:
    local = generated()
    assert grafana13.push(local).code == 0
    uid = "gpudash-node"
    assert grafana13.standin is not None
    grafana13.standin.ui_save(uid, lambda model: None)
    assert grafana13.standin.store.dashboards[uid].stored_version == "v2"
    grafana13.standin.reset_log()
    unchanged = grafana13.gpudash("sync")
    assert unchanged.code == 0 and unchanged.writes == 0, unchanged.text
    assert f"{len(local)} unchanged" in unchanged.out and grafana13.standin.writes == 0

    grafana13.standin.ui_save(uid, lambda model: None, change_v2=lambda spec: set_threshold_v2(spec, 97.0))
    edited = stored(grafana13, uid)[1]
    refused = grafana13.gpudash("sync")
    assert refused.code == 3, refused.text
    assert f"drifted    {uid}" in refused.out and grafana13.standin.writes == 0
    assert stored(grafana13, uid)[1] == edited  # kept
    diff = grafana13.gpudash("diff")
    assert diff.code == 1, diff.text
    assert f"{uid}: compared as Grafana stores it (v2)" in diff.out and '"value": 97' in diff.out

    grafana13.standin.reset_log()
    forced = grafana13.gpudash("sync", "--force")
    assert forced.code == 0 and forced.writes == 1, forced.text
    assert "about to overwrite" in forced.out and '"value": 97' in forced.out
    assert [p for _, p in writes(grafana13)] == [f"{V2}/{uid}"]
    assert stored(grafana13, uid) == ("v2", committed_spec(uid))
    again = grafana13.gpudash("sync")
    assert again.code == 0 and again.writes == 0, again.text


def test_auto_on_a_grafana_without_v2_pushes_v1(tmp_path: Path) -> None:
    for grafana in _grafana(tmp_path, "12.1.0"):
        assert grafana.standin is not None
        local = generated()
        pushed = grafana.push(local)
        assert pushed.code == 0 and "schema v1" in pushed.out.splitlines()[0], pushed.text
        paths = [p for _, p in writes(grafana) if "dashboards" in p]
        assert paths == ["/api/dashboards/db"] * len(local)
        for item in local:
            data = grafana.standin.store.dashboards[item["uid"]].data
            assert data["panels"] and "elements" not in data
        again = grafana.gpudash("sync")
        assert again.code == 0 and again.writes == 0, again.text


def test_a_v1_save_over_the_legacy_api_after_a_v2_push_is_compared_as_stored(grafana13: GrafanaUnderTest) -> None:
    local = generated()
    assert grafana13.push(local).code == 0
    uid = "gpudash-node"
    grafana13.json_model_edit(uid, lambda model: model.update(description="edited through /api"))
    assert grafana13.standin is not None and grafana13.standin.store.dashboards[uid].stored_version != "v2"
    refused = grafana13.gpudash("sync")
    assert refused.code == 3 and f"drifted    {uid}" in refused.out, refused.text
    assert f"{uid}: compared as Grafana stores it (v1)" in refused.out  # read at v1, not the v2 conversion
    assert '-  "description": "edited through /api"' in refused.out


def test_prune_deletes_a_dashboard_pushed_as_v2_that_nobody_changed(grafana13: GrafanaUnderTest) -> None:
    local = generated()
    assert grafana13.push(local).code == 0
    assert grafana13.standin is not None
    kept, gone, saved = local[0], local[1], local[2]
    grafana13.standin.ui_save(saved["uid"], lambda model: None, change_v2=lambda spec: spec.update(title="Mine"))
    write_set(grafana13.local_dir, [kept, *local[3:]])
    pruned = grafana13.gpudash("sync", "--prune")
    assert pruned.code == 0, pruned.text
    assert gone["uid"] not in grafana13.standin.store.dashboards  # as gpudash wrote it: deleted
    assert saved["uid"] in grafana13.standin.store.dashboards and f"kept       {saved['uid']}" in pruned.out
