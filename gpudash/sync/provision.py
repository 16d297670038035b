"""From an empty Grafana to a working one: the Prometheus data source (fixed uid), the folder, the dashboards.

Also writes Grafana's own file-provisioning YAML (a data source file and a dashboard provider pointing
at the generated JSON) for people who provision from disk instead of over the API.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from gpudash.config.loading import Settings
from gpudash.config.site import Site
from gpudash.config.site_identity import legacy_site_id
from gpudash.errors import ConfigError
from gpudash.files import write_text_tree
from gpudash.sync.apply import Echo, Target
from gpudash.sync.grafana_api import Connection, GrafanaFailure
from gpudash.sync.identity import Sighting, settle
from gpudash.sync.remote import GrafanaRemote
from gpudash.sync.session import open_session, write_plan

DEFAULT_DASHBOARDS_PATH = "/var/lib/grafana/dashboards/gpudash"


@dataclass(frozen=True)
class DatasourceSpec:
    uid: str
    name: str
    url: str
    scrape_interval: str

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(f"Prometheus URL: expected http(s)://host:port, got {self.url!r} "
                              "(pass --prometheus-url or set PROMETHEUS_URL: the URL Grafana uses to reach it)")

    @property
    def json_data(self) -> dict[str, Any]:
        # POST lets long PromQL through proxies; timeInterval keeps $__rate_interval >= 4x the scrape interval
        return {"httpMethod": "POST", "timeInterval": self.scrape_interval}

    def owned_fields(self) -> dict[str, Any]:
        return {"uid": self.uid, "name": self.name, "type": "prometheus", "access": "proxy", "url": self.url}


def datasource_spec(site: Site, prometheus_url: str) -> DatasourceSpec:
    """The Prometheus data source the site's dashboards look for (its fixed uid), at `prometheus_url`."""
    return DatasourceSpec(site.datasource_uid, site.datasource_name, prometheus_url, str(site.scrape_interval))


@dataclass(frozen=True)
class ProvisioningFiles:
    """Where Grafana's provisioning YAML goes, and where the provider reads the dashboards on the server."""

    out: Path
    dashboards_path: str = DEFAULT_DASHBOARDS_PATH


def provision_grafana(connection: Connection, settings: Settings, spec: DatasourceSpec, directory: Path, *,
                      dry_run: bool, verbose: int, echo: Echo, files: ProvisioningFiles | None = None) -> None:
    """Which site this is, the provisioning YAML (`files`), then the data source, the folder and every
    dashboard in `directory`, over Grafana's API."""
    seen = files_sightings(files.out, settings.site) if files is not None else []
    session, local = open_session(connection, settings, directory, verbose, echo, persist=not dry_run, seen=seen)
    if files is not None and not dry_run:
        _write_files(files, spec, session.target, echo)
    ensure_datasource(session.remote, spec, dry_run, echo)
    write_plan("provision", session, local, force=False, prune=False, dry_run=dry_run, show_drift=False)


def _needs_update(existing: dict[str, Any], spec: DatasourceSpec) -> list[str]:
    changed = [key for key, value in spec.owned_fields().items() if existing.get(key) != value]
    json_data = existing.get("jsonData") or {}
    changed += [f"jsonData.{key}" for key, value in spec.json_data.items() if json_data.get(key) != value]
    return changed


