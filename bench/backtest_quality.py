"""Backtest against promtool on the alert scenario corpus: the same series, alert by alert, evaluation by evaluation.

For each scenario of bench/alert_corpus.py the simulated node is written twice: as promtool `input_series`
(promtool's rule unit tests evaluate gpudash's rules on it, the reference) and as OpenMetrics, backfilled
with `promtool tsdb create-blocks-from openmetrics` into a Prometheus that `gpudash backtest`'s engine then
replays the same rules against, over range queries. Each scenario gets its own host and cluster name, so
every scenario lives in one TSDB without meeting another. Staleness markers, which OpenMetrics cannot carry,
become absent samples on both sides: the input is the same series.

The reference query lists every evaluation at which each alert was firing: one `count_values` series per
(alert, timestamp) of ALERTS{alertstate="firing"}, gathered by a subquery at the evaluation interval.

    python bench/backtest_quality.py                        # every scenario, bundled exporter
    python bench/backtest_quality.py --scenario xid-79 --flavour dcgm
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml

if not __package__:  # run as `python bench/backtest_quality.py`
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.alert_corpus import CLUSTER, FLAVOURS, HOST, SCENARIOS, STEP, Scenario, build_series, expand
from bench.promtool_samples import run_promtool
from gpudash.backtest.alert_state import Labels
from gpudash.backtest.engine import replay
from gpudash.backtest.rule_set import rule_set
from gpudash.check.prometheus_api import PrometheusClient
from gpudash.config.loading import Settings, load_settings
from gpudash.repository import ALERTS_FILE, RECORDING_FILE
from gpudash.rules.generated_files import GROUP_EVAL_ORDER, render_all
from gpudash.stack.history import SeededPrometheus

Firing = set[tuple[Labels, int]]  # (alert labels, seconds from the scenario's start) of each firing evaluation
_DROP = ("alertstate", "t", "value")


def host_of(scenario: Scenario) -> str:
    return f"{scenario.name}-node"


def scenario_series(scenario: Scenario, flavour: str) -> dict[str, list[float | None]]:
    """The scenario's series, on a host and cluster of its own; a staleness marker becomes an absent sample."""
    out: dict[str, list[float | None]] = {}
    for selector, samples in build_series(scenario, flavour).items():
        renamed = selector.replace(f'cluster="{CLUSTER}"', f'cluster="{scenario.name}"')
        renamed = renamed.replace(HOST, host_of(scenario))
        out[renamed] = [None if s in (None, "stale") else float(s) for s in samples]
    return out


def reference_query(scenario: Scenario) -> str:
    end = (scenario.samples - 1) * STEP
    firing = 'ALERTS{alertstate="firing"}'
    return f'count_over_time((count_values without () ("t", timestamp({firing})))[{end + STEP}s:{STEP}s])'


def reference_firing(scenario: Scenario, series: dict[str, list[float | None]], settings: Settings,
                     work: Path) -> Firing:
    """promtool's evaluation of the rules on the series: every (alert, time) it was firing."""
    files = render_all(settings)
    for rel in (ALERTS_FILE, RECORDING_FILE):
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(files[rel], encoding="utf-8")
    end = (scenario.samples - 1) * STEP
    test = {
        "rule_files": [str(work / RECORDING_FILE), str(work / ALERTS_FILE)],
        "evaluation_interval": f"{STEP}s",
        "group_eval_order": list(GROUP_EVAL_ORDER),
        "tests": [{
            "interval": f"{STEP}s",
            "input_series": [{"series": s, "values": expand(list(v))} for s, v in sorted(series.items())],
            "promql_expr_test": [{"expr": reference_query(scenario), "eval_time": f"{end}s", "exp_samples": []}],
        }],
    }
    path = work / f"{scenario.name}.test.yml"
    path.write_text(yaml.safe_dump(test, sort_keys=False, width=1 << 20), encoding="utf-8")
    found: Firing = set()
    for sample in run_promtool(path):
        labels = tuple(sorted((k, v) for k, v in sample.items() if k not in _DROP))
        found.add((labels, round(float(sample["t"]))))
    return found


def openmetrics(series: dict[str, list[float | None]], base: int) -> str:
    """The series as OpenMetrics, sample i at base + i * STEP; each metric's samples together, in time order."""
    by_name: dict[str, list[tuple[int, str]]] = {}
    for selector, samples in series.items():
        name = selector.split("{", 1)[0]
        rows = by_name.setdefault(name, [])
        rows.extend((i, f"{selector} {v!r} {base + i * STEP}") for i, v in enumerate(samples) if v is not None)
    lines = [line for name in sorted(by_name) for _, line in sorted(by_name[name], key=lambda r: r[0])]
    return "\n".join([*lines, "# EOF"]) + "\n"


