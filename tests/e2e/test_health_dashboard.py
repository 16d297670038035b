"""The health dashboard against a real Prometheus holding 40 days of a small fleet's health history.

The history is written as OpenMetrics and turned into TSDB blocks with `promtool tsdb create-blocks-from
openmetrics`, one sample an hour, then one a minute over the last quarter hour. GPU-MOVER sat in node A's
slot 0 until ten days ago and in node B's slot 1 since: three double-bit errors on node A (25 days ago), two
more on node B (5 days ago), and an XID 79 on node A 35 days ago, inside 90 days but not inside 30; it needed
resets 12 days ago on node A and 5 and 2 days ago on node B (the recorded reset episodes). GPU-FAILED
(node B slot 0) has had a row-remap failure for three days; GPU-STEADY (node A slot 1) a pending remap.
GPU-GONE sat in node C's slot 0 until three days ago, where it counted three single-bit errors six days ago.
Synthetic ALERTS / ALERTS_FOR_STATE series stand for the firing health alerts, as Prometheus writes them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.paths import ROOT
from support.site_query import site_promql
from support.slack import budget

from gpudash.catalog import DCGM, PROMETHEUS_ALERTS, PROMETHEUS_ALERTS_FOR_STATE
from gpudash.check.judge import Status, run_check
from gpudash.check.queries import PANEL, dashboard_groups, load_dashboards
from gpudash.config.durations import parse_duration
from gpudash.config.loading import load_settings
from gpudash.health.xid import ACTIONS
from gpudash.promql.for_settings import recording_rules
from gpudash.promql.ledger_recordings import LEDGER_RECORDINGS
from gpudash.promql.resets import EPISODES, XID_BY_UUID
from gpudash.stack.history import SeededPrometheus

DAY, HOUR = 86400, 3600
JSON = ROOT / "dashboards" / "json" / "gpudash-health.json"
A, B = "node-a:9400", "node-b:9400"
C = "node-c:9400"
MOVER, FAILED, STEADY, GONE = "GPU-MOVER", "GPU-FAILED", "GPU-STEADY", "GPU-GONE"


def _name(key: str) -> str:
    return DCGM.ref(key).name


class History:
    """Samples per series, written as OpenMetrics (each series' samples together and in time order)."""

    def __init__(self, times: list[int]) -> None:
        self.times = times
        self.lines: dict[str, list[str]] = {}

    def add(self, name: str, labels: dict[str, str], value: Any, start: float = 0, end: float = float("inf"),
            only: set[int] | None = None) -> None:
        """`value(t)` (or a constant) at every sample time in [start, end) (of `only`, if given)."""
        text = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()) if k != "__name__")
        rows = self.lines.setdefault(name, [])
        for t in self.times:
            if start <= t < end and (only is None or t in only):
                v = value(t) if callable(value) else value
                rows.append(f"{name}{{{text}}} {float(v)!r} {t}")

    def openmetrics(self) -> str:
        return "\n".join([*(line for name in sorted(self.lines) for line in self.lines[name]), "# EOF"]) + "\n"


