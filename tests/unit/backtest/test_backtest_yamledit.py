"""Editing thresholds.yaml in place: values change, comments and order stay, a bad result writes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.paths import ROOT

from gpudash.backtest.yamledit import edited, set_value, write_validated
from gpudash.config.loading import load_thresholds
from gpudash.errors import ConfigError

TEXT = (ROOT / "thresholds.yaml").read_text(encoding="utf-8")


def test_one_value_changes_and_its_comment_keeps_its_column() -> None:
    new = set_value(TEXT, ("temperature", "gpu_warning_celsius"), "88")
    old_lines, new_lines = TEXT.splitlines(), new.splitlines()
    changed = [(a, b) for a, b in zip(old_lines, new_lines, strict=True) if a != b]
    assert len(changed) == 1
    before, after = changed[0]
    assert after.index("#") == before.index("#") and "gpu_warning_celsius: 88 " in after


def test_the_path_picks_the_key_of_its_own_section() -> None:
    new = edited(TEXT, {("alerts", "temperature", "for"): "5m", ("alerts", "throttling", "for"): "4m"})
    assert "    for: 5m " in new and "    for: 4m " in new
    assert new.count("for: 3m") == TEXT.count("for: 3m") - 2


def test_unknown_path_or_section_is_refused() -> None:
    with pytest.raises(ConfigError, match="not found"):
        set_value(TEXT, ("temperature", "nope"), "1")
    with pytest.raises(ConfigError, match="section"):
        set_value(TEXT, ("temperature",), "1")


def test_written_only_when_it_loads(tmp_path: Path) -> None:
    path = tmp_path / "thresholds.yaml"
    path.write_text(TEXT, encoding="utf-8")
    bad = set_value(TEXT, ("temperature", "gpu_warning_celsius"), "99")  # above its critical level
    with pytest.raises(ConfigError, match="nothing written"):
        write_validated(path, bad)
    assert path.read_text(encoding="utf-8") == TEXT
    assert list(tmp_path.iterdir()) == [path]
    write_validated(path, set_value(TEXT, ("temperature", "gpu_warning_celsius"), "82"))
    assert load_thresholds(path).temperature.gpu.warning == 82


def test_a_linked_thresholds_file_is_written_through_and_stays_a_link(tmp_path: Path) -> None:
    real = tmp_path / "site-config" / "thresholds.yaml"
    real.parent.mkdir()
    real.write_text(TEXT, encoding="utf-8")
    real.chmod(0o600)
    link = tmp_path / "repo" / "thresholds.yaml"
    link.parent.mkdir()
    link.symlink_to(real)
    write_validated(link, set_value(TEXT, ("temperature", "gpu_warning_celsius"), "82"))
    assert link.is_symlink() and link.resolve() == real
    assert load_thresholds(real).temperature.gpu.warning == 82
    assert oct(real.stat().st_mode & 0o777) == "0o600"
    assert sorted(p.name for p in real.parent.iterdir()) == ["thresholds.yaml"]
    assert sorted(p.name for p in link.parent.iterdir()) == ["thresholds.yaml"]
