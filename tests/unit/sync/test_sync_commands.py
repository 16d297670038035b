"""The sync commands before they reach Grafana: what to set when nothing is set."""

from __future__ import annotations

import os
from pathlib import Path

from support.cli import gpudash


def test_unset_grafana_url_says_what_to_set(tmp_path: Path) -> None:
    done = gpudash("push", cwd=tmp_path, env={key: None for key in os.environ if key.startswith("GRAFANA_")})
    assert done.code == 2
    assert done.out == ""
    assert done.err.count("\n") == 1
    assert done.err.startswith("gpudash: GRAFANA_URL is not set: set GRAFANA_URL")
    assert "GRAFANA_TOKEN" in done.err
