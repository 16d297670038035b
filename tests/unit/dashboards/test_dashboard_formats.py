"""`gpudash dashboards --format`: the classic JSON as before, the v2 resources beside it, Git Sync envelopes."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from support.cli import gpudash
from support.paths import ROOT

from gpudash.catalog import DCGM
from gpudash.config.loading import load_settings
from gpudash.panels.build import build_all, render
from gpudash.panels.formats import v2_resources


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.json"))}


def test_the_committed_v2_resources_are_what_the_definitions_give() -> None:
    built = build_all(load_settings(ROOT / "thresholds.yaml"), ROOT / "dashboards")
    expected = {name: render(r) for name, r in v2_resources(built, DCGM).items()}
    assert files(ROOT / "dashboards" / "v2") == expected
    assert sorted(expected) == sorted(files(ROOT / "dashboards" / "json"))


def test_a_plain_run_writes_the_classic_json_unchanged_and_the_v2_beside_it(repo_copy: Path) -> None:
    dashboards = repo_copy / "dashboards"
    for folder in ("json", "v2"):
        for file in (dashboards / folder).iterdir():
            file.unlink()
    result = gpudash("dashboards", cwd=repo_copy)
    assert result.code == 0, result.err
    assert files(dashboards / "json") == files(ROOT / "dashboards" / "json")
    assert files(dashboards / "v2") == files(ROOT / "dashboards" / "v2")
    assert f"wrote {Path('dashboards/v2/gpudash-node.json')}" in result.out.splitlines()


def test_two_runs_give_the_same_bytes(repo_copy: Path) -> None:
    first, second = repo_copy / "first", repo_copy / "second"
    assert gpudash("dashboards", "--format", "v2", "--out", str(first), cwd=repo_copy).code == 0
    assert gpudash("dashboards", "--format", "v2", "--out", str(second), cwd=repo_copy).code == 0
    assert files(first) == files(second) and len(files(first)) == 5


def test_git_sync_writes_one_resource_envelope_per_dashboard(repo_copy: Path) -> None:
    out = repo_copy / "grafana-repo" / "gpu"
    result = gpudash("dashboards", "--format", "git-sync", "--out", str(out), cwd=repo_copy)
    assert result.code == 0, result.err
    written = files(out)
    assert sorted(written) == sorted(files(ROOT / "dashboards" / "json"))
    for name, data in written.items():
        resource = json.loads(data)
        assert sorted(resource) == ["apiVersion", "kind", "metadata", "spec"]
        assert resource["apiVersion"] == "dashboard.grafana.app/v2" and resource["kind"] == "Dashboard"
        assert resource["metadata"] == {"name": name.removesuffix(".json")}


def test_git_sync_needs_a_folder_and_out_takes_one_format(repo_copy: Path) -> None:
    result = gpudash("dashboards", "--format", "git-sync", cwd=repo_copy)
    assert result.code == 2
    assert result.err == "gpudash: --format git-sync: give --out, the folder your Git Sync repository reads\n"
    result = gpudash("dashboards", "--format", "classic", "--format", "v2", "--out", str(repo_copy / "x"),
                     cwd=repo_copy)
    assert result.code == 2
    assert result.err.startswith("gpudash: --out names one folder, and 2 formats were asked (classic, v2)")
    assert not (repo_copy / "x").exists()


def test_check_names_a_stale_v2_resource(repo_copy: Path) -> None:
    stale = repo_copy / "dashboards" / "v2" / "gpudash-node.json"
    resource = json.loads(stale.read_text())
    resource["spec"]["title"] = "Edited by hand"
    stale.write_text(json.dumps(resource))
    result = gpudash("dashboards", "--check", cwd=repo_copy)
    assert result.code == 1
    named = Path("dashboards/v2/gpudash-node.json")
    assert result.err == f"gpudash: stale dashboards, run `make dashboards`: {named}\n"
    assert gpudash("dashboards", "--check", "--format", "classic", cwd=repo_copy).code == 0


def test_help_says_which_format_goes_where() -> None:
    text = gpudash("dashboards", "--help").out
    for words in ("classic", "file provisioning", "sidecar", "dashboard.grafana.app/v2", "git-sync",
                  "Git Sync repository", "refuses v2 files"):
        assert words in text, words


def test_the_sidecar_config_maps_hold_the_classic_json_and_say_so() -> None:
    text = (ROOT / "generated" / "kubernetes" / "grafana-dashboards.yaml").read_text()
    assert "holding the classic JSON" in text.split("---", 1)[0]
    assert "Grafana 13 refuses schema v2 files there" in text.split("---", 1)[0]
    held = {name: json.loads(data) for doc in yaml.safe_load_all(text) if doc for name, data in doc["data"].items()}
    assert held == {name: json.loads(data) for name, data in files(ROOT / "dashboards" / "json").items()}
    assert not any("apiVersion" in dashboard or "elements" in dashboard for dashboard in held.values())
