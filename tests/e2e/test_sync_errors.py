"""Every failure gives one line naming the dashboard (or Grafana) and what the server said, and an exit code.

Exit codes: 2 configuration, 3 drift (including 412 version-mismatch), 4 Grafana refused or unreachable.
"""

from __future__ import annotations

import socket
from typing import Any

import pytest
from grafana_standin import StandIn
from grafana_standin.testkit import GrafanaUnderTest, make_dashboard, run_gpudash, write_set

from gpudash.compare.content import marked

pytest_plugins = ["grafana_standin.fixtures"]


def one_line(text: str) -> str:
    assert text.count("\n") == 1 and text.startswith("gpudash: "), text
    return text


def server(grafana: GrafanaUnderTest) -> StandIn:
    assert grafana.standin is not None
    return grafana.standin


def test_bad_token_is_401_with_the_server_message(grafana: GrafanaUnderTest) -> None:
    write_set(grafana.local_dir, grafana.dashboards(1))
    result = grafana.gpudash("push", env=grafana.env(GRAFANA_TOKEN="glsa_wrong_0000"))
    assert result.code == 4
    err = one_line(result.err)
    assert err.startswith(f"gpudash: Grafana at {grafana.url} answered 401") and "Invalid API key" in err
    assert "check GRAFANA_TOKEN" in err
    if grafana.standin is not None:
        assert ("api-key.invalid" in err) == (grafana.standin.flavor.major >= 10)


def test_bad_password_is_401(standin: GrafanaUnderTest) -> None:
    write_set(standin.local_dir, standin.dashboards(1))
    # Six characters of the password in a row are masked wherever they show, Grafana's own words included: this
    # one shares none with "Invalid username or password".
    result = standin.gpudash("push", env=standin.env(GRAFANA_TOKEN=None, GRAFANA_USER="admin",
                                                     GRAFANA_PASSWORD="not-the-s3cret"))
    assert result.code == 4
    assert "401" in one_line(result.err) and "Invalid username or password" in result.err


def test_viewer_token_is_403_naming_the_dashboard(standin: GrafanaUnderTest) -> None:
    server(standin).add_token("glsa_viewer_1", role="Viewer")
    server(standin).add_folder(standin.folder_uid, standin.folder_title)
    local = standin.dashboards(2)
    write_set(standin.local_dir, local)
    result = standin.gpudash("push", env=standin.env(GRAFANA_TOKEN="glsa_viewer_1"))
    assert result.code == 4
    err = one_line(result.err)
    assert f"dashboard '{local[0]['title']}' ({local[0]['uid']}): Grafana answered 403" in err
    said = ("Permission denied" if server(standin).flavor.major == 9 else
            f'dashboards.dashboard.grafana.app "{local[0]["uid"]}" is forbidden' if standin.on_apis else
            "You'll need additional permissions to perform this action. Permissions needed: dashboards:create")
    assert said in err
    assert f"(0 of 2 written; not written: {local[0]['uid']}, {local[1]['uid']})" in err
    assert server(standin).count("POST", "/api/dashboards/db") == 1  # a 403 stops the run


def test_viewer_cannot_create_the_folder(standin: GrafanaUnderTest) -> None:
    server(standin).add_token("glsa_viewer_1", role="Viewer")
    write_set(standin.local_dir, standin.dashboards(1))
    result = standin.gpudash("push", env=standin.env(GRAFANA_TOKEN="glsa_viewer_1"))
    assert result.code == 4
    assert f"folder '{standin.folder_title}' ({standin.folder_uid}): Grafana answered 403" in one_line(result.err)


def test_no_save_right_in_the_folder_is_403(standin: GrafanaUnderTest) -> None:
    server(standin).add_folder(standin.folder_uid, standin.folder_title)
    server(standin).add_token("glsa_editor_1", role="Editor", denied_folders=(standin.folder_uid,))
    write_set(standin.local_dir, standin.dashboards(1))
    result = standin.gpudash("push", env=standin.env(GRAFANA_TOKEN="glsa_editor_1"))
    assert result.code == 4
    said = 'dashboards.dashboard.grafana.app "' if standin.on_apis else "Access denied to save dashboard"
    assert standin.answered(403, said) in one_line(result.err)


def test_folder_deleted_during_the_run(standin: GrafanaUnderTest) -> None:
    local = standin.dashboards(2)
    write_set(standin.local_dir, local)
    server(standin).fault("POST", "/api/dashboards/db", before=lambda s: s.remove_folder(standin.folder_uid))
    result = standin.gpudash("push")
    assert result.code == 4
    err = one_line(result.err)
    said = "Folder not found" if server(standin).flavor.major <= 10 else "folder not found"
    assert f"dashboard '{local[0]['title']}' ({local[0]['uid']}): Grafana {standin.answered(400, said)}" in err
    assert "0 of 2 written" in err
    assert server(standin).count("POST", "/api/dashboards/db") == 2  # a 400 concerns one dashboard: go on


