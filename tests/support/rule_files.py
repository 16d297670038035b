"""The rendered rule files as tests read them: the rules of a file, an alert's rules by name, and a site file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gpudash.repository import ALERTS_FILE


def rules_of(files: dict[str, str], name: str = ALERTS_FILE) -> list[dict[str, Any]]:
    groups = yaml.safe_load(files[name])["groups"]
    return [rule for group in groups for rule in group["rules"]]


def alerts_named(files: dict[str, str], alert: str) -> list[dict[str, Any]]:
    return [r for r in rules_of(files) if r["alert"] == alert]


def site_file(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(data))
    return path
