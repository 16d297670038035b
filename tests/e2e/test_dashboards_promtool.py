"""Every dashboard expression, each profile, parses with promtool."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.paths import ROOT
from support.slack import budget

from gpudash.catalog import PROFILES
from gpudash.config.loading import load_settings
from gpudash.panels.build import build_all


def exprs(dashboard: dict[str, Any]) -> Iterator[str]:
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            continue
        for target in panel["targets"]:
            yield target["expr"]
    for annotation in dashboard["annotations"]["list"]:
        if "expr" in annotation:
            yield annotation["expr"]


def substitute_variables(expr: str) -> str:
    """What Grafana sends for a panel with every variable at All."""
    for name, value in (("$__rate_interval", "1m"), ("$__range", "6h"), ("$__interval", "30s"),
                        ("$cluster", ".*"), ("$instance", ".*"), ("$gpu", ".*"), ("$ledger", "30d")):
        expr = expr.replace(name, value)
    return expr


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_every_expression_parses_with_promtool(tmp_path: Path, profile: str) -> None:


    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool is not installed: run `make deps`")
    built = build_all(load_settings(ROOT / "thresholds.yaml"), ROOT / "dashboards", profile_name=profile)
    rules = [{"record": f"check:panel_{i}:expr", "expr": substitute_variables(expr)}
             for i, expr in enumerate(e for d in built.values() for e in exprs(d))]
    path = tmp_path / "panels.rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "panels", "rules": rules}]}))
    result = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=budget(60))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(rules)} rules found" in result.stdout
