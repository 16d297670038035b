"""Typed Grafana operations over grafana-client, each one request through `Grafana.call`.

Only what behaves the same on Grafana 9 to 13 is relied on: dashboards by uid, folders by uid, data
sources by uid, search by dashboardUIDs and tag. Response fields that differ by version (the POST
response's folderUid, DELETE's id or uid, the folder list's scope) are never read. Where Grafana serves
dashboards on /apis (found by `probe`), dashboards and folders go there (remote_apis.ApisDashboards);
data sources and version histories stay on /api, which 13 still serves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any
from urllib.parse import quote

from gpudash.compare.content import read_marker
from gpudash.sync.grafana_api import Grafana, GrafanaFailure
from gpudash.sync.local import message_site
from gpudash.sync.plan import History, RemoteDashboard
from gpudash.sync.remote_apis import ApisDashboards, discover
from gpudash.sync.schema import CLASSIC, Schema

SEARCH_CHUNK = 100  # uids per search request: keeps the query string well under proxy limits
PAGE = 1000
SEARCH = "dashboard search"


def dashboard_label(uid: str, title: str = "") -> str:
    return f"dashboard {title!r} ({uid})" if title else f"dashboard {uid}"


class GrafanaRemote:
    def __init__(self, grafana: Grafana, workers: int = 8) -> None:
        self.grafana = grafana
        self.workers = max(1, workers)
        self.server_version = ""
        self.apis: ApisDashboards | None = None  # set by `probe` where Grafana serves dashboards on /apis

    @property
    def where(self) -> str:
        return f"Grafana at {self.grafana.connection.url}"

    def probe(self) -> str:
        """Check the address and the credentials once, up front; return Grafana's version."""
        g = self.grafana
        body = g.expect("", g.call("", "GET", "/api/frontend/settings",
                                   lambda: g.api.client.GET("/frontend/settings")), dict)
        info = body.get("buildInfo")
        if not isinstance(info, dict):
            raise GrafanaFailure(f"{self.where}: /api/frontend/settings has no buildInfo; is this Grafana?")
        self.server_version = str(info.get("version", "")).split("-")[0]
        major = self.server_version.split(".")[0]
        if major.isdigit() and int(major) >= 12:  # unified storage; before 12 nothing answers on /apis
            versions = discover(g)
            if versions:
                self.apis = ApisDashboards(g, versions, g.connection.apis_namespace)
        return self.server_version

    @property
    def v2_served(self) -> bool:
        return self.apis is not None and "v2" in self.apis.versions

    @property
    def schema(self) -> Schema:
        return self.apis.schema if self.apis is not None else CLASSIC

    def use_schema(self, schema: Schema) -> None:
        """Write (and read) dashboards in `schema` (v2 only where /apis serves it: gpudash.sync.schema.choose)."""
        if self.apis is not None:
            self.apis.schema = schema

    @property
    def api_name(self) -> str:
        """Which API the dashboards go through, for the run's first line."""
        return f"/apis v{self.apis.version.removeprefix('v')}" if self.apis is not None else "/api"

    def _get(self, what: str, path: str, request: Callable[[], Any]) -> Any:
        """GET: the answer, or None when Grafana answers 404."""
        try:
            return self.grafana.call(what, "GET", path, request)
        except GrafanaFailure as exc:
            if exc.status == 404:
                return None
            raise

    def _found(self, what: str, path: str, request: Callable[[], Any]) -> dict[str, Any] | None:
        """GET one object: its JSON object, or None when Grafana answers 404."""
        body = self._get(what, path, request)
        return None if body is None else dict(self.grafana.expect(what, body, dict))

    # ------------------------------------------------------------------ dashboards

    def dashboard(self, uid: str, title: str = "") -> RemoteDashboard | None:
        g, what = self.grafana, dashboard_label(uid, title)
        if self.apis is not None:
            return self.apis.dashboard(uid, what)
        body = self._found(what, f"/api/dashboards/uid/{uid}", lambda: g.api.dashboard.get_dashboard(uid))
        if body is None:
            return None
        try:
            return RemoteDashboard.from_api(uid, body)
        except (ValueError, TypeError) as exc:
            raise GrafanaFailure(f"{what}: Grafana's answer has no dashboard and meta "
                                 f"({g.printable(str(exc), 120)})") from None

    def history(self, uid: str, title: str = "") -> History | None:
        """What the version history says about who wrote this dashboard (a UI save drops the marker); None
        when the dashboard was deleted meanwhile.

        Evidence: the sites that gpudash version messages name, and the marker in the oldest version Grafana
        kept (what it was created as; the first version's message always reads "Initial save"). The list
        is a bare array up to 11.4 and {continueToken, versions} after; both are read.
        """
        g, what = self.grafana, dashboard_label(uid, title)
        listing = self._get(what, f"/api/dashboards/uid/{uid}/versions",
                            lambda: g.api.dashboard_versions.get_dashboard_versions_by_uid(uid))
        if listing is None:
            return None
        items = listing.get("versions") if isinstance(listing, dict) else listing
        versions = [v for v in items or [] if isinstance(v, dict) and isinstance(v.get("version"), int)]
        named = [message_site(str(v.get("message", ""))) for v in sorted(versions, key=lambda v: -v["version"])]
        sites = tuple(dict.fromkeys(site for site in named if site))
        history = History(sites, "" in named)
        if sites or not versions:
            return history
        oldest = min(v["version"] for v in versions)
        try:
            detail = g.call(what, "GET", f"/api/dashboards/uid/{uid}/versions/{oldest}",
                            lambda: g.api.dashboard_versions.get_dashboard_version_by_uid(uid, oldest))
        except GrafanaFailure as exc:
            if exc.status in (404, 500):  # 9-11 answer 500 for a version that is gone
                return history
            raise
        data = detail.get("data") if isinstance(detail, dict) else None
        return replace(history, oldest_marker=read_marker(data)) if isinstance(data, dict) else history

    def existing_uids(self, uids: Iterable[str]) -> set[str]:
        """Which of `uids` exist, by search (cheap), so a first push does not GET what is not there."""
        wanted = sorted(set(uids))
        found: set[str] = set()
        g = self.grafana
        for start in range(0, len(wanted), SEARCH_CHUNK):
            chunk = wanted[start:start + SEARCH_CHUNK]
            hits = g.expect(SEARCH, g.call(SEARCH, "GET", "/api/search",
                                               self._search(type_="dash-db", dashboard_uids=chunk)), list)
            found.update(str(hit.get("uid")) for hit in hits if isinstance(hit, dict))
        return found & set(wanted)

    def dashboards(self, wanted: dict[str, str]) -> dict[str, RemoteDashboard]:
        """uid -> remote copy for each uid in `wanted` (uid -> title) that exists; GETs run in parallel.
        On /apis: the namespace's list, a page per request, specs included (no GET per dashboard)."""
        if self.apis is not None:
            found: dict[str, RemoteDashboard] = {}
            for item in self.apis.listing():  # stops paging once every wanted uid has been seen
                if item.uid in wanted:  # only these are read again where stored in the other schema
                    found[item.uid] = self.apis.as_stored(dashboard_label(item.uid, item.title), item)
                    if len(found) == len(wanted):
                        break
            return found
        present = sorted(self.existing_uids(wanted))
        if not present:
            return {}
        with ThreadPoolExecutor(max_workers=min(self.workers, len(present))) as pool:
            results = list(pool.map(lambda uid: self.dashboard(uid, wanted[uid]), present))
        return {item.uid: item for item in results if item is not None}

    def _search(self, **params: Any) -> Callable[[], Any]:
        return lambda: self.grafana.api.search.search_dashboards(limit=PAGE, **params)

    def tagged(self, tag: str) -> list[dict[str, Any]]:
        """Every dashboard search hit carrying `tag`, all pages (on /apis: the list, filtered here)."""
        g = self.grafana
        if self.apis is not None:
            return [{"uid": item.uid, "title": item.title, "folderUid": item.folder_uid}
                    for item in self.apis.listing()
                    if isinstance(item.dashboard.get("tags"), list) and tag in item.dashboard["tags"]]
        hits: list[dict[str, Any]] = []
        page = 1
        while True:
            batch = g.expect(SEARCH, g.call(SEARCH, "GET", "/api/search",
                                                self._search(type_="dash-db", tag=tag, page=page)), list)
            hits += [hit for hit in batch if isinstance(hit, dict)]
            if len(batch) < PAGE:
                return hits
            page += 1

    def save(self, body: dict[str, Any], what: str, read: RemoteDashboard | None = None) -> dict[str, Any]:
        """Save the legacy body {dashboard, message, folderUid}; on /apis, over the copy `read` (None: create)."""
        g = self.grafana
        if self.apis is not None:
            return self.apis.save(body, what, read)
        answer = g.call(what, "POST", "/api/dashboards/db", lambda: g.api.dashboard.update_dashboard(body))
        return dict(g.expect(what, answer, dict))

    def delete(self, uid: str, what: str) -> None:
        g = self.grafana
        if self.apis is not None:
            self.apis.delete(uid, what)
            return
        g.expect(what, g.call(what, "DELETE", f"/api/dashboards/uid/{uid}",
                              lambda: g.api.dashboard.delete_dashboard(uid)), dict)

    # ------------------------------------------------------------------ folders

    def folder(self, uid: str) -> dict[str, Any] | None:
        g = self.grafana
        if self.apis is not None:
            return self.apis.folder(uid)
        return self._found(f"folder {uid}", f"/api/folders/{uid}", lambda: g.api.folder.get_folder(uid))

    def create_folder(self, uid: str, title: str) -> dict[str, Any]:
        g, what = self.grafana, f"folder {title!r} ({uid})"
        if self.apis is not None:
            return self.apis.create_folder(uid, title)
        body = g.call(what, "POST", "/api/folders", lambda: g.api.folder.create_folder(title, uid=uid))
        return dict(g.expect(what, body, dict))

    # ------------------------------------------------------------------ data sources

    def datasource(self, uid: str) -> dict[str, Any] | None:
        g = self.grafana
        return self._found(f"data source {uid}", f"/api/datasources/uid/{uid}",
                           lambda: g.api.datasource.get_datasource_by_uid(quote(uid, safe="")))

    def create_datasource(self, body: dict[str, Any]) -> dict[str, Any]:
        g, what = self.grafana, f"data source {body.get('name')!r} ({body.get('uid')})"
        answer = g.call(what, "POST", "/api/datasources", lambda: g.api.datasource.create_datasource(body))
        return dict(g.expect(what, answer, dict))

    def update_datasource(self, uid: str, body: dict[str, Any]) -> dict[str, Any]:
        g, what = self.grafana, f"data source {body.get('name')!r} ({uid})"
        answer = g.call(what, "PUT", f"/api/datasources/uid/{uid}",
                        lambda: g.api.datasource.update_datasource_by_uid(quote(uid, safe=""), body))
        return dict(g.expect(what, answer, dict))
