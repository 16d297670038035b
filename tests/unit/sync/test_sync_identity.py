"""Which site a repository without site_id is: what in Grafana may show an identity from before, the question
gpudash then asks, and the new id it writes when nothing does. Pure: dashboards as data, no server."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from grafana_standin.testkit import make_dashboard

from gpudash.compare.content import MARKER_KEY, Marker, marked
from gpudash.config.loading import Settings, load_settings, load_site
from gpudash.config.site import Site
from gpudash.config.site_identity import legacy_site_id
from gpudash.errors import ConfigError
from gpudash.sync.apply import Target
from gpudash.sync.identity import Sighting, question, settle, sightings
from gpudash.sync.plan import History, RemoteDashboard

LEGACY = legacy_site_id(Site().clusters)
OTHER = "beta-0a1b2c3d"


def remote(body: dict[str, Any], history: History | None = None, uid: str = "") -> RemoteDashboard:
    data = copy.deepcopy(body)
    return RemoteDashboard(uid or str(body["uid"]), data, 2, f"gpudash-{LEGACY}", history=history)


def pre_sites(local: dict[str, Any]) -> dict[str, Any]:
    body = marked(local, "abc", LEGACY)
    body[MARKER_KEY] = {"contentHash": body[MARKER_KEY]["contentHash"], "commit": "abc"}
    return body


def test_at_its_own_uids_any_sites_dashboard_is_seen_elsewhere_only_the_old_ids() -> None:
    a, b, c, d = (make_dashboard(u, u.upper()) for u in "abcd")
    at_local = [remote(marked(a, "c", LEGACY)), remote(marked(b, "c", OTHER)),
                remote(c, History(sites=(LEGACY,))),  # a UI save dropped the marker; the history names the site
                remote(d, History(oldest_marker=Marker("h", "c", OTHER, "d"))),
                remote(pre_sites(make_dashboard("e", "E"))),  # names no site: re-stamped as before, not a sighting
                remote(marked(a, "c", LEGACY), uid="copy"),  # a copy: nobody's identity
                remote(make_dashboard("f", "F"), History())]  # made by hand
    in_folder = [remote(marked(make_dashboard("g", "G"), "c", LEGACY)),
                 remote(marked(make_dashboard("h", "H"), "c", OTHER)),  # another site's, in a folder it may share
                 remote(make_dashboard("i", "I"), History(sites=(LEGACY,)))]
    assert sightings(at_local, in_folder, LEGACY) == [
        Sighting("a", "A", LEGACY), Sighting("b", "B", OTHER), Sighting("c", "C", LEGACY), Sighting("d", "D", OTHER),
        Sighting("g", "G", LEGACY), Sighting("i", "I", LEGACY)]


def test_the_question_names_each_site_its_dashboards_and_both_answers_on_one_line() -> None:
    seen = [Sighting(f"u{n}", f"T {n}", LEGACY) for n in range(5)] + [Sighting("x", "X", OTHER)]
    line = question("sites/gpudash.yaml", seen, LEGACY, "demo-99999999")
    assert "\n" not in line
    assert line.startswith("sites/gpudash.yaml: no site_id yet, and what gpudash wrote before may be this "
                           f"repository's: site {LEGACY!r} (the id gpudash derived from these clusters before it "
                           "wrote one): u0 'T 0', u1 'T 1', u2 'T 2' and 2 more; site 'beta-0a1b2c3d': x 'X'. ")
    assert f"If it is, add `site_id: {LEGACY}` or `site_id: {OTHER}` to sites/gpudash.yaml" in line
    assert line.endswith("add `site_id: demo-99999999`, a new id; nothing was written")


def _settings(root: Path, folder: Path, text: str | None) -> Settings:
    """A repository's settings: its gpudash.yaml (`text`; None: there is none, so it would be written there)."""
    path = folder / "gpudash.yaml"
    if text is not None:
        path.write_text(text)
    thresholds = root / "thresholds.yaml"
    return Settings(load_settings(thresholds).thresholds, load_site(path if text is not None else None), thresholds,
                    path)


def test_a_configured_site_id_is_the_site_whatever_grafana_holds(tmp_path: Path, root: Path) -> None:
    settings = _settings(root, tmp_path, "site_id: lab-7\n")
    said: list[str] = []
    site = settle(settings, [Sighting("a", "A", OTHER)], persist=True, echo=said.append)
    assert site is settings.site and said == [] and (tmp_path / "gpudash.yaml").read_text() == "site_id: lab-7\n"


@pytest.mark.parametrize("text", [None, "grafana: {folder: GPU here}\n"], ids=["no-config", "config-without-id"])
def test_a_sighting_stops_before_anything_is_written(tmp_path: Path, root: Path, text: str | None) -> None:
    settings = _settings(root, tmp_path, text)
    said: list[str] = []
    with pytest.raises(ConfigError) as info:
        settle(settings, [Sighting("gpudash-fleet", "GPU fleet", LEGACY)], persist=True, echo=said.append)
    assert f"add `site_id: {LEGACY}` to {settings.site_path}" in info.value.format_message()
    written = settings.site_path.read_text() if settings.site_path.exists() else None
    assert written == text and said == []


def test_nothing_seen_a_new_id_written_once_or_only_used_by_a_run_that_writes_nothing(tmp_path: Path,
                                                                                       root: Path) -> None:
    settings = _settings(root, tmp_path, None)
    said: list[str] = []
    provisional = settle(settings, [], persist=False, echo=said.append)
    assert not settings.site_path.exists()
    assert said == [f"site: no site_id in {settings.site_path} yet: this run is site {provisional.site_id!r} and "
                    "writes none (push, sync or provision writes one)"]
    site = settle(settings, [], persist=True, echo=said.append)
    assert site.site_id != provisional.site_id and site.site_id != LEGACY
    assert load_site(settings.site_path).site_id == site.site_id
    assert said[-1].startswith(f"site: wrote `site_id: {site.site_id}` into {settings.site_path}")
    assert Target.for_site(site) == Target(f"gpudash-{site.site_id}", "GPU", site.site_id)


def test_a_target_needs_a_settled_site() -> None:
    with pytest.raises(ValueError, match="no id yet"):
        Target.for_site(Site())
