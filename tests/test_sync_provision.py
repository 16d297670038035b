"""`gpudash provision`: an empty Grafana to a working one, and Grafana's file-provisioning YAML."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from grafana_standin import StandIn
from grafana_standin.testkit import THRESHOLDS, GrafanaUnderTest, run_gpudash, write_set

from gpudash.config.site import Site
from gpudash.sync.apply import Target
from gpudash.sync.provision import DatasourceSpec, provisioning_files

pytest_plugins = ["grafana_standin.fixtures"]

PROM = "http://prometheus:9090"


def server(grafana: GrafanaUnderTest) -> StandIn:
    assert grafana.standin is not None
    return grafana.standin


def provision(grafana: GrafanaUnderTest, *args: str) -> tuple[int, str, str]:
    result = grafana.gpudash("provision", "--prometheus-url", PROM, "--files-dir", str(grafana.workdir / "prov"),
                             *args)
    return result.code, result.out, result.err


@pytest.mark.e2e
def test_empty_grafana_to_working_in_one_command(standin: GrafanaUnderTest) -> None:
    local = standin.dashboards(3)
    write_set(standin.local_dir, local)
    code, out, err = provision(standin)
    assert code == 0, out + err
    ds = server(standin).store.datasources[f"{standin.prefix}-prom"]
    assert (ds.name, ds.type, ds.url, ds.access, ds.is_default) == (
        f"Prometheus {standin.prefix}", "prometheus", PROM, "proxy", True)
    assert ds.json_data == {"httpMethod": "POST", "timeInterval": "15s"}
    assert standin.folder_uid in server(standin).store.folders
    assert all(standin.get(d["uid"]) is not None for d in local)
    assert "provision: 3 created" in out
    writes = server(standin).writes
    code, out, _ = provision(standin)
    assert code == 0 and server(standin).writes == writes  # a second run writes nothing
    assert "unchanged  data source" in out


@pytest.mark.e2e
def test_existing_datasource_is_corrected_keeping_other_settings(standin: GrafanaUnderTest) -> None:
    write_set(standin.local_dir, standin.dashboards(1))
    assert provision(standin)[0] == 0
    ds = server(standin).store.datasources[f"{standin.prefix}-prom"]
    ds.url, ds.json_data = "http://old:9090", {"httpMethod": "GET", "customQueryParameters": "x=1"}
    code, out, _ = provision(standin)
    assert code == 0
    assert "updated    data source" in out and "url, jsonData.httpMethod" in out
    assert ds.url == PROM and ds.json_data["customQueryParameters"] == "x=1" and ds.version == 2


@pytest.mark.e2e
def test_datasource_name_taken_and_read_only(standin: GrafanaUnderTest) -> None:
    write_set(standin.local_dir, standin.dashboards(1))
    api = standin.api()
    api.datasource.create_datasource({"name": f"Prometheus {standin.prefix}", "type": "prometheus",
                                      "access": "proxy", "url": PROM, "uid": "someone-else"})
    code, _, err = provision(standin)
    assert code == 4
    assert "409: data source with the same name already exists; another data source already has this name" in err
    assert err.count("\n") == 1
    api.datasource.update_datasource_by_uid("someone-else", {"name": "Renamed", "version": 1})
    assert provision(standin)[0] == 0
    server(standin).store.datasources[f"{standin.prefix}-prom"].read_only = True
    server(standin).store.datasources[f"{standin.prefix}-prom"].url = "http://elsewhere:9090"
    code, _, err = provision(standin)
    assert code == 4 and "403: Cannot update read-only data source" in err


@pytest.mark.e2e
def test_dry_run_writes_nothing_anywhere(standin: GrafanaUnderTest) -> None:
    write_set(standin.local_dir, standin.dashboards(2))
    code, out, _ = provision(standin, "--dry-run")
    assert code == 0
    assert "would create data source" in out and "would create folder" in out
    assert server(standin).writes == 0
    assert not (standin.workdir / "prov").exists()


def test_files_only_needs_no_grafana(tmp_path: Path) -> None:
    result = run_gpudash(["provision", "--files-only", "--prometheus-url", PROM, "--files-dir", tmp_path,
                          "--thresholds", THRESHOLDS, "--dashboards-path", "/srv/dash"],
                         {"GRAFANA_URL": None, "GRAFANA_TOKEN": None, "GPUDASH_SITE": None})
    assert result.code == 0, result.text
    sources = yaml.safe_load((tmp_path / "datasources" / "gpudash.yaml").read_text())
    providers = yaml.safe_load((tmp_path / "dashboards" / "gpudash.yaml").read_text())
    assert sources["apiVersion"] == 1
    assert sources["datasources"] == [{"uid": "gpudash-prometheus", "name": "Prometheus (gpudash)",
                                       "type": "prometheus", "access": "proxy", "url": PROM, "orgId": 1,
                                       "isDefault": False, "editable": False,
                                       "jsonData": {"httpMethod": "POST", "timeInterval": "15s"}}]
    (provider,) = providers["providers"]
    assert provider["folder"] == "GPU" and provider["folderUid"] == Site().grafana_folder_uid
    assert provider["type"] == "file"
    assert provider["options"] == {"path": "/srv/dash", "foldersFromFilesStructure": False}
    assert provider["allowUiUpdates"] is False and provider["disableDeletion"] is False
    assert not list(tmp_path.rglob("*.tmp"))


def test_root_folder_provider() -> None:
    root = Target.from_site("general", "General", "lab")
    files = provisioning_files(DatasourceSpec("u", "n", PROM, "15s"), root, "/d")
    provider = yaml.safe_load(files["dashboards/gpudash.yaml"])["providers"][0]
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
