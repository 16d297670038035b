"""`gpudash preview` against a server that refuses every query: the pictures (each panel showing its error) are
written, and the command says in one line that nothing was answered and fails."""

from __future__ import annotations

import re
from pathlib import Path

from support.cli import gpudash
from support.hostile_http import EchoingServer
from support.paths import ROOT

CLEAR = {name: None for name in ("PROMETHEUS_URL", "GPUDASH_SITE", "GPUDASH_THRESHOLDS")}


def test_every_query_refused_is_a_failure_not_a_picture_of_errors(tmp_path: Path) -> None:
    with EchoingServer(status=422, answers_probe=True) as refusing:
        ran = gpudash("preview", "--prometheus", refusing.url, "--out", str(tmp_path), "--dashboard", "gpudash-node",
                      cwd=ROOT, env=CLEAR)
    assert ran.code == 4, ran.out + ran.err
    last = ran.err.strip().splitlines()[-1]
    found = re.fullmatch(r"gpudash: every one of the (\d+) queries failed \(each panel shows its error\); the first: "
                         r"query A: .+", last)
    assert found, last
    assert int(found.group(1)) > 10
    assert ran.out.split() == [str(tmp_path / "gpudash-node.png")] and (tmp_path / "gpudash-node.png").stat().st_size
