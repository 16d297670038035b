"""Connection settings from the environment and flags, retries with backoff, and redaction. No server."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import niquests
import pytest
from grafana_client.client import GrafanaBadInputError, GrafanaServerError

from gpudash.errors import ConfigError, DriftError, RemoteError
from gpudash.sync.grafana_api import ChangedMeanwhile, Connection, Grafana, GrafanaFailure, connection_from

ENV = {"GRAFANA_URL": "https://grafana.example.com/sub/", "GRAFANA_TOKEN": "glsa_secret"}


def test_url_and_token_from_the_environment() -> None:
    conn = connection_from(ENV)
    assert conn.url == "https://grafana.example.com/sub" and conn.token == "glsa_secret" and conn.user == ""
    assert "glsa_secret" not in repr(conn)
    assert conn.timeout == 10.0 and conn.retries == 3 and conn.ca_file is None


def test_flags_override_the_environment(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("glsa_from_file\n")
    conn = connection_from(ENV, url="http://other:3000", token_file=token, timeout=2.5, retries=0, org_id=3)
    assert (conn.url, conn.token, conn.timeout, conn.retries, conn.org_id) == (
        "http://other:3000", "glsa_from_file", 2.5, 0, 3)
    password = tmp_path / "password"
    password.write_text("pw")
    basic = connection_from(ENV, user="ops", password_file=password)
    assert (basic.token, basic.user, basic.password) == ("", "ops", "pw")


def test_credentials_in_the_url_are_used_and_never_shown() -> None:
    conn = connection_from({"GRAFANA_URL": "http://admin:s3cret@grafana:3000"})
    assert conn.url == "http://grafana:3000" and (conn.user, conn.password) == ("admin", "s3cret")


def test_percent_encoded_credentials_in_the_url_are_decoded() -> None:
    conn = connection_from({"GRAFANA_URL": "http://ops%2Fteam:p%40ss%3Aw0rd@grafana:3000/"})
    assert conn.url == "http://grafana:3000" and (conn.user, conn.password) == ("ops/team", "p@ss:w0rd")
    assert "p@ss" not in repr(conn)
    g = Grafana(conn)
    assert g.redact("pw p@ss:w0rd, as typed p%40ss%3Aw0rd") == "pw ***, as typed ***"


@pytest.mark.parametrize(("env", "message"), [
    ({}, "GRAFANA_URL is not set: set GRAFANA_URL (e.g. GRAFANA_URL=http://grafana:3000) and GRAFANA_TOKEN"),
    ({"GRAFANA_URL": "http://g:3000"}, "GRAFANA_TOKEN is not set: set GRAFANA_URL"),
    ({"GRAFANA_URL": "http://g:3000", "GRAFANA_USER": "ops"}, "GRAFANA_PASSWORD is not set"),
    ({"GRAFANA_URL": "grafana:3000", "GRAFANA_TOKEN": "t"}, "GRAFANA_URL: expected http(s)://host[:port][/path]"),
    ({"GRAFANA_URL": "http://g:port", "GRAFANA_TOKEN": "t"}, "GRAFANA_URL: the port is not a number"),
    ({**ENV, "GRAFANA_ORG_ID": "main"}, "GRAFANA_ORG_ID: expected a whole number, got 'main'"),
    ({**ENV, "GRAFANA_ORG_ID": "\uff12"}, "GRAFANA_ORG_ID: expected a whole number, got '\uff12'"),  # fullwidth 2
    ({**ENV, "GRAFANA_ORG_ID": "\u00b2"}, "GRAFANA_ORG_ID: expected a whole number, got '\u00b2'"),  # superscript 2
])
def test_what_to_set(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        connection_from(env)
    assert caught.value.format_message().startswith(message)


def test_missing_ca_file_and_token_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--ca-file: no such file"):
        connection_from(ENV, ca_file=tmp_path / "ca.pem")
    with pytest.raises(ConfigError, match="cannot read the token"):
        connection_from(ENV, token_file=tmp_path / "token")


def grafana(retries: int = 2, timeout: float = 10.0) -> tuple[Grafana, list[float]]:
    pauses: list[float] = []
    conn = Connection("http://127.0.0.1:9", "glsa_t", timeout=timeout, retries=retries, backoff=0.25)
    return Grafana(conn, pauses.append), pauses


def flaky(*failures: BaseException) -> Any:
    queue = list(failures)

    def request() -> str:
        if queue:
            raise queue.pop(0)
        return "ok"
    return request


def test_reads_retry_5xx_and_transport_failures_with_doubling_backoff() -> None:
    g, pauses = grafana(retries=3)
    refused = niquests.exceptions.ConnectionError("[Errno 111] Connection refused")
    result = g.call("x", "GET", "/api/x", flaky(GrafanaServerError(502, {}, "m"), refused, refused))
    assert result == "ok" and pauses == [0.25, 0.5, 1.0]
    assert g.requests["GET"] == 4 and g.writes == 0


def test_retries_are_bounded() -> None:
    g, pauses = grafana(retries=2)
    with pytest.raises(GrafanaFailure, match=r"x: Grafana answered 500: down \(tried 3 times\)"):
        g.call("x", "GET", "/api/x", flaky(*[GrafanaServerError(500, {"message": "down"}, "m")] * 5))
    assert len(pauses) == 2


def test_writes_retry_5xx_but_not_transport_failures() -> None:
    g, pauses = grafana()
    assert g.call("x", "POST", "/api/x", flaky(GrafanaServerError(500, {}, "m"))) == "ok"
    with pytest.raises(GrafanaFailure, match="connection refused"):
        g.call("x", "POST", "/api/x", flaky(niquests.exceptions.ConnectionError("Connection refused")))
    assert pauses == [0.25]
    assert g.writes == 3


def test_a_request_past_its_deadline_is_a_timeout_retried_like_any_read() -> None:
    g, pauses = grafana(retries=2, timeout=0.05)
    release = threading.Event()
    first = g.api
    with pytest.raises(GrafanaFailure) as caught:
        g.call("x", "GET", "/api/x", lambda: release.wait(10))  # would run 10 s
    assert caught.value.message == ("x: cannot reach Grafana at http://127.0.0.1:9: no answer within 0.05 s "
                                    "(timeout) (tried 3 times); raise --timeout or check the server")
    assert pauses == [0.25, 0.5] and g.api is not first
    with pytest.raises(GrafanaFailure, match=r"no answer within 0\.05 s"):
        g.call("x", "POST", "/api/x", lambda: release.wait(10))
    assert pauses == [0.25, 0.5]  # a write that may have landed is not sent again
    release.set()


def test_4xx_is_not_retried_and_says_what_the_server_said() -> None:
    g, pauses = grafana()
    with pytest.raises(GrafanaFailure) as caught:
        g.call("dashboard 'A' (a)", "POST", "/api/x",
               flaky(GrafanaBadInputError({"message": "Cannot save provisioned dashboard"})))
    assert pauses == []
    assert caught.value.per_object and caught.value.status == 400
    assert caught.value.format_message() == ("dashboard 'A' (a): Grafana answered 400: Cannot save provisioned "
                                             "dashboard; it is provisioned from files on the Grafana server: "
                                             "change it there")


def test_what_the_server_said_is_one_line_without_secrets() -> None:
    g, _ = grafana()
    said = {"message": "invalid token glsa_t\n  at line 2\r\nof the proxy", "status": "bad\nkey"}
    with pytest.raises(GrafanaFailure) as caught:
        g.call("x", "POST", "/api/x", flaky(GrafanaBadInputError(said)))
    assert caught.value.message == "x: Grafana answered 400 bad key: invalid token *** at line 2 of the proxy"
    assert caught.value.said == "invalid token *** at line 2 of the proxy"


def test_version_mismatch_is_drift() -> None:
    from grafana_client.client import GrafanaClientError

    g, _ = grafana()
    body = {"status": "version-mismatch", "message": "The dashboard has been changed by someone else"}
    with pytest.raises(DriftError) as caught:
        g.call("dashboard 'A' (a)", "POST", "/api/x", flaky(GrafanaClientError(412, body, "m")))
    assert caught.value.exit_code == 3
    assert not isinstance(caught.value, RemoteError)


@pytest.mark.parametrize(("status", "body"), [
    (409, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict", "code": 409,
           "message": 'Operation cannot be fulfilled on dashboards.dashboard.grafana.app "a": the object has been '
                      "modified; please apply your changes to the latest version and try again"}),
    (409, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "AlreadyExists", "code": 409,
           "message": 'dashboards.dashboard.grafana.app "a" already exists'}),
    (409, {"message": "Dashboard already exists. Use overwrite flag to update."}),  # /api from 13.1
])
def test_a_save_in_between_on_apis_and_on_13_api_is_drift_too(status: int, body: dict[str, Any]) -> None:
    from grafana_client.client import GrafanaClientError

    g, _ = grafana()
    with pytest.raises(ChangedMeanwhile) as caught:
        g.call("dashboard 'A' (a)", "PUT", "/apis/x", flaky(GrafanaClientError(status, body, "m")))
    assert caught.value.exit_code == 3
    assert f"({status} " in caught.value.format_message() and body["message"][:20] in caught.value.format_message()


def test_a_kubernetes_status_names_its_reason() -> None:
    from grafana_client.client import GrafanaClientError

    g, _ = grafana()
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403,
            "message": 'dashboards.dashboard.grafana.app "a" is forbidden: User "x" cannot update resource'}
    with pytest.raises(GrafanaFailure) as caught:
        g.call("dashboard 'A' (a)", "PUT", "/apis/x", flaky(GrafanaClientError(403, body, "m")))
    assert "answered 403 Forbidden: dashboards.dashboard.grafana.app \"a\" is forbidden" in \
        caught.value.format_message()
    assert not isinstance(caught.value, ChangedMeanwhile)


def test_the_apis_namespace() -> None:
    assert connection_from({"GRAFANA_URL": "http://g", "GRAFANA_TOKEN": "t"}).apis_namespace == "default"
    assert connection_from({"GRAFANA_URL": "http://g", "GRAFANA_TOKEN": "t", "GRAFANA_ORG_ID": "3"}
                           ).apis_namespace == "org-3"
    cloud = connection_from({"GRAFANA_URL": "http://g", "GRAFANA_TOKEN": "t", "GRAFANA_NAMESPACE": "stacks-42"})
    assert cloud.apis_namespace == "stacks-42"
    with pytest.raises(ConfigError, match="GRAFANA_NAMESPACE: expected a Kubernetes namespace"):
        connection_from({"GRAFANA_URL": "http://g", "GRAFANA_TOKEN": "t", "GRAFANA_NAMESPACE": "Not valid/x"})


def test_secrets_are_redacted_from_any_message() -> None:
    conn = Connection("http://g", "", "ops", "pw-123")
    g = Grafana(conn)
    assert g.redact("Authorization: Basic b3BzOnB3LTEyMw== pw-123") == "Authorization: Basic *** ***"
    assert "glsa_t" not in Grafana(Connection("http://g", "glsa_t")).redact("token glsa_t")


@pytest.mark.parametrize(("url", "api"), [
    ("https://example.com/grafana/", "https://example.com/grafana/api"),
    ("http://grafana:3000", "http://grafana:3000/api"),
    ("http://[::1]:3000", "http://[::1]:3000/api"),
])
def test_api_url_keeps_a_sub_path(url: str, api: str) -> None:
    conn = connection_from({"GRAFANA_URL": url, "GRAFANA_TOKEN": "t"})
    assert Grafana(conn).api.client.url == api
    assert conn.url == api.removesuffix("/api")


def test_an_answer_of_the_wrong_shape_is_quoted_without_the_token(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpudash.sync.remote import GrafanaRemote
    from gpudash.sync.remote_apis import ApisDashboards

    token = "glsa_Kq3VzP9mX2wL7tR8yN4bC6dF1hJ5_a1b2c3d4"
    g = Grafana(Connection("http://127.0.0.1:9", token, retries=0))
    echoed = {"dashboard": {}, "meta": {"version": token}}  # int() of it fails, quoting it
    monkeypatch.setattr(g.api.dashboard, "get_dashboard", lambda uid: echoed)
    with pytest.raises(GrafanaFailure) as on_api:
        GrafanaRemote(g).dashboard("gpu-node")
    with pytest.raises(GrafanaFailure) as on_apis:
        ApisDashboards(g, {"v1": "v1"}, "default")._remote("dashboard gpu-node", {"metadata": {"name": "gpu-node",
                                                                                       "generation": token},
                                                                          "spec": {}})
    for caught in (on_api, on_apis):
        assert "invalid literal for int()" in caught.value.message and "***" in caught.value.message
        assert token[:6] not in caught.value.message and token[-6:] not in caught.value.message
