"""A secret file every user of the machine can read: one warning line naming the file and its mode, once, and the
command goes on."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from support.cli import gpudash
from support.paths import ROOT

from gpudash import secret_files
from gpudash.sync.grafana_api import connection_from

ENV = {"GRAFANA_URL": "http://grafana:3000"}


@pytest.fixture(autouse=True)
def nothing_warned_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(secret_files, "_WARNED", set())


def secret(tmp_path: Path, name: str, mode: int, text: str = "glsa_s3cr3t\n") -> Path:
    path = tmp_path / name
    path.write_text(text)
    path.chmod(mode)
    return path


def test_a_grafana_token_file_others_can_read_is_named_once_with_its_mode(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    token = secret(tmp_path, "token", 0o644)
    for _ in range(2):
        assert connection_from(ENV, token_file=token).token == "glsa_s3cr3t"
    err = capsys.readouterr().err
    assert err == (f"gpudash: warning: {token}: mode 0644 lets every user of this machine read the Grafana token; "
                   "chmod o-rwx it\n")
    assert "s3cr3t" not in err


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o400])
def test_a_file_only_its_owner_or_group_can_read_gets_no_warning(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: int) -> None:
    connection_from({**ENV, "GRAFANA_USER": "ops"}, password_file=secret(tmp_path, "password", mode))
    assert capsys.readouterr().err == ""


def test_a_password_file_others_can_read_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    password = secret(tmp_path, "password", 0o604)
    connection_from({**ENV, "GRAFANA_USER": "ops"}, password_file=password)
    assert f"{password}: mode 0604 lets every user of this machine read the Grafana password" in capsys.readouterr().err


def test_rules_name_each_receiver_secret_file_others_can_read_and_still_write(tmp_path: Path) -> None:
    open_hook = secret(tmp_path, "hook-url", 0o644, "https://hooks.example/T0/s3cr3t\n")
    closed = secret(tmp_path, "slack-url", 0o600)
    site = tmp_path / "gpudash.yaml"
    site.write_text(yaml.safe_dump({"receivers": [
        {"name": "hook", "type": "webhook", "url_file": str(open_hook)},
        {"name": "chat", "type": "slack", "api_url_file": str(closed)},
        {"name": "elsewhere", "type": "webhook", "url_file": str(tmp_path / "on-the-alertmanager-host")},
    ]}))
    ran = gpudash("rules", "--out", str(tmp_path / "out"), "--site", str(site),
                  "--thresholds", str(ROOT / "thresholds.yaml"))
    assert ran.code == 0, ran.err
    assert ran.err == (f"gpudash: warning: {open_hook}: mode 0644 lets every user of this machine read the "
                       "Alertmanager receiver secret; chmod o-rwx it\n")
    assert "5 of 5 files changed" in ran.out
