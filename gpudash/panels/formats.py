"""The generated dashboards in each format gpudash writes, as {file name: bytes}.

`classic`: the dashboard JSON, for file provisioning, the sidecar ConfigMaps, Grafana 11-12 and the legacy
`/api` (Grafana 13 refuses v2 files on those paths). `v2`: `dashboard.grafana.app/v2` resources, committed beside
the JSON (dashboards/v2). `git-sync`: the same resources, for a folder a Grafana Git Sync repository reads.
"""

from __future__ import annotations

from typing import Any

from gpudash.catalog import Profile
from gpudash.panels.build import render
from gpudash.schema_v2.layout import ROWS
from gpudash.schema_v2.resource import to_v2

CLASSIC, V2, GIT_SYNC = "classic", "v2", "git-sync"
FORMATS = (CLASSIC, V2, GIT_SYNC)


def v2_resources(built: dict[str, dict[str, Any]], profile: Profile, sections: str = ROWS) -> dict[str, dict[str, Any]]:
    """The v2 resource of every built dashboard, under the same file name (`<uid>.json`)."""
    return {name: to_v2(dashboard, profile=profile, sections=sections) for name, dashboard in built.items()}


def files_for(fmt: str, built: dict[str, dict[str, Any]], profile: Profile) -> dict[str, bytes]:
    """The files of one format, rendered as the committed files are: sorted keys, two-space indent."""
    chosen = built if fmt == CLASSIC else v2_resources(built, profile)
    return {name: render(data) for name, data in chosen.items()}
