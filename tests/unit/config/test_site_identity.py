"""A site's identity: a new one per repository, written into gpudash.yaml once, and the id derived before."""

from __future__ import annotations

import os
import re
import stat
import threading
from pathlib import Path

import pytest

from gpudash.config.loading import load_settings, load_site
from gpudash.config.site import SITE_ID, Cluster, ScrapeTarget, Site
from gpudash.config.site_identity import legacy_site_id, new_site_id, with_site_id, write_site_id
from gpudash.errors import ConfigError

SITE_TEXT = "# our site\nclusters:\n  - name: west\n    targets: [{address: 'h:9400'}]\ngrafana:\n  folder: GPU west\n"


def test_a_config_without_site_id_has_none_until_one_is_settled(tmp_path: Path) -> None:
    for site in (Site(), load_site(None), load_site(_written(tmp_path / "gpudash.yaml", SITE_TEXT))):
        assert (site.site_id, site.grafana_folder_uid) == ("", "")
        named = site.identified("west-0a1b2c3d")
        assert (named.site_id, named.grafana_folder_uid) == ("west-0a1b2c3d", "gpudash-west-0a1b2c3d")
        assert named.identified("west-0a1b2c3d") is named
        with pytest.raises(ValueError, match="cannot become"):
            named.identified("east-0a1b2c3d")
    given = load_site(_written(tmp_path / "given.yaml", "site_id: lab-7\ngrafana: {folder_uid: gpus}\n"))
    assert given.identified("lab-7").grafana_folder_uid == "gpus"


def test_new_ids_are_a_slug_and_random_bits_never_a_function_of_the_config() -> None:
    ids = {new_site_id("demo") for _ in range(200)}
    assert len(ids) == 200  # the same clusters, 200 repositories: 200 identities
    assert all(re.fullmatch(r"demo-[0-9a-f]{8}", i) for i in ids)
    assert new_site_id("West_1-East", lambda n: "ab" * n) == "west-1-east-abababab"
    for name in ("a-very-long-cluster-name-indeed-and-more", "", "___", "ÄÖÜ"):
        made = new_site_id(name)
        assert SITE_ID.fullmatch(made) and len(made) <= 30, made


def test_the_id_derived_before_is_kept_exactly() -> None:
    # what gpudash derived before it wrote ids, which existing installs' dashboards carry: it must not drift
    assert legacy_site_id(Site().clusters) == "demo-48e2e2"
    two = (Cluster("West_1", (ScrapeTarget("h:9400", "r"),)), Cluster("East", (ScrapeTarget("g:9400", "r"),)))
    first = legacy_site_id(two)
    assert re.fullmatch(r"west-1-east-[0-9a-f]{6}", first)
    moved = (Cluster("West_1", (ScrapeTarget("h:9401", "r"),)), two[1])
    assert legacy_site_id(moved) != first


def _written(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_a_repository_without_gpudash_yaml_gets_one_holding_only_the_id(tmp_path: Path) -> None:
    path = tmp_path / "gpudash.yaml"
    assert write_site_id(path, "demo-0a1b2c3d") == "demo-0a1b2c3d"
    text = path.read_text()
    assert text.startswith("#") and "site_id: demo-0a1b2c3d  # written by gpudash on first use" in text
    site = load_site(path)
    assert site.site_id == "demo-0a1b2c3d" and site.identified("demo-0a1b2c3d") == Site(site_id="demo-0a1b2c3d")
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_the_id_is_added_at_the_end_and_everything_else_kept_byte_for_byte(tmp_path: Path) -> None:
    path = _written(tmp_path / "gpudash.yaml", SITE_TEXT.rstrip("\n"))  # no final newline
    path.chmod(0o600)
    before = load_site(path)
    assert write_site_id(path, "west-0a1b2c3d") == "west-0a1b2c3d"
    assert path.read_text().startswith(SITE_TEXT)
    assert load_site(path) == before.identified("west-0a1b2c3d")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert write_site_id(path, "west-99999999") == "west-0a1b2c3d"  # has one: kept, nothing written
    assert path.read_text().count("site_id:") == 1
    assert not [p for p in tmp_path.iterdir() if p.name != "gpudash.yaml"]


def test_a_linked_site_config_is_written_through_the_link(tmp_path: Path) -> None:
    real = _written(tmp_path / "real.yaml", SITE_TEXT)
    link = tmp_path / "gpudash.yaml"
    link.symlink_to(real.name)
    assert write_site_id(link, "west-0a1b2c3d") == "west-0a1b2c3d"
    assert link.is_symlink() and load_site(real).site_id == "west-0a1b2c3d"


@pytest.mark.parametrize("text", ["{clusters: [{name: w, targets: [{address: 'h:1'}]}]}\n",
                                  "grafana: {folder: G}\n...\n"])
def test_a_config_the_id_cannot_be_appended_to_is_left_alone(tmp_path: Path, text: str) -> None:
    path = _written(tmp_path / "gpudash.yaml", text)
    with pytest.raises(ConfigError) as info:
        write_site_id(path, "w-0a1b2c3d")
    message = info.value.format_message()
    assert message.startswith(f"{path}: cannot add site_id") and "add `site_id: w-0a1b2c3d` to" in message
    assert path.read_text() == text and os.listdir(tmp_path) == ["gpudash.yaml"]


def test_an_unwritable_folder_is_one_line_with_the_id_to_add(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only folders")
    path = _written(tmp_path / "gpudash.yaml", SITE_TEXT)
    tmp_path.chmod(0o500)
    try:
        with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}: cannot write site_id: .*; add "
                                              r"`site_id: w-0a1b2c3d` to .* by hand$"):
            write_site_id(path, "w-0a1b2c3d")
    finally:
        tmp_path.chmod(0o700)
    assert path.read_text() == SITE_TEXT


@pytest.mark.parametrize("exists", [False, True], ids=["no-file", "file-without-id"])
def test_gpudash_runs_writing_at_once_agree_on_one_id(tmp_path: Path, exists: bool) -> None:
    path = tmp_path / "gpudash.yaml"
    if exists:
        path.write_text(SITE_TEXT)
    held: list[str] = []
    start = threading.Barrier(8)

    def write(n: int) -> None:
        start.wait()
        held.append(write_site_id(path, f"w-{n:08d}"))

    threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(held)) == 1 and load_site(path).site_id == held[0]
    assert path.read_text().count("site_id:") == 1


def test_a_clone_shares_the_written_id_another_repository_does_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  root: Path) -> None:
    monkeypatch.delenv("GPUDASH_SITE", raising=False)
    thresholds = root / "thresholds.yaml"
    ids = {}
    for repository in ("one", "other"):
        (tmp_path / repository).mkdir()
        monkeypatch.chdir(tmp_path / repository)
        settings = load_settings(thresholds)
        assert settings.site.site_id == "" and settings.site_path == Path("gpudash.yaml")
        ids[repository] = write_site_id(settings.site_path, new_site_id("demo"))
    assert ids["one"] != ids["other"]
    clone = tmp_path / "clone"
    clone.mkdir()
    (clone / "gpudash.yaml").write_bytes((tmp_path / "one" / "gpudash.yaml").read_bytes())  # what git gives a clone
    monkeypatch.chdir(clone)
    assert load_settings(thresholds).site.site_id == ids["one"]


def test_with_site_id_on_empty_and_commented_text() -> None:
    assert with_site_id("", "a-1").endswith("site_id: a-1  # written by gpudash on first use: this site's identity "
                                             "in Grafana; commit it with this file\n")
    commented = "# nothing set yet\n"
    assert with_site_id(commented, "a-1").startswith(commented + "\nsite_id: a-1")
