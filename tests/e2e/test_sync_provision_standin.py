"""`gpudash provision` against the Grafana stand-in: an empty Grafana to a working one, in one command."""

from __future__ import annotations

from grafana_standin import StandIn
from grafana_standin.testkit import GrafanaUnderTest, write_set

pytest_plugins = ["grafana_standin.fixtures"]

PROM = "http://prometheus:9090"


def server(grafana: GrafanaUnderTest) -> StandIn:
    assert grafana.standin is not None
    return grafana.standin


def provision(grafana: GrafanaUnderTest, *args: str) -> tuple[int, str, str]:
    result = grafana.gpudash("provision", "--prometheus-url", PROM, "--files-dir", str(grafana.workdir / "prov"),
                             *args)
    return result.code, result.out, result.err


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


def test_existing_datasource_is_corrected_keeping_other_settings(standin: GrafanaUnderTest) -> None:
    write_set(standin.local_dir, standin.dashboards(1))
    assert provision(standin)[0] == 0
    ds = server(standin).store.datasources[f"{standin.prefix}-prom"]
    ds.url, ds.json_data = "http://old:9090", {"httpMethod": "GET", "customQueryParameters": "x=1"}
    code, out, _ = provision(standin)
    assert code == 0
    assert "updated    data source" in out and "url, jsonData.httpMethod" in out
    assert ds.url == PROM and ds.json_data["customQueryParameters"] == "x=1" and ds.version == 2


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


def test_dry_run_writes_nothing_anywhere(standin: GrafanaUnderTest) -> None:
    write_set(standin.local_dir, standin.dashboards(2))
    code, out, _ = provision(standin, "--dry-run")
    assert code == 0
    assert "would create data source" in out and "would create folder" in out
    assert server(standin).writes == 0
    assert not (standin.workdir / "prov").exists()
