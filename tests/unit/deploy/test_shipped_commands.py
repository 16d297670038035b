"""The exporter command lines that deploy/ ships parse with the exporter's own options, so a renamed flag
cannot leave a DaemonSet or a unit that crash-loops."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml
from support.paths import ROOT

from gpudash.exporter.cli import exporter

DEPLOY = ROOT / "deploy"


def _parses(args: list[str]) -> None:
    exporter.make_context("exporter", list(args), resilient_parsing=False)


def test_the_daemonsets_args_are_exporter_options() -> None:
    daemonset = yaml.safe_load((DEPLOY / "kubernetes" / "daemonset.yaml").read_text())
    (container,) = daemonset["spec"]["template"]["spec"]["containers"]
    args = [arg.replace("$(NODE_NAME)", "gpu-node-1") for arg in container["args"]]
    assert "--web-config=/etc/gpudash/web-config.yml" in args
    _parses(args)
    names = {e["name"] for e in container["env"]}
    assert "$(NODE_NAME)" not in "".join(args) and "NODE_NAME" in names  # what the args refer to is defined


def test_the_daemonsets_commented_job_attribution_flags_parse_when_switched_on() -> None:
    text = (DEPLOY / "kubernetes" / "daemonset.yaml").read_text()
    commented = [m.group(1) for m in re.finditer(r"^\s*# - (--[a-z-]+(?:=\S+)?)", text, re.M)]
    assert "--kubernetes" in commented and "--kubernetes-enable-pod-labels" in commented
    daemonset = yaml.safe_load(text)
    (container,) = daemonset["spec"]["template"]["spec"]["containers"]
    args = [arg.replace("$(NODE_NAME)", "gpu-node-1") for arg in container["args"]]
    with exporter.make_context("exporter", [*args, *commented]) as ctx:
        assert ctx.params["kubernetes"] is not None  # the Kubernetes options parsed into a kubelet config


@pytest.mark.parametrize("unit", [DEPLOY / "systemd" / "gpudash-exporter.service",
                                  DEPLOY / "slurm" / "gpudash-exporter.service"], ids=lambda p: p.parent.name)
def test_the_units_exec_start_is_an_exporter_command(unit: Path) -> None:
    text = unit.read_text().replace("\\\n", " ")
    (line,) = re.findall(r"^ExecStart=(.*)$", text, re.MULTILINE)
    words = shlex.split(line)
    assert words[1] == "exporter"
    _parses(words[2:])


def test_the_container_images_command_is_an_exporter_command() -> None:
    text = (DEPLOY / "container" / "Containerfile").read_text()
    entry = yaml.safe_load(re.search(r"^ENTRYPOINT (.*)$", text, re.MULTILINE)[1])  # type: ignore[index]
    cmd = yaml.safe_load(re.search(r"^CMD (.*)$", text, re.MULTILINE)[1])  # type: ignore[index]
    assert entry == ["gpudash", "exporter"]
    _parses(cmd)
