"""`gpudash init DIR`: what a new site gets, that it works from there, and that nothing there is overwritten."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from support.cli import gpudash
from support.paths import ROOT

from gpudash import __version__
from gpudash.config.loading import load_settings
from gpudash.init.sitekit import FIXED_FILES, site_files

EXPECTED = {*FIXED_FILES, *(f"dashboards/{p.name}" for p in (ROOT / "dashboards").glob("*.py"))}


def test_a_site_gets_the_configs_the_definitions_a_makefile_and_ci(tmp_path: Path) -> None:
    ran = gpudash("init", str(tmp_path / "site"))
    assert ran.code == 0, ran.err
    site = tmp_path / "site"
    written = {str(p.relative_to(site)) for p in site.rglob("*") if p.is_file()}
    assert written == EXPECTED
    assert ".github/workflows/gpudash.yml" in written and "Makefile" in written
    # thresholds.yaml and the definitions are this version's own, comments included
    assert (site / "thresholds.yaml").read_bytes() == (ROOT / "thresholds.yaml").read_bytes()
    for definition in (ROOT / "dashboards").glob("*.py"):
        assert (site / "dashboards" / definition.name).read_bytes() == definition.read_bytes()
    assert (site / "requirements.txt").read_text().splitlines()[-1] == f"gpudash=={__version__}"
    assert "@GPUDASH_VERSION@" not in "".join(data.decode() for data in site_files().values())


def test_the_commented_site_config_loads(tmp_path: Path) -> None:
    assert gpudash("init", str(tmp_path)).code == 0
    text = (tmp_path / "gpudash.yaml").read_text()
    assert text.count("#") > 20  # the knobs are explained
    settings = load_settings(tmp_path / "thresholds.yaml", tmp_path / "gpudash.yaml")
    assert [c.name for c in settings.site.clusters] == ["prod-a"]
    assert settings.site.kubernetes.dashboard_label == ("grafana_dashboard", "1")


def test_each_new_site_gets_an_id_of_its_own_named_for_its_folder(tmp_path: Path) -> None:
    ids = []
    for folder in ("gpu-monitoring", "other", "Third Site"):
        assert gpudash("init", str(tmp_path / folder)).code == 0
        site = load_settings(tmp_path / folder / "thresholds.yaml", tmp_path / folder / "gpudash.yaml").site
        ids.append(site.site_id)
        assert re.fullmatch(rf"{folder.lower().replace(' ', '-')}-[0-9a-f]{{8}}", site.site_id), site.site_id
        assert site.grafana_folder_uid == f"gpudash-{site.site_id}"
    assert len(set(ids)) == 3 and "@GPUDASH_SITE_ID@" not in (tmp_path / "other" / "gpudash.yaml").read_text()


def test_the_new_site_generates_and_checks_in_its_own_folder(tmp_path: Path) -> None:
    assert gpudash("init", str(tmp_path)).code == 0
    for args in (["dashboards"], ["rules", "--format", "all"], ["dashboards", "--check"],
                 ["rules", "--format", "all", "--check"]):
        ran = gpudash(*args, cwd=tmp_path, env={"GPUDASH_SITE": None, "GPUDASH_THRESHOLDS": None})
        assert ran.code == 0, (args, ran.err)
    assert (tmp_path / "generated" / "kubernetes" / "grafana-dashboards.yaml").is_file()
    assert sorted(p.name for p in (tmp_path / "dashboards" / "json").glob("*.json")) == \
        sorted(p.name for p in (ROOT / "dashboards" / "json").glob("*.json"))


def test_nothing_that_exists_is_overwritten(tmp_path: Path) -> None:
    (tmp_path / "thresholds.yaml").write_text("mine\n")
    (tmp_path / "dashboards").mkdir()
    (tmp_path / "dashboards" / "fleet.py").write_text("# mine\n")
    os.symlink("nowhere", tmp_path / "Makefile")
    ran = gpudash("init", str(tmp_path))
    assert ran.code == 0, ran.err
    assert (tmp_path / "thresholds.yaml").read_text() == "mine\n"
    assert (tmp_path / "dashboards" / "fleet.py").read_text() == "# mine\n"
    assert os.readlink(tmp_path / "Makefile") == "nowhere"
    assert f"kept {tmp_path / 'thresholds.yaml'} (already there, left as it is)" in ran.out
    assert (tmp_path / "gpudash.yaml").is_file()
    again = gpudash("init", str(tmp_path))
    assert again.code == 0 and f"0 files written, {len(EXPECTED)} kept" in again.out


def test_a_file_in_place_of_the_folder_is_one_line_exit_2(tmp_path: Path) -> None:
    (tmp_path / "site").write_text("x")
    ran = gpudash("init", str(tmp_path / "site"))
    assert ran.code == 2
    assert ran.err.strip() == f"gpudash: {tmp_path / 'site'}: cannot create a site there: not a directory"


def test_an_unwritable_folder_leaves_nothing_half_written(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only folders")
    tmp_path.chmod(0o500)
    try:
        ran = gpudash("init", str(tmp_path / "site"))
    finally:
        tmp_path.chmod(0o700)
    assert ran.code == 2 and "cannot write" in ran.err
    assert not (tmp_path / "site").exists()


def test_a_blocked_subfolder_stops_the_run_before_anything_is_written(tmp_path: Path) -> None:
    (tmp_path / ".github").write_text("a file where the workflows' folder goes\n")
    ran = gpudash("init", str(tmp_path))
    assert ran.code == 2
    assert "not a directory" in ran.err and len(ran.err.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [".github"]
