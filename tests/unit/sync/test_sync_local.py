"""Reading the local dashboard JSON: every problem is one line naming the file, before anything is sent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from grafana_standin.testkit import make_dashboard, write_set

from gpudash.errors import ConfigError
from gpudash.sync.local import load_local, slug


def test_loads_every_json_file_sorted(tmp_path: Path) -> None:
    write_set(tmp_path, [make_dashboard("b", "B"), make_dashboard("a", "A")])
    assert [d["uid"] for d in load_local(tmp_path)] == ["a", "b"]


def test_the_committed_dashboards_load(root: Path) -> None:
    dashboards = load_local(root / "dashboards" / "json")
    assert dashboards and all("gpudash" in d["tags"] for d in dashboards)


@pytest.mark.parametrize(("content", "expected"), [
    ("{", "a.json: line 1, column 2: invalid JSON"),
    ("[]", "a.json: expected a dashboard (a JSON object), got list"),
    ('{"title": "A"}', "a.json: uid: expected 1-40 characters of A-Z a-z 0-9 _ -, got None"),
    ('{"uid": "a b", "title": "A"}', "a.json: uid: expected 1-40 characters"),
    ('{"uid": "a", "title": " "}', "a.json: title: expected a non-empty string, got ' '"),
    ('{"uid": "a", "title": "A", "panels": {}}', "a.json: panels: expected a list"),
])
def test_bad_files_name_the_file_and_the_key(tmp_path: Path, content: str, expected: str) -> None:
    (tmp_path / "a.json").write_text(content)
    with pytest.raises(ConfigError) as caught:
        load_local(tmp_path)
    assert expected in caught.value.format_message()
    assert "\n" not in caught.value.format_message()


def test_duplicate_uids_and_titles(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps(make_dashboard("x", "One")))
    (tmp_path / "b.json").write_text(json.dumps(make_dashboard("x", "Two")))
    with pytest.raises(ConfigError, match=r"b\.json: uid 'x' is also used by .*a\.json"):
        load_local(tmp_path)
    (tmp_path / "b.json").write_text(json.dumps(make_dashboard("y", "one")))
    with pytest.raises(ConfigError, match=r"b\.json: title 'one' collides with the title in .*a\.json"):
        load_local(tmp_path)


def test_missing_or_empty_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such directory"):
        load_local(tmp_path / "nope")
    with pytest.raises(ConfigError, match=r"no dashboards \(\*\.json\) found"):
        load_local(tmp_path)


def test_slug_is_grafanas() -> None:
    assert slug("My Dash") == slug("my-dash") == "my-dash"
    assert slug("GPU fleet: H200 (prod)") == "gpu-fleet-h200-prod"