def fleet_history(now: int) -> History:
    base = (now - 40 * DAY) // HOUR * HOUR  # hour-aligned, as the ledger's "seen last" subquery steps are
    hourly = list(range(base, now - 15 * 60, HOUR))
    history = History(hourly + list(range(hourly[-1] + 60, now + 1, 60)))
    moved = now - 10 * DAY
    slots = [  # (UUID, instance, gpu, from, until)
        (MOVER, A, "0", 0, moved), (MOVER, B, "1", moved, float("inf")),
        (STEADY, A, "1", 0, float("inf")), (FAILED, B, "0", 0, float("inf")),
    ]
    for uuid, instance, gpu, start, end in slots:
        labels = {"cluster": "e2e", "instance": instance, "gpu": gpu, "UUID": uuid, "modelName": "NVIDIA H200"}
        history.add(_name("gpu_util"), labels, 90, start, end)
        history.add(_name("gpu_temp"), labels, 70 if uuid != STEADY else 84, start, end)
        history.add(_name("gpu_max_op_temp"), labels, 87, start, end)
        history.add(_name("hbm_temp"), labels, 80, start, end)
        history.add(_name("mem_max_op_temp"), labels, 95 if uuid != FAILED else 85, start, end)
        history.add(_name("gpu_up"), labels, 1, start, end)
        history.add(_name("xid_last"), labels, 0, start, end)  # every dcgm-exporter publishes the last XID
        for key in ("remapped_rows_unc", "remapped_rows_cor"):  # dcgm-exporter's defaults: there, and 0
            history.add(_name(key), labels, 0, start, end)
        history.add(_name("row_remap_failure"), labels, lambda t, u=uuid: int(u == FAILED and t >= now - 3 * DAY),
                    start, end)
        history.add(_name("row_remap_pending"), labels, lambda t, u=uuid: int(u == STEADY and t >= now - 2 * DAY),
                    start, end)
        if uuid == MOVER:
            # Aggregate DBEs persist on the GPU: node B's series starts where node A's ended.
            dbe = (lambda t: 3 * (t >= now - 25 * DAY)) if instance == A else (lambda t: 3 + 2 * (t >= now - 5 * DAY))
            history.add(_name("ecc_dbe_agg"), labels, dbe, start, end)
            if instance == A:
                history.add(_name("xid_total"), {**labels, "xid": "79"}, lambda t: int(t >= now - 35 * DAY), start, end)
            # Volatile DBEs: two on node B 5 days ago, cleared by the GPU reset of 2 days ago.
            history.add(_name("ecc_dbe_vol"), labels,
                        lambda t, i=instance: 2 * (i == B and now - 5 * DAY <= t < now - 2 * DAY), start, end)
            for days in (12, 5, 2):  # the recorded reset episodes, valued at their time, where the GPU sat then
                at = base + (now - days * DAY - base) // HOUR * HOUR
                if start <= at < end:
                    history.add(EPISODES, {**labels, "hostname": instance.split(":")[0]}, at, at, at + 1)
        else:
            history.add(_name("ecc_dbe_agg"), labels, 0, start, end)
            history.add(_name("ecc_dbe_vol"), labels, 0, start, end)
        if uuid == FAILED:
            # An XID 48 seen only on dcgm-exporter's last-XID gauge 20 days ago, as the recording by UUID noted it.
            at = base + (now - 20 * DAY - base) // HOUR * HOUR
            history.add(XID_BY_UUID, {**labels, "xid": "48"}, 1, at, at + 1)
    gone = {"cluster": "e2e", "instance": C, "gpu": "0", "UUID": GONE, "modelName": "NVIDIA H200"}
    history.add(_name("gpu_util"), gone, 90, 0, now - 3 * DAY)
    history.add(_name("ecc_sbe_agg"), gone, lambda t: 3 * (t >= now - 6 * DAY), 0, now - 3 * DAY)
    for instance in (A, B):
        history.add(_name("gpus_expected"), {"cluster": "e2e", "instance": instance}, 2)
    # A recording every loaded rule file records: beside it, a sparse recording's absence is "nothing passes".
    history.add("cluster:gpu_count:count", {"cluster": "e2e"}, 4)
    recent = now - 20 * 60
    alerts = [  # (alertname, alertstate, action, instance, gpu)
        ("GPURowRemapFailure", "firing", "rma", B, "0"),
        ("GPURowRemapPending", "firing", "reset_gpu", A, "1"),
        ("GPUFellOffBus", "firing", "reboot_node", A, ""),  # node-level: expected GPUs missing, no gpu label
        ("GPUXidError", "firing", "none", B, "1"),  # action none: nothing to do, counted nowhere
        ("GPUEccUncorrectable", "pending", "drain", B, "1"),  # not firing yet
    ]
    for alertname, state, action, instance, gpu in alerts:
        labels = {"alertname": alertname, "action": action, "severity": "critical", "cluster": "e2e",
                  "instance": instance, **({"gpu": gpu} if gpu else {})}
        history.add(PROMETHEUS_ALERTS, {**labels, "alertstate": state}, 1, recent)
        history.add(PROMETHEUS_ALERTS_FOR_STATE, labels, recent - HOUR, recent)
    return history


def recorded(url: str, start: int, now: int) -> History:
    """The recordings the dashboard reads that the history does not hold, as Prometheus would have recorded them
    at the history's own steps: the ledger's hour by hour (the hourly ones as their own group runs; where a GPU
    stopped reporting built for an hourly rule interval, as it compares with one interval ago), the GPUs per node
    also minute by minute over the last quarter hour. Each rule is a range query per stretch."""
    settings = load_settings(ROOT / "thresholds.yaml")
    hourly = [(start, now, HOUR)]
    stretches = {**{rec.record: hourly for rec in LEDGER_RECORDINGS},
                 "cluster_instance:gpu_count:count": [*hourly, (now - 15 * 60, now, 60)]}
    out = History(sorted({t for spans in stretches.values() for a, b, step in spans for t in range(a, b + 1, step)}))
    for rec, expr in recording_rules(settings, profile=DCGM, rule_interval=parse_duration("1h")):
        points: dict[str, tuple[dict[str, str], dict[int, str]]] = {}
        for a, b, step in stretches.get(rec.record, []):
            query = urllib.parse.urlencode({"query": expr, "start": a, "end": b, "step": step})
            with urllib.request.urlopen(f"{url}/api/v1/query_range?{query}", timeout=budget(60)) as answer:
                for one in json.load(answer)["data"]["result"]:
                    key = json.dumps(one["metric"], sort_keys=True)
                    points.setdefault(key, (one["metric"], {}))[1].update((int(float(t)), v) for t, v in one["values"])
        for labels, values in points.values():
            out.add(rec.record, labels, lambda t, v=values: v[t], only=set(values))
    return out