def ensure_datasource(remote: GrafanaRemote, spec: DatasourceSpec, dry_run: bool, echo: Echo) -> bool:
    """Create or correct the data source; return whether anything was (or would be) written."""
    label = f"data source {spec.name!r} ({spec.uid})"
    existing = remote.datasource(spec.uid)
    if existing is None:
        if dry_run:
            echo(f"would create {label} -> {spec.url}")
            return True
        listing = remote.grafana.call(label, "GET", "/api/datasources",
                                      lambda: remote.grafana.api.datasource.list_datasources())
        has_default = any(isinstance(d, dict) and d.get("isDefault") for d in listing or [])
        body = {**spec.owned_fields(), "isDefault": not has_default, "jsonData": spec.json_data}
        try:
            remote.create_datasource(body)
        except GrafanaFailure as exc:
            if exc.status == 409 and "name" in exc.said:
                raise GrafanaFailure(f"{exc.message}; another data source already has this name: set "
                                     "grafana.datasource_name in gpudash.yaml, or rename that one",
                                     exc.status, exc.keyword, said=exc.said) from None
            raise
        echo(f"created    {label} -> {spec.url}")
        return True
    changed = _needs_update(existing, spec)
    if not changed:
        echo(f"unchanged  {label}")
        return False
    if dry_run:
        echo(f"would update {label}: {', '.join(changed)}")
        return True
    keep = ("user", "database", "basicAuth", "basicAuthUser", "withCredentials", "isDefault")
    body = {key: existing[key] for key in keep if key in existing}
    body.update(spec.owned_fields())
    body["jsonData"] = {**(existing.get("jsonData") or {}), **spec.json_data}
    body["version"] = existing.get("version", 0)  # optimistic lock: 409 if someone saved it meanwhile
    remote.update_datasource(spec.uid, body)
    echo(f"updated    {label}: {', '.join(changed)}")
    return True


PROVISION_MARK = "# Written by `gpudash provision"  # how every file it writes begins (older ones too)


def files_sightings(out: Path, site: Site) -> list[Sighting]:
    """The provisioning files gpudash wrote for the id it derived from the clusters before (an install from
    then), when the site config names no site_id."""
    if site.site_id:
        return []
    legacy = legacy_site_id(site.clusters)
    paths = [out / kind / f"gpudash-{legacy}.yaml" for kind in ("datasources", "dashboards")]
    return [Sighting(str(path), "", legacy) for path in paths if _written_by_gpudash(path)]


def _written_by_gpudash(path: Path) -> bool:
    try:
        with path.open("rb") as stream:
            return stream.read(len(PROVISION_MARK)) == PROVISION_MARK.encode("utf-8")
    except OSError:
        return False


def _write_files(files: ProvisioningFiles, spec: DatasourceSpec, target: Target, echo: Echo) -> None:
    for path in write_text_tree(files.out, provisioning_files(spec, target, files.dashboards_path), PROVISION_MARK):
        echo(f"wrote {path}")


def provision_files(settings: Settings, spec: DatasourceSpec, files: ProvisioningFiles, *, dry_run: bool,
                    echo: Echo) -> None:
    """`provision --files-only`: which site this is (from the site config and the files already there), then
    the provisioning YAML named for it; with `dry_run`, nothing."""
    site = settle(settings, files_sightings(files.out, settings.site), persist=not dry_run, echo=echo)
    if not dry_run:
        _write_files(files, spec, Target.for_site(site), echo)


def provisioning_files(spec: DatasourceSpec, target: Target, dashboards_path: str,
                       update_seconds: int = 30) -> dict[str, str]:
    """Relative path -> YAML text for Grafana's provisioning/ directory.

    Named for the site (`gpudash-<site_id>.yaml`, provider `gpudash-<site_id>`), so two sites provisioning one
    Grafana write two files each and never replace the other's, and Grafana sees two providers, not a clash.
    """
    name = f"gpudash-{target.site_id}"
    datasource = {
        "apiVersion": 1,
        "datasources": [{**{k: v for k, v in spec.owned_fields().items()}, "orgId": 1, "isDefault": False,
                         "editable": False, "jsonData": spec.json_data}],
    }
    provider: dict[str, Any] = {
        "name": name, "orgId": 1, "type": "file", "disableDeletion": False,
        "updateIntervalSeconds": update_seconds, "allowUiUpdates": False,
        "options": {"path": dashboards_path, "foldersFromFilesStructure": False},
    }
    if target.folder_uid:
        provider.update(folder=target.folder_title, folderUid=target.folder_uid)
    else:
        provider["folder"] = ""
    header = (f"{PROVISION_MARK}`. Grafana reads it at start-up.\n"
              "# Regenerate it rather than editing it by hand.\n")
    dump = lambda data: header + yaml.safe_dump(data, sort_keys=False, default_flow_style=False)  # noqa: E731
    return {
        f"datasources/{name}.yaml": dump(datasource),
        f"dashboards/{name}.yaml": dump({"apiVersion": 1, "providers": [provider]}),
    }

