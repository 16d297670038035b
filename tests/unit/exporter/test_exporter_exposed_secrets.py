"""Secret files every user of the machine may read or write are named once at start, with their mode."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from gpudash.exporter.attribution.kubelet import KubeletConfig, api_sources
from gpudash.exporter.exposed_secrets import exposure, warn_if_exposed


@pytest.mark.parametrize(("mode", "exposed"), [(0o600, None), (0o640, None), (0o660, None), (0o604, "readable"),
                                                (0o602, "writable"), (0o777, "readable and writable")])
def test_only_what_other_users_may_do_counts(mode: int, exposed: str | None) -> None:
    assert exposure(mode) == exposed


def test_a_file_that_cannot_be_statted_is_left_to_its_reader(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "gpudash.exporter"):
        assert warn_if_exposed(tmp_path / "missing", "token") is False
    assert not caplog.records


def test_a_kubernetes_token_outside_a_pod_is_checked(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    token = tmp_path / "token"
    token.write_text("t0ken\n")
    token.chmod(0o644)
    config = KubeletConfig(api_url="http://127.0.0.1:8001", account_dir=tmp_path, node_name="gpu-node-7")
    with caplog.at_level(logging.WARNING, "gpudash.exporter"):
        assert api_sources(config)[0] is not None
    assert [r.getMessage() for r in caplog.records] == [
        f"{token}: the Kubernetes API token is readable by every user (mode 0644); make it 0600, or 0640 with the "
        "exporter's group"]
    token.chmod(0o600)
    caplog.clear()
    with caplog.at_level(logging.WARNING, "gpudash.exporter"):
        api_sources(config)
    assert not caplog.records