def promtool(*args: str) -> None:
    done = subprocess.run([shutil.which("promtool") or "/usr/bin/promtool", "tsdb", "create-blocks-from", "--quiet",
                           *args], capture_output=True, text=True, timeout=budget(300))
    assert done.returncode == 0, done.stderr[-2000:]


def blocks_of(history: History, folder: Path) -> list[Path]:
    folder.mkdir()
    (folder / "history.om").write_text(history.openmetrics(), encoding="utf-8")
    promtool("openmetrics", "--max-block-duration=1000h", str(folder / "history.om"), str(folder / "blocks"))
    return sorted(p for p in (folder / "blocks").iterdir() if p.is_dir())


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeededPrometheus]:
    tmp = tmp_path_factory.mktemp("health-dashboard-e2e")
    now = int(time.time())
    retention = ["--storage.tsdb.retention.time=400d"]
    blocks = blocks_of(fleet_history(now), tmp / "raw")
    with SeededPrometheus("global: {}\n", blocks=blocks, extra_args=retention) as raw:
        raw.wait_for(f'{_name("gpu_util")}{{UUID="{MOVER}"}}', timeout=budget(30))
        recordings = recorded(raw.url, (now - 40 * DAY) // HOUR * HOUR, now)
    blocks += blocks_of(recordings, tmp / "recorded")
    with SeededPrometheus("global: {}\n", blocks=blocks, extra_args=retention) as server:
        server.wait_for(f'{_name("gpu_util")}{{UUID="{MOVER}"}}', timeout=budget(30))
        yield server


def _queries(ledger: str, **variables: str) -> dict[tuple[str, str], Any]:
    (dashboard, origin), = load_dashboards([JSON])
    (group,) = dashboard_groups([(dashboard, origin)], 15, {"ledger": ledger, **variables})
    return {(q.item, q.ref): q for q in group.queries if q.kind == PANEL}


def _value(series: list[dict[str, Any]]) -> float:
    (one,) = series
    return float(one["value"][1])


def test_every_panel_answers_or_is_rightly_empty(prometheus: SeededPrometheus) -> None:
    for ledger in ("30d", "90d"):
        (dashboard, origin), = load_dashboards([JSON])
        groups = dashboard_groups([(dashboard, origin)], 15, {"ledger": ledger})
        results = [r for g in run_check(prometheus.url, groups, site_promql()) for r in g.results]
        assert not [f"{r.query.item}: {r.status.value} {r.detail}" for r in results if r.status.failed]
        ok = {r.query.item for r in results if r.status is Status.OK}
        assert {"RMA", "Reset GPU", "Firing health alerts, costliest action first", "GPUs down / expected",
                "Firing health alerts per action", "GPU core headroom: the 10 closest to their limit"} <= ok
        # No drain is firing (only pending): rightly empty, not a failure.
        drain = next(r for r in results if r.query.item == "Drain")
        assert drain.status is Status.NOT_FIRING, drain


def test_the_action_stats_count_firing_alerts_per_gpu(prometheus: SeededPrometheus) -> None:
    queries = _queries("30d")

    def stat(title: str) -> list[dict[str, Any]]:
        return prometheus.query(queries[(title, "A")].expr)

    assert _value(stat("RMA")) == 1 and _value(stat("Reset GPU")) == 1 and _value(stat("Reboot node")) == 1
    assert stat("Drain") == [] and stat("Restart job") == []  # the drain alert is only pending
    assert _value(stat("GPUs needing any action")) == 3  # the `none` alert is nothing to do


def test_the_alert_table_sorts_by_cost_and_names_each_gpus_uuid(prometheus: SeededPrometheus) -> None:
    queries = _queries("30d")
    title = "Firing health alerts, costliest action first"
    costs = prometheus.query(queries[(title, "A")].expr)
    rows = sorted(((float(s["value"][1]), s["metric"]["alertname"], s["metric"].get("UUID")) for s in costs),
                  reverse=True)
    assert rows == [(5, "GPURowRemapFailure", FAILED), (3, "GPUFellOffBus", None), (2, "GPURowRemapPending", STEADY)]
    since = prometheus.query(queries[(title, "B")].expr)
    assert len(since) == 3 and all(float(s["value"][1]) < time.time() * 1000 for s in since)


def _ledger(prometheus: SeededPrometheus, ledger: str) -> dict[str, dict[str, Any]]:
    """The ledger's rows by UUID: the row query's labels and value, and each column's value."""
    queries = _queries(ledger)
    title = next(item for item, _ in queries if item.startswith("GPU ledger by UUID"))
    panel = {ref: q for (item, ref), q in queries.items() if item == title}
    rows = {s["metric"]["UUID"]: {"labels": s["metric"], "score": float(s["value"][1])}
            for s in prometheus.query(panel["A"].expr)}
    (dashboard, _), = load_dashboards([JSON])
    table = next(p for p in dashboard["panels"] if p["title"] == title)
    names = next(t["options"]["renameByName"] for t in table["transformations"] if t["id"] == "organize")
    for ref, query in panel.items():
        if ref == "A":
            continue
        for series in prometheus.query(query.expr):
            if series["metric"]["UUID"] in rows:
                rows[series["metric"]["UUID"]][names[f"Value #{ref}"]] = float(series["value"][1])
    return rows


def test_the_ledger_follows_a_gpu_that_moved_between_nodes(prometheus: SeededPrometheus) -> None:
    month, quarter = _ledger(prometheus, "30d"), _ledger(prometheus, "90d")
    assert set(month) == {MOVER, FAILED, STEADY, GONE}
    mover = month[MOVER]
    # Seen last in node B's slot 1; its DBEs on node A and on node B both count.
    assert (mover["labels"]["instance"], mover["labels"]["gpu"]) == (B, "1")
    assert round(mover["DBE aggregate"]) == 5
    # The volatile count went back to 0 at the reset: the two DBEs before it still count.
    assert round(mover["DBE volatile"]) == round(quarter[MOVER]["DBE volatile"]) == 2
    assert "DBE volatile" not in month[STEADY]
    # An XID only dcgm-exporter's gauge showed counts, by UUID, with the codes of its action.
    assert month[FAILED]["XIDs for reset_gpu"] == quarter[FAILED]["XIDs for reset_gpu"] == 1
    assert "XIDs for reset_gpu" not in month[STEADY] and "XIDs for reset_gpu" not in mover
    assert "XIDs for reboot_node" not in mover  # XID 79 was 35 days ago
    assert round(quarter[MOVER]["XIDs for reboot_node"]) == 1 and round(quarter[MOVER]["DBE aggregate"]) == 5
    assert month[FAILED]["Remap failure"] == 1 and month[STEADY]["Remap pending"] == 1
    # GPURepeatOffender's count over its own 7 days, whatever $ledger: node B's two, not node A's of 12 days ago
    assert month[MOVER]["Resets in 7d"] == quarter[MOVER]["Resets in 7d"] == 2
    assert "Resets in 7d" not in month[FAILED] and "Resets in 7d" not in month[STEADY]
    # A GPU no longer reporting keeps its row, on the node it reported on last.
    assert (month[GONE]["labels"]["instance"], month[GONE]["SBE aggregate"]) == (C, 3)
    # Worst first: the failed remap (rma) over five DBEs (reset_gpu) over one pending remap (reset_gpu) over SBEs.
    order = sorted(month, key=lambda uuid: month[uuid]["score"], reverse=True)
    assert order == [FAILED, MOVER, STEADY, GONE]
    # and the row's value is the score, which the worst action column maps to the action: rma, reset_gpu
    rma, reset_gpu = 100 ** ACTIONS.index("rma"), 100 ** ACTIONS.index("reset_gpu")
    assert rma <= month[FAILED]["score"] < 100 * rma
    assert all(reset_gpu <= month[uuid]["score"] < 100 * reset_gpu for uuid in (MOVER, STEADY))


def test_the_headroom_ranks_the_gpus_closest_to_their_own_limits(prometheus: SeededPrometheus) -> None:
    queries = _queries("30d")
    core = prometheus.query(queries[("GPU core headroom: the 10 closest to their limit", "A")].expr)
    coolest = min(core, key=lambda s: float(s["value"][1]))
    assert (coolest["metric"]["instance"], coolest["metric"]["gpu"], float(coolest["value"][1])) == (A, "1", 3)
    hbm = prometheus.query(queries[("HBM headroom: the 10 closest to their limit", "A")].expr)
    assert sorted(float(s["value"][1]) for s in hbm) == [5, 15, 15]


def test_gpus_reporting_against_expected(prometheus: SeededPrometheus) -> None:
    queries = _queries("30d")
    title = "GPUs down / expected"
    assert _value(prometheus.query(queries[(title, "A")].expr)) == 3
    assert _value(prometheus.query(queries[(title, "E")].expr)) == 4
