"""`gpudash provision`: an empty Grafana to a working one, and Grafana's file-provisioning YAML."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from grafana_standin.testkit import THRESHOLDS, run_gpudash

from gpudash.config.loading import load_site
from gpudash.config.site import Site
from gpudash.config.site_identity import legacy_site_id
from gpudash.files import write_text_tree
from gpudash.sync.apply import Target
from gpudash.sync.provision import PROVISION_MARK, DatasourceSpec, provisioning_files

pytest_plugins = ["grafana_standin.fixtures"]

PROM = "http://prometheus:9090"


def test_files_only_needs_no_grafana(tmp_path: Path) -> None:
    out = tmp_path / "provisioning"
    result = run_gpudash(["provision", "--files-only", "--prometheus-url", PROM, "--files-dir", out,
                          "--thresholds", THRESHOLDS, "--dashboards-path", "/srv/dash"],
                         {"GRAFANA_URL": None, "GRAFANA_TOKEN": None, "GPUDASH_SITE": None}, cwd=tmp_path)
    assert result.code == 0, result.text
    site = load_site(tmp_path / "gpudash.yaml")  # no site config: one written, holding the new id
    assert f"site: wrote `site_id: {site.site_id}` into gpudash.yaml" in result.out
    name = f"gpudash-{site.site_id}.yaml"  # named for the site: another site's files sit beside these
    sources = yaml.safe_load((out / "datasources" / name).read_text())
    providers = yaml.safe_load((out / "dashboards" / name).read_text())
    assert sources["apiVersion"] == 1
    assert sources["datasources"] == [{"uid": "gpudash-prometheus", "name": "Prometheus (gpudash)",
                                       "type": "prometheus", "access": "proxy", "url": PROM, "orgId": 1,
                                       "isDefault": False, "editable": False,
                                       "jsonData": {"httpMethod": "POST", "timeInterval": "15s"}}]
    (provider,) = providers["providers"]
    assert provider["folder"] == "GPU" and provider["folderUid"] == f"gpudash-{site.site_id}"
    assert provider["type"] == "file"
    assert provider["options"] == {"path": "/srv/dash", "foldersFromFilesStructure": False}
    assert provider["allowUiUpdates"] is False and provider["disableDeletion"] is False
    assert not list(tmp_path.rglob("*.tmp"))


def test_files_only_in_two_repositories_names_two_sites_and_a_rerun_the_same(tmp_path: Path) -> None:
    names = []
    for repository in ("one", "two", "one"):
        (tmp_path / repository).mkdir(exist_ok=True)
        result = run_gpudash(["provision", "--files-only", "--prometheus-url", PROM, "--files-dir", tmp_path / "prov",
                              "--thresholds", THRESHOLDS], {"GPUDASH_SITE": None}, cwd=tmp_path / repository)
        assert result.code == 0, result.text
        names.append(sorted(p.name for p in (tmp_path / "prov" / "dashboards").iterdir()))
    assert len(names[1]) == 2 and names[2] == names[1]  # two sites' files side by side; the rerun replaced its own


def test_files_only_stops_at_files_written_for_the_id_derived_before(tmp_path: Path) -> None:
    legacy = legacy_site_id(Site().clusters)
    out = tmp_path / "prov"
    old = out / "dashboards" / f"gpudash-{legacy}.yaml"
    old.parent.mkdir(parents=True)
    old.write_text(f"{PROVISION_MARK}`. Grafana reads it at start-up.\napiVersion: 1\n")
    args = ["provision", "--files-only", "--prometheus-url", PROM, "--files-dir", out, "--thresholds", THRESHOLDS]
    result = run_gpudash(args, {"GPUDASH_SITE": None}, cwd=tmp_path)
    assert result.code == 2 and result.err.count("\n") == 1, result.text
    assert f"gpudash.yaml: no site_id yet, and what gpudash wrote before may be this repository's: site {legacy!r}" \
        in result.err and str(old) in result.err and f"add `site_id: {legacy}` to gpudash.yaml" in result.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prov"] and list(out.rglob("*.yaml")) == [old]
    (tmp_path / "gpudash.yaml").write_text(f"site_id: {legacy}\n")  # kept, as the line says
    assert run_gpudash(args, {"GPUDASH_SITE": None}, cwd=tmp_path).code == 0
    assert sorted(p.name for p in out.rglob("*.yaml")) == [f"gpudash-{legacy}.yaml"] * 2


def test_two_sites_provision_one_folder_side_by_side(tmp_path: Path) -> None:
    their = tmp_path / "datasources" / "gpudash-other-site.yaml"
    their.parent.mkdir()
    their.write_text("apiVersion: 1\n")  # another site's, provisioned into the same Grafana
    spec = DatasourceSpec("u", "n", PROM, "15s")
    files = provisioning_files(spec, Target.from_site("gpudash-lab", "GPU lab", "lab"), "/d")
    assert sorted(files) == ["dashboards/gpudash-lab.yaml", "datasources/gpudash-lab.yaml"]
    assert yaml.safe_load(files["dashboards/gpudash-lab.yaml"])["providers"][0]["name"] == "gpudash-lab"
    write_text_tree(tmp_path, files, PROVISION_MARK)
    assert their.read_text() == "apiVersion: 1\n"


def test_root_folder_provider() -> None:
    root = Target.from_site("general", "General", "lab")
    files = provisioning_files(DatasourceSpec("u", "n", PROM, "15s"), root, "/d")
    provider = yaml.safe_load(files["dashboards/gpudash-lab.yaml"])["providers"][0]
    assert provider["folder"] == "" and "folderUid" not in provider


@pytest.mark.parametrize(("args", "message"), [
    ([], "no Prometheus URL: pass --prometheus-url or set PROMETHEUS_URL"),
    (["--prometheus-url", "prometheus:9090"], "Prometheus URL: expected http(s)://host:port"),
    (["--prometheus-url", PROM, "--files-only", "--no-files"], "--no-files and --files-only exclude each other"),
])
def test_provision_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    result = run_gpudash(["provision", "--thresholds", THRESHOLDS, "--files-dir", tmp_path, *args],
                         {"PROMETHEUS_URL": None, "GRAFANA_URL": None, "GPUDASH_SITE": None})
    assert result.code == 2
    assert result.err.startswith(f"gpudash: {message}") and result.err.count("\n") == 1
