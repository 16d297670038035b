"""Fixtures shared by the rules tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.paths import ROOT

from gpudash.config.loading import Settings, load_settings


@pytest.fixture
def settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Settings:
    monkeypatch.chdir(tmp_path)  # no stray gpudash.yaml from the working directory
    monkeypatch.delenv("GPUDASH_SITE", raising=False)
    return load_settings(ROOT / "thresholds.yaml")
