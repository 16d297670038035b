"""No command shows a secret that a server echoes back, however its answer is cut or spelled.

Each command that talks to a server runs against one that answers every request with an error whose body repeats
the request's headers (the Authorization header among them) at every offset, far longer than any message keeps:
a message cut before the secrets are taken out would end in part of one. Nothing of the password, the token or
the Basic-auth value may show in stdout or stderr, in any spelling (runs of 6 characters, base64 decoded).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from support.cli import Ran, gpudash
from support.hostile_http import EchoingServer, leaks
from support.paths import ROOT

USER = "admin"
PASSWORD = "s3cr&t-Pa55/w0rd:x9Q%z"
TOKEN = "glsa_Kq3VzP9mX2wL7tR8yN4bC6dF1hJ5_a1b2c3d4"
CLEAR = {name: None for name in ("GRAFANA_URL", "GRAFANA_TOKEN", "GRAFANA_USER", "GRAFANA_PASSWORD", "PROMETHEUS_URL",
                                 "ALERTMANAGER_URL", "GPUDASH_SITE", "GPUDASH_THRESHOLDS")}


def _with_password(url: str) -> str:
    return url.replace("http://", f"http://{USER}:{quote(PASSWORD, safe='')}@")


# Each command as (arguments, environment) for the echoing server's URL; `login` says how it logs in.
Command = Callable[[str, str, Path], tuple[list[str], dict[str, str]]]


def _grafana_env(url: str, login: str) -> dict[str, str]:
    return {"GRAFANA_URL": _with_password(url)} if login == "password" else {"GRAFANA_URL": url, "GRAFANA_TOKEN": TOKEN}


def _prometheus(url: str, login: str) -> str:
    return _with_password(url)


COMMANDS: dict[str, Command] = {
    "sync": lambda url, login, tmp: (["sync"], _grafana_env(url, login)),
    "diff": lambda url, login, tmp: (["diff"], _grafana_env(url, login)),
    "check": lambda url, login, tmp: (["check", "--prometheus", _prometheus(url, login), "--no-rules"], {}),
    "doctor": lambda url, login, tmp: (
        ["doctor", "--prometheus", _prometheus(url, login), "--alertmanager", _with_password(url),
         "--exporter", _with_password(url) + "/metrics", "--grafana", _grafana_env(url, login)["GRAFANA_URL"]],
        {k: v for k, v in _grafana_env(url, login).items() if k != "GRAFANA_URL"}),
    "doctor --format json": lambda url, login, tmp: (
        ["doctor", "--format", "json", "--prometheus", _prometheus(url, login), "--alertmanager", _with_password(url),
         "--grafana", _grafana_env(url, login)["GRAFANA_URL"]],
        {k: v for k, v in _grafana_env(url, login).items() if k != "GRAFANA_URL"}),
    "backtest": lambda url, login, tmp: (["backtest", "--prometheus", _prometheus(url, login), "--since", "1h"], {}),
    "tune": lambda url, login, tmp: (["tune", "--prometheus", _prometheus(url, login), "--since", "1d"], {}),
    "preview": lambda url, login, tmp: (["preview", "--prometheus", _prometheus(url, login), "--out", str(tmp),
                                         "--dashboard", "gpudash-fleet"], {}),
}
# Commands that log in with a token: the Grafana ones (Prometheus takes credentials in its URL only).
TOKEN_COMMANDS = ("sync", "diff", "doctor", "doctor --format json")


@pytest.fixture(params=[(True, False), (False, False), (True, True)], ids=["json", "text", "json-past-probe"])
def echoing(request: pytest.FixtureRequest) -> Iterator[EchoingServer]:
    as_json, answers_probe = request.param
    with EchoingServer(as_json=as_json, answers_probe=answers_probe) as server:
        yield server


def _run(name: str, login: str, server: EchoingServer, tmp: Path) -> Ran:
    args, env = COMMANDS[name](server.url, login, tmp)
    return gpudash(*args, cwd=ROOT, env={**CLEAR, **env})


def _assert_no_secret(ran: Ran, server: EchoingServer) -> None:
    assert server.requests, "the command never reached the server"
    assert ran.code != 0
    shown = ran.out + ran.err
    assert "***" in shown, f"the server's echo was not shown at all:\n{shown[-2000:]}"
    found = leaks(shown, USER, PASSWORD, TOKEN)
    assert not found, f"{found[:5]} in:\n{shown[-3000:]}"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_password_in_the_url_never_shows(name: str, echoing: EchoingServer, tmp_path: Path) -> None:
    _assert_no_secret(_run(name, "password", echoing, tmp_path), echoing)


@pytest.mark.parametrize("name", TOKEN_COMMANDS)
def test_a_token_never_shows(name: str, echoing: EchoingServer, tmp_path: Path) -> None:
    _assert_no_secret(_run(name, "token", echoing, tmp_path), echoing)
