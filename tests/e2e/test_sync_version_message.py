"""The version message gpudash leaves in Grafana's history, read from git (run here outside a checkout)."""

from __future__ import annotations

from pathlib import Path

from gpudash.sync.local import message_site, version_message


def test_version_message_outside_git(tmp_path: Path) -> None:
    expected = "gpudash 0.1.0 for site lab-a1b2c3 (not from a git checkout)"
    assert version_message(tmp_path, "lab-a1b2c3") == ("", expected)


def test_the_site_is_read_back_from_version_messages(tmp_path: Path) -> None:
    _, message = version_message(tmp_path, "lab-a1b2c3")
    assert message_site(message) == "lab-a1b2c3"
    assert message_site("gpudash 0.1.0 for site b-2 from commit 1a2b with uncommitted changes") == "b-2"
    assert message_site("gpudash 0.1.0 from commit 1a2b3c4") == ""  # a gpudash without sites
    assert message_site("gpudash 0.1.0 (not from a git checkout)") == ""
    assert message_site("edited in the UI") is None and message_site("Initial save") is None
