"""What the sync tests share: a Grafana to test against (the stand-in, or a real one), small dashboards,
and running `gpudash` in-process with its output captured.

The fixtures that hand a test its Grafana are in fixtures.py.
"""

from __future__ import annotations

import contextlib
import copy
import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import niquests
from grafana_client import GrafanaApi
from support.cli import gpudash
from support.paths import ROOT
from support.slack import budget

from gpudash.compare.content import MARKER_KEY, marker_of_annotations

from .migrate import set_threshold, ui_save_model
from .server import UI_MODEL_KEYS, StandIn
from .v2_schema import v1_to_v2

REPO = ROOT
THRESHOLDS = REPO / "thresholds.yaml"
GRAFANA_ENV = ("GRAFANA_URL", "GRAFANA_TOKEN", "GRAFANA_USER", "GRAFANA_PASSWORD", "GRAFANA_ORG_ID",
               "GRAFANA_NAMESPACE", "GPUDASH_SITE", "GPUDASH_THRESHOLDS", "PROMETHEUS_URL")


def make_dashboard(uid: str, title: str, threshold: float = 80.0, expr: str = "avg(gpu_util)",
                   panels: int = 3) -> dict[str, Any]:
    """A small dashboard shaped like the generated ones (fixed uid, gpudash tag, thresholds, queries)."""
    body: list[dict[str, Any]] = [{"id": 1, "type": "row", "title": "Overview", "collapsed": False, "panels": [],
                                   "gridPos": {"h": 1, "w": 24, "x": 0, "y": 0}}]
    for n in range(2, panels + 2):
        body.append({
            "id": n, "type": "timeseries", "title": f"Panel {n}", "gridPos": {"h": 8, "w": 12, "x": 0, "y": n * 8},
            "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "fieldConfig": {"defaults": {"unit": "percent", "thresholds": {"mode": "absolute", "steps": [
                {"color": "green", "value": None}, {"color": "red", "value": threshold}]}}, "overrides": []},
            "targets": [{"refId": "A", "expr": f"{expr} * {n}", "datasource": {"type": "prometheus",
                                                                              "uid": "${datasource}"}}],
        })
    return {"uid": uid, "title": title, "tags": ["gpudash", "gpu"], "panels": body, "refresh": "30s",
            "schemaVersion": 39, "time": {"from": "now-6h", "to": "now"}, "timezone": "browser",
            "templating": {"list": [{"name": "datasource", "type": "datasource", "query": "prometheus"}]},
            "editable": True, "description": f"{title} (test)"}