def test_saved_in_grafana_between_read_and_write_is_drift(standin: GrafanaUnderTest) -> None:
    local = standin.dashboards(1)
    assert standin.push(local).code == 0
    local[0]["description"] = "changed locally"
    write_set(standin.local_dir, local)
    uid = local[0]["uid"]
    server(standin).fault("POST", "/api/dashboards/db",
                          before=lambda s: s.ui_save(uid, lambda d: d.update(title=d["title"] + " (UI)")))
    result = standin.gpudash("sync")
    assert result.code == 3
    said = ("409 Conflict: Operation cannot be fulfilled" if standin.on_apis else
            "412 version-mismatch: The dashboard has been changed by someone else")
    assert said in result.out
    assert uid in one_line(result.err)
    saved = standin.get(uid)
    assert saved is not None and saved["dashboard"]["title"].endswith("(UI)")


def test_412_that_persists_exits_3_with_the_message(standin: GrafanaUnderTest) -> None:
    local = standin.dashboards(1)
    assert standin.push(local).code == 0
    local[0]["description"] = "changed locally"
    write_set(standin.local_dir, local)
    server(standin).fault("POST", "/api/dashboards/db", status=412, times=-1, body={
        "status": "version-mismatch", "message": "The dashboard has been changed by someone else"})
    result = standin.gpudash("sync")
    assert result.code == 3
    err = one_line(result.err)
    assert f"({local[0]['uid']}): changed in Grafana while gpudash was writing it (412 version-mismatch: " \
           "The dashboard has been changed by someone else)" in err


def test_same_title_in_the_folder(grafana: GrafanaUnderTest) -> None:
    local = grafana.dashboards(1)
    twin = make_dashboard(grafana.uid("twin"), local[0]["title"])
    grafana.gpudash("push", "--dry-run")  # nothing to assert: just makes sure the site file exists
    write_set(grafana.local_dir, [])
    grafana.created.append(local[0]["uid"])
    api = grafana.api()
    api.folder.create_folder(grafana.folder_title, uid=grafana.folder_uid)
    grafana.add_foreign(twin)
    write_set(grafana.local_dir, local)
    result = grafana.gpudash("push")
    major, minor = (int(x) for x in str(api.version).split(".")[:2])
    if (major, minor) <= (11, 2):
        assert result.code == 4
        err = one_line(result.err)
        assert "412 name-exists: A dashboard with the same name in the folder already exists" in err
        assert "rename or delete one of them" in err
        twin_now = grafana.get(twin["uid"])
        assert twin_now is not None and twin_now["dashboard"]["description"] == twin["description"]
    else:  # 11.3+ allows two dashboards with one title
        assert result.code == 0, result.text
        assert grafana.get(local[0]["uid"]) is not None and grafana.get(twin["uid"]) is not None


def test_provisioned_dashboard_is_400_and_the_others_are_still_written(standin: GrafanaUnderTest) -> None:
    first, provisioned, last = standin.dashboards(3)
    server(standin).add_folder(standin.folder_uid, standin.folder_title)
    on_disk = dict(marked(provisioned, "abc", standin.site_id), description="from the provisioning file")
    server(standin).add_dashboard(on_disk, standin.folder_uid, provisioned=True)  # a copy of what gpudash pushed
    write_set(standin.local_dir, [first, provisioned, last])
    forced = standin.gpudash("sync", "--force")
    assert forced.code == 4
    err = one_line(forced.err)
    assert f"({provisioned['uid']}): Grafana {standin.answered(400, 'Cannot save provisioned dashboard')}" in err
    assert "provisioned from files on the Grafana server" in err
    assert f"(2 of 3 written; not written: {provisioned['uid']})" in err
    assert standin.get(first["uid"]) is not None and standin.get(last["uid"]) is not None
    refused = standin.gpudash("sync")
    assert refused.code == 3  # without --force: changed since gpudash pushed it, so drift
    assert refused.writes == 0


def test_5xx_is_retried_a_bounded_number_of_times(standin: GrafanaUnderTest) -> None:
    local = standin.dashboards(3)
    write_set(standin.local_dir, local)
    server(standin).add_folder(standin.folder_uid, standin.folder_title)
    server(standin).fault("POST", "/api/dashboards/db", status=500, times=-1,
                          body={"message": "Failed to save dashboard"})
    result = standin.gpudash("push")
    assert result.code == 4
    err = one_line(result.err)
    assert "Grafana answered 500: Failed to save dashboard (tried 2 times)" in err
    assert "0 of 3 written; not written: " + ", ".join(d["uid"] for d in local) in err
    assert server(standin).count("POST", "/api/dashboards/db") == 2  # --retries 1; then the run stops


def test_a_transient_5xx_is_retried_and_succeeds(standin: GrafanaUnderTest) -> None:
    local = standin.dashboards(2)
    write_set(standin.local_dir, local)
    server(standin).fault("GET", "/api/search", status=503, body={"message": "Service Unavailable"})
    server(standin).fault("POST", "/api/dashboards/db", status=500, body={"message": "Failed to save dashboard"})
    result = standin.gpudash("push")
    assert result.code == 0, result.text
    assert "2 created" in result.out
    assert server(standin).count("POST", "/api/dashboards/db") == 3


