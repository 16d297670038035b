"""`check` and `preview` against a Prometheus that answers each query slowly: a deadline for the whole run, what
was and was not done said on the way out, progress on stderr while it runs, and JSON on stdout untouched."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import gpudash
from support.hostile_http import SlowPrometheus
from support.paths import ROOT

from gpudash.check import progress

QUERY_DELAY_S = 0.4
DEADLINE_S = 3.0
CLEAR = {name: None for name in ("PROMETHEUS_URL", "GPUDASH_SITE", "GPUDASH_THRESHOLDS")}
PROGRESS = re.compile(r"^(checked|queried) (\d+)/(\d+) (queries|panels), (\d+) failing, (\d+) s$")


@pytest.fixture
def slow() -> Iterator[SlowPrometheus]:
    with SlowPrometheus(QUERY_DELAY_S) as server:
        yield server


@pytest.fixture(autouse=True)
def progress_often(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "EVERY_S", 1.0)


def _progress_lines(err: str) -> list[re.Match[str]]:
    return [m for m in (PROGRESS.match(line) for line in err.splitlines()) if m]


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_check_stops_at_its_deadline_and_says_what_it_did_not_check(slow: SlowPrometheus, fmt: str) -> None:
    started = time.monotonic()
    ran = gpudash("check", "--prometheus", slow.url, "--no-rules", "--deadline", f"{DEADLINE_S:g}", "--format", fmt,
                  cwd=ROOT, env=CLEAR)
    took = time.monotonic() - started
    assert ran.code == 4, ran.out + ran.err
    assert took < DEADLINE_S + 10 * QUERY_DELAY_S + 10  # stopped near the deadline, not after 155 slow queries
    last = ran.err.strip().splitlines()[-1]
    found = re.fullmatch(r"gpudash: the check's deadline \(3 s\) passed: (\d+) of (\d+) queries checked \(0 failed\), "
                         r"(\d+) not checked: .+", last)
    assert found, last
    done, total, left = (int(found.group(i)) for i in (1, 2, 3))
    assert 0 < done < total and done + left == total and slow.queries >= done
    lines = _progress_lines(ran.err)
    assert lines and all(int(m.group(3)) == total for m in lines)  # a line a second on stderr, counting up
    assert [int(m.group(2)) for m in lines] == sorted(int(m.group(2)) for m in lines)
    if fmt == "json":
        statuses = [r["status"] for g in json.loads(ran.out) for r in g["results"]]  # stdout is the JSON alone
        assert statuses.count("after_deadline") == left and len(statuses) == total
    else:
        assert f"checked {done} queries against {slow.url}: " in ran.out
        assert ran.out.count("after deadline") == left


def test_preview_stops_at_its_deadline_keeps_what_it_drew_and_names_the_rest(slow: SlowPrometheus,
                                                                             tmp_path: Path) -> None:
    ran = gpudash("preview", "--prometheus", slow.url, "--out", str(tmp_path), "--deadline", f"{DEADLINE_S:g}",
                  cwd=ROOT, env=CLEAR)
    assert ran.code == 4, ran.out + ran.err
    last = ran.err.strip().splitlines()[-1]
    found = re.fullmatch(r"gpudash: the preview's deadline \(3 s\) passed: drew (.+); not drawn: (.+)", last)
    assert found, last
    drawn = [] if found.group(1) == "nothing" else found.group(1).split(", ")
    assert sorted(p.name for p in tmp_path.glob("*.png")) == sorted(f"{uid}.png" for uid in drawn)
    assert found.group(2).split(", ")
    assert _progress_lines(ran.err)
