"""Repositories without a site_id sharing one Grafana: each gets an identity of its own on its first push, so
neither's `sync --prune` (forced or not) touches the other's dashboards; and an install that pushed with the id
gpudash derived from the clusters before keeps its dashboards and folder, as docs/grafana-sync.md says.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from grafana_standin import StandIn
from grafana_standin.testkit import THRESHOLDS, GrafanaUnderTest, Result, make_dashboard, run_gpudash, write_set

from gpudash.config.loading import load_site
from gpudash.config.site import Cluster, ScrapeTarget, Site
from gpudash.config.site_identity import legacy_site_id

pytest_plugins = ["grafana_standin.fixtures"]

OWN_CLUSTERS = "clusters:\n  - name: lab\n    targets:\n      - address: 10.1.0.1:9400\n"


@dataclass
class Repository:
    """A folder gpudash runs in, with its dashboards in json/ and, maybe, a gpudash.yaml (`--site` is never given)."""

    root: Path
    grafana: GrafanaUnderTest
    dashboards: list[dict[str, Any]]

    @property
    def site_file(self) -> Path:
        return self.root / "gpudash.yaml"

    @property
    def site_id(self) -> str:
        return load_site(self.site_file).site_id if self.site_file.exists() else ""

    @property
    def uids(self) -> list[str]:
        return [d["uid"] for d in self.dashboards]

    def keep_only(self, *uids: str) -> None:
        write_set(self.root / "json", [d for d in self.dashboards if d["uid"] in uids])

    def gpudash(self, *args: str) -> Result:
        command, *rest = args
        return run_gpudash([command, "--dir", "json", "--thresholds", THRESHOLDS, "--retries", "1", *rest],
                           self.grafana.env(), cwd=self.root)


def repository(grafana: GrafanaUnderTest, name: str, site_text: str | None = None) -> Repository:
    root = grafana.workdir / name
    root.mkdir()
    if site_text is not None:
        (root / "gpudash.yaml").write_text(site_text)
    dashboards = [make_dashboard(grafana.uid(f"{name}-d{n}"), f"{name} dashboard {n}") for n in range(3)]
    write_set(root / "json", dashboards)
    return Repository(root, grafana, dashboards)


def server(grafana: GrafanaUnderTest) -> StandIn:
    assert grafana.standin is not None
    return grafana.standin


def stored(grafana: GrafanaUnderTest, uids: list[str]) -> dict[str, Any]:
    return {uid: server(grafana).dashboard(uid) for uid in uids}


def folder_of(grafana: GrafanaUnderTest, uid: str) -> str:
    with server(grafana).store.lock:
        return server(grafana).store.dashboards[uid].folder_uid


def move(grafana: GrafanaUnderTest, uid: str, folder: str) -> None:
    """A person moving a dashboard into another folder, content and marker as they were."""
    with server(grafana).store.lock:
        server(grafana).store.dashboards[uid].folder_uid = folder


def test_two_default_config_repositories_never_touch_each_other(standin: GrafanaUnderTest) -> None:
    alpha, beta = repository(standin, "alpha"), repository(standin, "beta")
    for repo in (alpha, beta):
        pushed = repo.gpudash("push")
        assert f"site: wrote `site_id: {repo.site_id}` into gpudash.yaml" in pushed.out
        assert f"as site {repo.site_id}" in pushed.out
        if pushed.code == 4 and server(standin).flavor.folder_title_rule != "none":  # <= 11.2: one 'GPU' folder
            assert repo is beta and "set grafana.folder in gpudash.yaml to a title of this site's own" in pushed.err
            with repo.site_file.open("a") as config:
                config.write("grafana:\n  folder: GPU beta\n")
            pushed = repo.gpudash("push")
        assert pushed.code == 0, pushed.text
    assert alpha.site_id != beta.site_id and legacy_site_id(Site().clusters) not in (alpha.site_id, beta.site_id)
    assert {folder_of(standin, uid) for uid in alpha.uids} == {f"gpudash-{alpha.site_id}"}
    for repo, other in ((alpha, beta), (beta, alpha)):
        move(standin, other.uids[1], f"gpudash-{repo.site_id}")  # one of the other's, in this one's folder now
        repo.keep_only(repo.uids[0])  # its second is in the other's folder; its third is to be pruned
    clone = Repository(standin.workdir / "alpha-clone", standin, alpha.dashboards)  # gpudash.yaml as committed
    shutil.copytree(alpha.root, clone.root)

    for repo, other in ((clone, beta), (beta, clone)):
        for args in (("sync", "--prune"), ("sync", "--prune", "--force")):
            theirs = stored(standin, other.uids)
            pruned = repo.gpudash(*args)
            assert pruned.code == 0, pruned.text
            assert stored(standin, other.uids) == theirs
            kept = next(line for line in pruned.out.splitlines() if line.startswith("kept"))
            assert kept.startswith(f"kept       {other.uids[1]}  {other.dashboards[1]['title']!r}: pushed by gpudash "
                                   f"for site {other.site_id!r}, not this site ({repo.site_id!r})"), pruned.out
            assert kept.endswith("never deleted")
            assert server(standin).dashboard(repo.uids[2]) is None  # the clone is alpha: alpha's is pruned
            assert "site: wrote" not in pruned.out
    assert clone.site_id == alpha.site_id
    for repo in (alpha, beta):
        assert [uid for uid in repo.uids if server(standin).dashboard(uid) is not None] == repo.uids[:2]


def test_the_id_two_default_configs_shared_before_stops_a_new_repository(standin: GrafanaUnderTest) -> None:
    legacy = legacy_site_id(Site().clusters)
    before = repository(standin, "before", f"site_id: {legacy}\n")  # as a gpudash that derived the id pushed
    assert before.gpudash("push").code == 0
    before.site_file.unlink()
    theirs = stored(standin, before.uids)
    new = repository(standin, "new")
    new.dashboards.append(make_dashboard(before.uids[1], "new's take on it"))  # same uid: a conflict later
    new.keep_only(*new.uids)
    for args in (("sync", "--prune"), ("sync", "--prune", "--force"), ("diff",), ("push", "--dry-run")):
        asked = new.gpudash(*args)
        assert asked.code == 2 and asked.err.count("\n") == 1, asked.text
        assert (f"gpudash: gpudash.yaml: no site_id yet, and what gpudash wrote before may be this repository's: "
                f"site {legacy!r} (the id gpudash derived from these clusters before it wrote one): ") in asked.err
        assert f"{before.uids[0]} 'before dashboard 0'" in asked.err
        assert stored(standin, before.uids) == theirs and not new.site_file.exists()
    assert server(standin).writes == 4  # the folder and three dashboards, all before's

    fresh = re.search(r"add `site_id: ([a-z0-9-]+)`, a new id", asked.err)
    assert fresh is not None and fresh.group(1) != legacy
    new.site_file.write_text(f"site_id: {fresh.group(1)}\ngrafana: {{folder: GPU new}}\n")  # a new id, as told
    pruned = new.gpudash("sync", "--prune", "--force")
    assert pruned.code == 3, pruned.text  # the shared uid is the other site's: never written
    assert f"pushed by gpudash for site {legacy!r}, not this site ({fresh.group(1)!r})" in pruned.err
    assert stored(standin, before.uids) == theirs
    assert {folder_of(standin, uid) for uid in new.uids[:3]} == {f"gpudash-{fresh.group(1)}"}


@pytest.mark.parametrize("site_text", [None, OWN_CLUSTERS], ids=["default-config", "own-clusters"])
def test_an_install_from_before_keeps_its_dashboards_and_folder(standin: GrafanaUnderTest,
                                                               site_text: str | None) -> None:
    clusters = Site().clusters if site_text is None else (Cluster("lab", (ScrapeTarget("10.1.0.1:9400", "rack-1"),)),)
    legacy = legacy_site_id(clusters)
    repo = repository(standin, "site", (site_text or "") + f"site_id: {legacy}\n")
    assert repo.gpudash("push").code == 0  # what the gpudash before this one pushed, its id derived
    standin.ui_edit(repo.uids[1], lambda d: d.update(description="saved in the UI"))  # no marker: the history says
    if site_text is None:
        repo.site_file.unlink()
    else:
        repo.site_file.write_text(site_text)

    upgraded = repo.gpudash("sync", "--prune")
    assert upgraded.code == 2, upgraded.text
    assert f"site {legacy!r} (the id gpudash derived from these clusters before it wrote one)" in upgraded.err
    assert f"If it is, add `site_id: {legacy}` to gpudash.yaml: its dashboards, folder and files stay" in upgraded.err
    with repo.site_file.open("a") as keep:  # as the line says (a new gpudash.yaml, with the default config)
        keep.write(f"site_id: {legacy}\n")
    repo.dashboards[0]["description"] = "changed locally"
    repo.keep_only(repo.uids[0], repo.uids[1])
    synced = repo.gpudash("sync", "--prune", "--force")
    assert synced.code == 0, synced.text
    assert f"as site {legacy}" in synced.out
    assert "created    folder" not in synced.out and "-> gpudash-" not in synced.out  # no folder made, none moved
    assert f"updated  {repo.uids[0]}" in synced.out and f"deleted  {repo.uids[2]}" in synced.out
    assert set(server(standin).store.folders) == {f"gpudash-{legacy}"}
    assert {folder_of(standin, uid) for uid in repo.uids[:2]} == {f"gpudash-{legacy}"}
    assert (standin.marker(repo.uids[0]) or {})["site"] == legacy
    assert repo.gpudash("sync", "--prune").writes == 0