def write_set(directory: Path, dashboards: list[dict[str, Any]]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("*.json"):
        old.unlink()
    for item in dashboards:
        (directory / f"{item['uid']}.json").write_text(json.dumps(item, indent=2, sort_keys=True) + "\n")
    return directory


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str

    @property
    def text(self) -> str:
        return self.out + self.err

    @property
    def writes(self) -> int:
        """Writes as the run counted them (its summary line), so it works against a real Grafana too."""
        found = re.findall(r"(\d+) writes", self.out)
        assert found, f"no summary line in:\n{self.text}"
        return int(found[-1])


def run_gpudash(args: list[str], env: dict[str, str | None], cwd: Path | None = None) -> Result:
    """`gpudash ARGS` in-process through gpudash.cli.main, exactly as the console script runs it (in `cwd`)."""
    ran = gpudash(*(str(a) for a in args), env=env, cwd=cwd)
    return Result(ran.code, ran.out, ran.err)


@dataclass
class GrafanaUnderTest:
    """The Grafana a test talks to, with the setup a test needs: UI edits, foreign dashboards, cleanup."""

    url: str
    token: str
    version: str
    workdir: Path
    standin: StandIn | None = None
    prefix: str = field(default_factory=lambda: f"t{uuid.uuid4().hex[:8]}")
    created: list[str] = field(default_factory=list)

    @property
    def real(self) -> bool:
        return self.standin is None

    @property
    def folder_uid(self) -> str:
        return f"{self.prefix}-gpu"

    @property
    def folder_title(self) -> str:
        return f"GPU {self.prefix}"

    @property
    def site_id(self) -> str:
        """One site per test, so tests sharing a real Grafana never take each other's dashboards for theirs."""
        return self.prefix

    def uid(self, name: str) -> str:
        return f"{self.prefix}-{name}"

    def dashboards(self, count: int, **kwargs: Any) -> list[dict[str, Any]]:
        return [make_dashboard(self.uid(f"d{n:03d}"), f"{self.prefix} dashboard {n}", **kwargs) for n in range(count)]

    @property
    def site(self) -> Path:
        path = self.workdir / "gpudash.yaml"
        if not path.exists():
            path.write_text(
                f"site_id: {self.site_id}\ngrafana:\n  folder: {self.folder_title}\n  folder_uid: {self.folder_uid}\n"
                f"  datasource_uid: {self.prefix}-prom\n  datasource_name: Prometheus {self.prefix}\n")
        return path

    @property
    def local_dir(self) -> Path:
        return self.workdir / "json"

    def env(self, **extra: str | None) -> dict[str, str | None]:
        values: dict[str, str | None] = dict.fromkeys(GRAFANA_ENV)
        values.update(GRAFANA_URL=self.url, GRAFANA_TOKEN=self.token)
        values.update(extra)
        return values

    def gpudash(self, *args: str, env: dict[str, str | None] | None = None) -> Result:
        """`gpudash COMMAND` against this Grafana, the local set in `local_dir`, and this test's folder."""
        command, *rest = args
        full = [command, "--dir", str(self.local_dir), "--site", str(self.site), "--thresholds", str(THRESHOLDS),
                "--retries", "1", *rest]
        return run_gpudash(full, env if env is not None else self.env())

    def push(self, dashboards: list[dict[str, Any]], *args: str) -> Result:
        write_set(self.local_dir, dashboards)
        self.created += [d["uid"] for d in dashboards]
        return self.gpudash("push", *args)

    # ---- direct access, the way a person or another tool would change things
    def api(self) -> GrafanaApi:
        return GrafanaApi.from_url(self.url, credential=self.token, timeout=budget(10))

    def get(self, uid: str) -> dict[str, Any] | None:
        from grafana_client.client import GrafanaClientError

        try:
            return dict(self.api().dashboard.get_dashboard(uid))
        except GrafanaClientError as exc:
            if exc.status_code == 404:
                return None
            raise

    def ui_edit(self, uid: str, change: Callable[[dict[str, Any]], None]) -> None:
        """A save from the dashboard editor: the frontend re-serialises its model (unknown keys are dropped)."""
        current = self.get(uid)
        assert current is not None
        model = {k: copy.deepcopy(v) for k, v in current["dashboard"].items() if k in UI_MODEL_KEYS}
        change(model)
        self.api().dashboard.update_dashboard({"dashboard": model, "folderUid": current["meta"]["folderUid"],
                                               "overwrite": False, "message": "edited in the UI"})

    # ---- a person in Grafana 13's dashboard editor (over HTTP, so it works on a real Grafana too)
    def _person(self) -> niquests.Session:
        """The stand-in's user alice (so updatedBy names a person), or the test's token on a real Grafana."""
        session = niquests.Session()
        if self.standin is not None:
            session.auth = ("alice", "alice")
        else:
            session.headers["Authorization"] = f"Bearer {self.token}"
        return session

    def server_version(self) -> str:
        return str(niquests.get(f"{self.url}/api/health", timeout=budget(10)).json()["version"])

    def apis_path(self, uid: str = "", version: str = "v1") -> str | None:
        """The dashboards' /apis path at `version` (a dashboard's, with `uid`), or None when Grafana does not
        serve it."""
        found = self._person().get(f"{self.url}/apis/dashboard.grafana.app/", timeout=budget(10))
        versions = found.json().get("versions", []) if found.status_code == 200 else []
        if not any(v.get("version") == version for v in versions):
            return None
        namespace = self.standin.namespace if self.standin is not None else "default"
        return f"/apis/dashboard.grafana.app/{version}/namespaces/{namespace}/dashboards" + (f"/{uid}" if uid else "")

    def editor_saves_v2(self) -> bool:
        """Whether a save from this Grafana's editor stores v2 (13 with dynamic dashboards, the default)."""
        if self.standin is not None:
            return self.standin.flavor.editor_saves_v2
        major = self.server_version().split(".")[0]
        return major.isdigit() and int(major) >= 13 and self.apis_path(version="v2") is not None

    def ui_save(self, uid: str, change: Callable[[dict[str, Any]], None] | None = None,
                change_v2: Callable[[dict[str, Any]], None] | None = None) -> None:
        """Open the dashboard in the editor and save it, as Grafana 12.2+/13 does (migrate.ui_save_model:
        schemaVersion 42, pluginVersion, plugin defaults, no nulls); `change` is the person's own edit, if any.
        On /apis: PUT with the loaded metadata (resourceVersion, annotations) and fieldValidation=Ignore.
        On 13 with dynamic dashboards: stored as v2 (`change_v2` edits the v2 spec: tabs, auto grids), through
        a PUT without resourceVersion, as the frontend's v2 save sends it (utils.ts); a dashboard stored as v2
        already is loaded at v2 and edited there only (`change_v2`)."""
        person, version, path = self._person(), self.server_version(), self.apis_path(uid)
        if path is not None and self.editor_saves_v2():
            v2_path = self.apis_path(uid, "v2")
            assert v2_path is not None
            loaded = person.get(self.url + path, timeout=budget(10))  # the classic model: what `change` edits
            loaded.raise_for_status()
            body = loaded.json()
            stored = str(((body.get("status") or {}).get("conversion") or {}).get("storedVersion") or "")
            if stored.startswith("v2"):  # the editor loads a v2-stored dashboard as v2: no v1 on the way
                if change is not None:
                    raise ValueError(f"{uid} is stored as v2 and edited in v2: give the edit as change_v2")
                loaded = person.get(self.url + v2_path, timeout=budget(10))
                loaded.raise_for_status()
                body = loaded.json()
                spec = body["spec"]
            else:
                model = ui_save_model(body["spec"], version)
                if change is not None:
                    change(model)
                spec = v1_to_v2(model)
            if change_v2 is not None:
                change_v2(spec)
            annotations = {**body["metadata"]["annotations"], "grafana.app/message": "saved in the UI"}
            answer = person.put(self.url + v2_path, params={"fieldValidation": "Ignore"},
                                json={"apiVersion": "dashboard.grafana.app/v2", "kind": "Dashboard",
                                      "metadata": {"name": uid, "annotations": annotations}, "spec": spec},
                                timeout=budget(10))
        elif path is not None:
            loaded = person.get(self.url + path, timeout=budget(10))
            loaded.raise_for_status()
            body = loaded.json()
            model = ui_save_model(body["spec"], version)
            if change is not None:
                change(model)
            metadata = {k: body["metadata"][k] for k in ("name", "resourceVersion", "annotations")}
            metadata["annotations"] = {**metadata["annotations"], "grafana.app/message": "saved in the UI"}
            answer = person.put(self.url + path, params={"fieldValidation": "Ignore"},
                                json={"apiVersion": body["apiVersion"], "kind": "Dashboard", "metadata": metadata,
                                      "spec": model}, timeout=budget(10))
        else:
            current = self.get(uid)
            assert current is not None
            model = ui_save_model(current["dashboard"], version)
            if change is not None:
                change(model)
            answer = person.post(f"{self.url}/api/dashboards/db", json={
                "dashboard": model, "folderUid": current["meta"]["folderUid"], "overwrite": False,
                "message": "saved in the UI"}, timeout=budget(10))
        answer.raise_for_status()

    @property
    def on_apis(self) -> bool:
        """Whether gpudash talks to this Grafana's dashboards over /apis (13.x) rather than /api."""
        if self.standin is not None:
            return bool(self.standin.flavor.apis_versions)
        return self.apis_path() is not None

    def answered(self, status: int, message: str) -> str:
        """How gpudash reports Grafana's refusal: /apis answers a Kubernetes Status, whose reason it names."""
        reason = {400: " BadRequest", 403: " Forbidden", 404: " NotFound", 409: " Conflict"}.get(status, "")
        return f"answered {status}{reason if self.on_apis else ''}: {message}"

    def resource(self, uid: str) -> dict[str, Any] | None:
        """The dashboard's /apis resource, or None (gone, or no /apis on this Grafana)."""
        path = self.apis_path(uid)
        if path is None:
            return None
        answer = self._person().get(self.url + path, timeout=budget(10))
        return dict(answer.json()) if answer.status_code == 200 else None

    def marker(self, uid: str) -> dict[str, Any] | None:
        """gpudash's marker: in the JSON on /api, in the metadata annotations on /apis."""
        resource = self.resource(uid)
        if resource is not None:
            return marker_of_annotations(resource["metadata"].get("annotations", {}))
        current = self.get(uid)
        return None if current is None else current["dashboard"].get(MARKER_KEY)

    def ui_change_threshold(self, uid: str, value: float) -> None:
        """A person moving a threshold step in the editor and saving."""
        self.ui_save(uid, lambda model: set_threshold(model, value))

    def json_model_edit(self, uid: str, change: Callable[[dict[str, Any]], None]) -> None:
        """An edit of the JSON model in the UI's settings: every key kept, the marker included."""
        current = self.get(uid)
        assert current is not None
        model = copy.deepcopy(current["dashboard"])
        assert MARKER_KEY in model or self.apis_path() is not None  # on /apis the marker is in the annotations
        change(model)
        self.api().dashboard.update_dashboard({"dashboard": model, "folderUid": current["meta"]["folderUid"],
                                               "overwrite": False})

    def api_copy(self, uid: str, new_uid: str, new_title: str) -> None:
        """Another team's copy made through the API: GET the JSON, change uid and title, POST it (marker and all);
        on /apis the resource, its annotations included."""
        resource = self.resource(uid)
        path = self.apis_path()
        if resource is not None and path is not None:
            self.created.append(new_uid)
            annotations = {k: v for k, v in resource["metadata"]["annotations"].items()
                           if not k.startswith(("grafana.app/created", "grafana.app/updated"))}
            body = {"metadata": {"name": new_uid, "annotations": annotations},
                    "spec": {**resource["spec"], "title": new_title}}
            self._person().post(self.url + path, json=body, timeout=budget(10)).raise_for_status()
            return
        current = self.get(uid)
        assert current is not None
        model = {k: copy.deepcopy(v) for k, v in current["dashboard"].items() if k not in ("id", "version")}
        model.update(uid=new_uid, title=new_title)
        self.created.append(new_uid)
        self.api().dashboard.update_dashboard({"dashboard": model, "folderUid": current["meta"]["folderUid"],
                                               "overwrite": False, "message": "copied"})

    def add_foreign(self, dashboard: dict[str, Any], folder_uid: str | None = None) -> None:
        """A dashboard someone made by hand (no gpudash marker)."""
        body = {"dashboard": dashboard, "overwrite": False}
        body["folderUid"] = self.folder_uid if folder_uid is None else folder_uid
        self.created.append(dashboard["uid"])
        self.api().dashboard.update_dashboard(body)

    def cleanup(self) -> None:
        """Delete what the test made; anything already gone (pruned, never created) is fine."""
        api = self.api()
        for uid in self.created:
            with contextlib.suppress(Exception):
                api.dashboard.delete_dashboard(uid)
        with contextlib.suppress(Exception):
            api.folder.delete_folder(self.folder_uid)