def test_timeout(standin: GrafanaUnderTest) -> None:
    write_set(standin.local_dir, standin.dashboards(1))
    server(standin).fault("GET", "/api/frontend/settings", delay=1.0, times=-1)
    result = standin.gpudash("push", "--timeout", "0.3")
    assert result.code == 4
    err = one_line(result.err)
    assert f"cannot reach Grafana at {standin.url}: no answer within 0.3 s (timeout) (tried 2 times)" in err
    assert "raise --timeout" in err


def test_a_write_that_times_out_is_not_retried(standin: GrafanaUnderTest) -> None:
    local = standin.dashboards(1)
    write_set(standin.local_dir, local)
    # the reads before the write must answer within the timeout on a busy machine too; the write never does
    server(standin).fault("POST", "/api/dashboards/db", delay=10.0, times=-1)
    result = standin.gpudash("push", "--timeout", "2.5")
    assert result.code == 4
    assert f"({local[0]['uid']}): cannot reach Grafana at {standin.url}: no answer" in one_line(result.err)
    assert server(standin).count("POST", "/api/dashboards/db") == 1


def test_connection_refused(tmp_path: Any) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    write_set(tmp_path / "json", [make_dashboard("a", "A")])
    result = run_gpudash(["push", "--dir", tmp_path / "json", "--retries", "1"],
                         {"GRAFANA_URL": f"http://127.0.0.1:{port}", "GRAFANA_TOKEN": "glsa_x", "GPUDASH_SITE": None})
    assert result.code == 4
    err = one_line(result.err)
    assert f"cannot reach Grafana at http://127.0.0.1:{port}: connection refused (tried 2 times)" in err
    assert "is Grafana running and GRAFANA_URL right?" in err


def test_html_instead_of_json(standin: GrafanaUnderTest) -> None:
    write_set(standin.local_dir, standin.dashboards(1))
    server(standin).fault("GET", "/api/frontend/settings", status=200, content_type="text/html",
                          raw=b"<!DOCTYPE html><html><body>Please sign in</body></html>")
    result = standin.gpudash("push")
    assert result.code == 4
    err = one_line(result.err)
    assert "answered with a body that is not the expected JSON: '<!DOCTYPE html><html><body>Please sign in" in err
    assert "is GRAFANA_URL the Grafana root URL?" in err


def test_proxy_error_page_on_a_write(standin: GrafanaUnderTest) -> None:
    local = standin.dashboards(1)
    write_set(standin.local_dir, local)
    server(standin).fault("POST", "/api/dashboards/db", status=502, content_type="text/html", times=-1,
                          raw=b"<html>\n<head><title>502 Bad Gateway</title></head></html>")
    result = standin.gpudash("push")
    assert result.code == 4
    err = one_line(result.err)
    assert f"({local[0]['uid']}): Grafana at {standin.url} answered 502 with a body that is not JSON: " \
           "'<html> <head><title>502 Bad Gateway</title></head></html>' (tried 2 times)" in err


def test_broken_json(standin: GrafanaUnderTest) -> None:
    write_set(standin.local_dir, standin.dashboards(1))
    server(standin).fault("GET", "/api/search", status=200, raw=b'{"truncated": [', times=-1)
    result = standin.gpudash("push")
    assert result.code == 4
    assert "a body that is not JSON: '{\"truncated\": ['" in one_line(result.err)


@pytest.mark.parametrize("failing", [False, True], ids=["ok", "failing"])
def test_secrets_never_appear_in_output(standin: GrafanaUnderTest, failing: bool) -> None:
    local = standin.dashboards(2)
    write_set(standin.local_dir, local)
    if failing:
        server(standin).fault("POST", "/api/dashboards/db", status=500, times=-1, body={"message": "boom"})
    password = "pa55-word-never-shown"
    server(standin).add_user("ops", password, role="Admin")
    runs = [
        standin.gpudash("push", "-vv"),
        standin.gpudash("diff", "-vv"),
        standin.gpudash("sync", "-vv", env=standin.env(GRAFANA_TOKEN=None, GRAFANA_USER="ops",
                                                       GRAFANA_PASSWORD=password)),
        standin.gpudash("sync", "-vv", env=standin.env(
            GRAFANA_TOKEN=None, GRAFANA_URL=standin.url.replace("http://", f"http://ops:{password}@"))),
        standin.gpudash("push", "-v", env=standin.env(GRAFANA_TOKEN=standin.token + "-wrong")),
    ]
    assert any("DEBUG" in run.err for run in runs)
    for run in runs:
        assert standin.token not in run.text
        assert password not in run.text
        assert "b3BzOnBhNTUtd29yZC1uZXZlci1zaG93bg" not in run.text  # base64 of ops:password
    assert runs[2].code == (4 if failing else 0)


def test_missing_token_says_what_to_set(tmp_path: Any) -> None:
    result = run_gpudash(["sync"], {"GRAFANA_URL": "http://127.0.0.1:9", "GRAFANA_TOKEN": None,
                                    "GRAFANA_USER": None, "GRAFANA_PASSWORD": None})
    assert result.code == 2
    assert one_line(result.err).startswith("gpudash: GRAFANA_TOKEN is not set: set GRAFANA_URL")