@contextmanager
def backfilled(text: str, work: Path) -> Iterator[SeededPrometheus]:
    """A Prometheus holding the OpenMetrics text as TSDB blocks (promtool tsdb create-blocks-from openmetrics)."""
    promtool = shutil.which("promtool") or "/usr/bin/promtool"
    (work / "history.om").write_text(text, encoding="utf-8")
    done = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", "--quiet",
                           str(work / "history.om"), str(work / "blocks")], capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"promtool create-blocks-from openmetrics failed: {done.stderr[-2000:]}")
    blocks = sorted(p for p in (work / "blocks").iterdir() if p.is_dir())
    with SeededPrometheus("global: {}\n", blocks=blocks) as prometheus:
        yield prometheus


def backtest_firing(url: str, settings: Settings, scenarios: Sequence[Scenario], base: int) -> dict[str, Firing]:
    """The backtest engine's evaluation (recording rules inlined), per scenario, from `base` on."""
    rules = rule_set(settings)
    alerts = [rules.inlined(a) for a in rules.alerts]
    hours = max(s.hours for s in scenarios)
    client = PrometheusClient(url, timeout=120)
    incidents, _ = replay(client, alerts, base, base + hours * 3600, STEP, warmup_s=0)
    out: dict[str, Firing] = {s.name: set() for s in scenarios}
    for i in incidents:
        cluster = i.label("cluster")
        if cluster not in out:
            continue
        last = base + (next(s for s in scenarios if s.name == cluster).samples - 1) * STEP
        for ts in range(int(i.start), int(min(i.end, last)) + STEP, STEP):
            out[cluster].add((i.labels, ts - base))
    return out


@dataclass(frozen=True)
class Comparison:
    scenario: Scenario
    reference: Firing
    backtest: Firing

    @property
    def equal(self) -> bool:
        return self.reference == self.backtest

    def episodes(self, firing: Firing) -> int:
        return sum(1 for labels, t in firing if (labels, t - STEP) not in firing)

    def differences(self, limit: int = 5) -> list[str]:
        only_ref = sorted(self.reference - self.backtest, key=lambda x: (x[1], x[0]))[:limit]
        only_bt = sorted(self.backtest - self.reference, key=lambda x: (x[1], x[0]))[:limit]
        return ([f"promtool only: {dict(lab)['alertname']} {dict(lab).get('gpu', '')} @{t}s" for lab, t in only_ref]
                + [f"backtest only: {dict(lab)['alertname']} {dict(lab).get('gpu', '')} @{t}s" for lab, t in only_bt])


def compare(scenarios: Sequence[Scenario], flavour: str, settings: Settings, work: Path,
            jobs: int = 4) -> list[Comparison]:
    """Reference and backtest over the same series, per scenario."""
    series = {s.name: scenario_series(s, flavour) for s in scenarios}
    base = (int(time.time()) - 2 * 86400) // 7200 * 7200  # recent enough for the TSDB, aligned to its blocks

    def reference(s: Scenario) -> Firing:
        (work / s.name).mkdir(parents=True, exist_ok=True)
        return reference_firing(s, series[s.name], settings, work / s.name)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        refs = list(pool.map(reference, scenarios))
    merged = {k: v for s in series.values() for k, v in s.items()}
    with backfilled(openmetrics(merged, base), work) as prometheus:
        ours = backtest_firing(prometheus.url, settings, scenarios, base)
    return [Comparison(s, r, ours[s.name]) for s, r in zip(scenarios, refs, strict=True)]


def backtest_column(comparisons: Sequence[Comparison]) -> dict[str, str]:
    """The alert-quality report's backtest column: per scenario, backtest's episodes and whether promtool agrees."""
    out = {}
    for c in comparisons:
        verdict = "= promtool" if c.equal else f"DIFFERS from promtool ({c.episodes(c.reference)} episodes)"
        out[c.scenario.name] = f"{c.episodes(c.backtest)} episodes, {len(c.backtest)} firing evaluations {verdict}"
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flavour", choices=FLAVOURS, default="bundled")
    parser.add_argument("--scenario", action="append", help="run only these (repeatable)")
    parser.add_argument("--thresholds", type=Path, default=None)
    args = parser.parse_args(argv)
    scenarios = [s for s in SCENARIOS if not args.scenario or s.name in args.scenario]
    with tempfile.TemporaryDirectory(prefix="gpudash-backtest-") as tmp:
        comparisons = compare(scenarios, args.flavour, load_settings(args.thresholds), Path(tmp))
    for name, text in backtest_column(comparisons).items():
        print(f"{name:<24} {text}")
    for c in comparisons:
        for line in c.differences():
            print(f"  {c.scenario.name}: {line}")
    return 0 if all(c.equal for c in comparisons) else 1


if __name__ == "__main__":
    sys.exit(main())
