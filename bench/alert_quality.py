"""Alert-quality report: the scenario corpus through `promtool test rules`, gpudash's rules against naive ones.

For every scenario of bench/alert_corpus.py (benign and faulty, hours long at 15 s) this writes a promtool
test file whose input is the simulated node and whose only checks are PromQL queries over the `ALERTS`
series the rules produced; promtool prints what those queries return, and that is parsed into: which alert
fired on which GPU, first at what time, in how many separate episodes, for how long.

Then the totals: alerts on benign scenarios (false alerts; target 0), faults detected (target all),
memory-leak warning lead time before the OOM (target >= 30 min), time from the start of thermal throttling
to its alert (target < 5 min), each for gpudash's rules and for a naive set (utilization < 10 %,
temperature > 85 C, memory > 95 %, no `for:`).

    python bench/alert_quality.py                     # both exporter flavours, every scenario
    python bench/alert_quality.py --flavour dcgm --scenario memory-leak-oom --keep /tmp/corpus
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import yaml

if not __package__:  # run as `python bench/alert_quality.py`: the sibling modules come through the bench package
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.alert_corpus import FLAVOURS, SCENARIOS, STEP, Scenario, input_series, throttle_onset
from bench.promtool_samples import run_promtool
from gpudash.catalog import HPC_JOB_LABEL, profile
from gpudash.config.loading import load_settings
from gpudash.exporter.sim.fleet import H200
from gpudash.repository import ALERTS_FILE, RECORDING_FILE
from gpudash.rules.generated_files import GROUP_EVAL_ORDER, render_all

BY = "alertname, severity, instance, gpu"
FIRING = 'ALERTS{alertstate="firing"}'
NAIVE_GROUP = "naive"
GRACE = 1800.0  # an alert up to this long after a fault ends still counts as catching it


@dataclass
class Fired:
    alertname: str
    severity: str
    host: str  # the alert's instance without its port; "" for a job's alert
    gpu: str  # "" for a node-level alert
    first: float
    episodes: int
    seconds: float
    first_after_onset: float | None = None


def _hm(seconds: float) -> str:
    if seconds < 0:
        return "-" + _hm(-seconds)
    s = round(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m{s % 60:02d}s" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def naive_rules() -> str:
    dcgm = profile("dcgm")
    util, temp = dcgm.ref("gpu_util").name, dcgm.ref("gpu_temp").name
    used, free = dcgm.ref("fb_used").name, dcgm.ref("fb_free").name
    clock = dcgm.ref("sm_clock").name
    in_job = f'{{{HPC_JOB_LABEL}!=""}}'  # the job rules' naive counterparts watch GPUs a job holds
    rules = [
        {"alert": "NaiveLowUtilization", "expr": f"{util} < 10", "labels": {"severity": "warning"}},
        {"alert": "NaiveHighTemperature", "expr": f"{temp} > 85", "labels": {"severity": "critical"}},
        {"alert": "NaiveMemoryFull", "expr": f"{used} / ({used} + {free}) > 0.95", "labels": {"severity": "critical"}},
        # a straggler as "SM clock under 80 % of the H200's 1980 MHz", an idle holder as "under 5 %", no for:
        {"alert": "NaiveSlowClock", "expr": f"{clock}{in_job} < {0.8 * H200.sm_clock_max_mhz:g}",
         "labels": {"severity": "warning"}},
        {"alert": "NaiveAllocatedIdle", "expr": f"{util}{in_job} < 5", "labels": {"severity": "info"}},
    ]
    return yaml.safe_dump({"groups": [{"name": NAIVE_GROUP, "rules": rules}]}, sort_keys=False)


def _queries(scenario: Scenario) -> list[tuple[str, str, int]]:
    """(name, expr, eval_time) of the queries whose answers make up the report."""
    end = (scenario.samples - 1) * STEP
    whole = f"[{end}s:{STEP}s]"
    q = [
        ("first", f"min by ({BY}) (min_over_time(timestamp({FIRING}){whole}))", end),
        ("samples", f"sum by ({BY}) (count_over_time({FIRING}[{end}s]))", end),
        ("episodes", f"sum by ({BY}) (count_over_time(({FIRING} unless {FIRING} offset {STEP}s){whole}))", end),
    ]
    window = scenario.fault_window
    if window:
        start = int(window[0])
        # the first episode that *starts* after the fault does: an alert already firing does not catch it
        began = f"({FIRING} unless {FIRING} offset {STEP}s)"
        q.append(("after", f"min by ({BY}) (min_over_time(timestamp({began})[{end - start + STEP}s:{STEP}s]))", end))
    return [(name, f'label_replace({expr}, "q", "{name}", "", "")', at) for name, expr, at in q]


def test_file(scenario: Scenario, flavour: str, rule_files: list[str], order: list[str]) -> dict[str, object]:
    return {
        "rule_files": rule_files,
        "evaluation_interval": f"{STEP}s",
        "group_eval_order": order,
        "tests": [{
            "interval": f"{STEP}s",
            "input_series": list(input_series(scenario, flavour)),
            "promql_expr_test": [
                {"expr": e, "eval_time": f"{t}s", "exp_samples": []} for _, e, t in _queries(scenario)
            ],
        }],
    }


def collect(samples: list[dict[str, str]]) -> list[Fired]:
    fired: dict[tuple[str, str, str, str], Fired] = {}
    for s in samples:
        host = s.get("instance", "").rsplit(":", 1)[0]  # host:9400 and host:9100 are one node
        key = (s["alertname"], s.get("severity", ""), host, s.get("gpu", ""))
        f = fired.setdefault(key, Fired(*key, first=0.0, episodes=0, seconds=0.0))
        value = float(s["value"])
        if s["q"] == "first":
            f.first = value
        elif s["q"] == "samples":
            f.seconds = value * STEP
        elif s["q"] == "episodes":
            f.episodes = int(value)
        elif s["q"] == "after":
            f.first_after_onset = value
    return sorted(fired.values(), key=lambda f: (f.first, f.alertname, f.host, f.gpu))


@dataclass
class Outcome:
    scenario: Scenario
    rules: str  # "gpudash" or "naive"
    fired: list[Fired]

    def on_target(self, f: Fired) -> bool:
        return self.scenario.hits(f.host, f.gpu)

    def catches(self) -> list[Fired]:
        """Alerts meant for this fault that began firing on the faulted GPU (or node) during it or soon after."""
        window = self.scenario.fault_window
        if window is None:
            return []
        meant = self.scenario.expected if self.rules == "gpudash" else self.scenario.naive_expected
        return [f for f in self.fired if self.on_target(f) and f.alertname in meant
                and f.first_after_onset is not None and window[0] <= f.first_after_onset <= window[1] + GRACE]

    def false_alerts(self) -> list[Fired]:
        """Every alert of a benign scenario; in a faulty one, alerts off target or before the fault."""
        if self.scenario.kind == "benign":
            return list(self.fired)
        window = self.scenario.fault_window
        assert window is not None
        return [f for f in self.fired if not self.on_target(f) or f.first < window[0]]

    def first_catch(self, names: tuple[str, ...] | None = None) -> float | None:
        """When the first alert meant for the fault (or one of `names`) began firing."""
        times = [f.first_after_onset for f in self.catches() if names is None or f.alertname in names]
        return min((t for t in times if t is not None), default=None)


def evaluate(scenarios: list[Scenario], flavour: str, thresholds: Path | None, work: Path,
             jobs: int, naive: bool = True) -> tuple[list[Outcome], list[Outcome]]:
    """gpudash's outcomes and the naive set's, one per scenario; `naive=False` runs gpudash's rules only."""
    files = render_all(load_settings(thresholds))
    rules_dir = work / "rules"
    for rel in (ALERTS_FILE, RECORDING_FILE):
        (rules_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (rules_dir / rel).write_text(files[rel])
    (rules_dir / "naive.rules.yml").write_text(naive_rules())
    ours = [str(rules_dir / RECORDING_FILE), str(rules_dir / ALERTS_FILE)]
    sets = [("gpudash", ours, list(GROUP_EVAL_ORDER))]
    if naive:
        sets.append(("naive", [str(rules_dir / "naive.rules.yml")], [NAIVE_GROUP]))
    with ThreadPoolExecutor(max_workers=jobs) as pool:  # each file runs while the next one is written
        runs = []
        for scenario in scenarios:
            for label, rule_files, order in sets:
                path = work / f"{scenario.name}.{flavour}.{label}.test.yml"
                path.write_text(yaml.safe_dump(test_file(scenario, flavour, rule_files, order), sort_keys=False,
                                               width=1 << 20))
                runs.append((scenario, label, pool.submit(run_promtool, path)))
        outcomes = [Outcome(scenario, label, collect(run.result())) for scenario, label, run in runs]
    return [o for o in outcomes if o.rules == "gpudash"], [o for o in outcomes if o.rules == "naive"]


def _where(scenario: Scenario, host: str, gpus: list[str]) -> str:
    """`gpu5` or `node` on the faulted node; `gpu-node-02:gpu5` on another."""
    gpus = sorted(gpus)
    where = "node" if gpus == [""] else "gpu" + ",".join(g or "-" for g in gpus)
    return where if host in ("", scenario.fault_host) else f"{host}:{where}"


def _cell(outcome: Outcome, width: int) -> list[str]:
    """One line per alert and severity: the GPUs it fired on, its first time, its episodes in all."""
    grouped: dict[tuple[str, str], list[Fired]] = {}
    for f in outcome.fired:
        grouped.setdefault((f.alertname, f.severity), []).append(f)
    lines = []
    for (name, severity), fired in grouped.items():
        where = " ".join(_where(outcome.scenario, host, [f.gpu for f in fired if f.host == host])
                         for host in sorted({f.host for f in fired}, key=lambda h: h != outcome.scenario.fault_host))
        episodes = sum(f.episodes for f in fired)
        lines.append(f"{name}/{severity[:4]} {where} @{_hm(min(f.first for f in fired))}"
                     + (f" ({episodes} episodes)" if episodes > 1 else ""))
    return lines or ["-"]


def report(flavour: str, ours: list[Outcome], naive: list[Outcome]) -> None:
    width = 66
    print(f"\n=== exporter flavour: {flavour} ===")
    title = "gpudash rules: alert/severity GPUs @first (episodes)"
    print(f"{'scenario':<24} {'kind':<6} | {title:<{width}} | naive rules")
    print("-" * (31 + 2 * width + 6))
    for o, n in zip(ours, naive, strict=True):
        left, right = _cell(o, width), _cell(n, width)
        for i in range(max(len(left), len(right))):
            head = f"{o.scenario.name:<24} {o.scenario.kind:<6}" if i == 0 else " " * 31
            a = left[i] if i < len(left) else ""
            b = right[i] if i < len(right) else ""
            print(f"{head} | {a:<{width}} | {b}")
    print()
    for label, outs in (("gpudash", ours), ("naive", naive)):
        _totals(label, outs)


def _totals(label: str, outs: list[Outcome]) -> None:
    benign = [o for o in outs if o.scenario.kind == "benign"]
    faults = [o for o in outs if o.scenario.kind == "fault"]
    false_benign = sum(len(o.false_alerts()) for o in benign)
    false_benign_ep = sum(f.episodes for o in benign for f in o.false_alerts())
    false_faulty = sum(len(o.false_alerts()) for o in faults)
    detected = [o for o in faults if o.catches()]
    missed = [o.scenario.name for o in faults if not o.catches()]
    print(f"[{label}] false alerts on {len(benign)} benign scenarios: {false_benign} "
          f"({false_benign_ep} firing episodes); off-target/early alerts in faulty scenarios: {false_faulty}")
    missed_text = f" (missed: {', '.join(missed)})" if missed else ""
    print(f"[{label}] faults detected: {len(detected)}/{len(faults)}{missed_text}")
    for o in faults:
        window = o.scenario.fault_window
        assert window is not None
        first = o.first_catch()
        detail = f"{_hm(first - window[0])} after fault start" if first is not None else "not detected"
        print(f"    {o.scenario.name:<24} {detail}")
    leak = next((o for o in faults if "oom" in o.scenario.notes), None)
    if leak is not None:
        first = leak.first_catch()
        oom = leak.scenario.notes["oom"]
        warned = first is not None and first < oom
        text = f"{(oom - first) / 60:.0f} min before OOM" if first is not None and warned else "no warning before OOM"
        print(f"[{label}] memory-leak warning: {text}")
    thermal = next((o for o in faults if o.scenario.name == "thermal-throttling"), None)
    if thermal is not None:
        onset = throttle_onset(thermal.scenario)
        window = thermal.scenario.fault_window
        assert onset is not None and window is not None
        meant = thermal.first_catch()
        on_gpu = [f.first_after_onset for f in thermal.fired if thermal.on_target(f) and f.first_after_onset]
        first_any = min((t for t in on_gpu if t is not None), default=None)
        shown = [("its own alert", meant)] + ([("first alert on the GPU", first_any)] if label == "gpudash" else [])
        for what, first in shown:
            text = "not detected" if first is None else (
                f"{_hm(first - onset)} after throttling began ({_hm(first - window[0])} after the cooling fault)")
            print(f"[{label}] thermal throttling, {what}: {text}")


def _backtest_column(scenarios: list[Scenario], flavour: str, thresholds: Path | None, work: Path) -> None:
    """`gpudash backtest`'s engine over the same series backfilled into Prometheus, against promtool's evaluation."""
    from bench.backtest_quality import backtest_column, compare

    comparisons = compare(scenarios, flavour, load_settings(thresholds), work / "backtest")
    print(f"\n{'scenario':<24} backtest (staleness markers as absent samples on both sides)")
    for name, text in backtest_column(comparisons).items():
        print(f"{name:<24} {text}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flavour", choices=(*FLAVOURS, "all"), default="all")
    parser.add_argument("--scenario", action="append", help="run only these (repeatable)")
    parser.add_argument("--thresholds", type=Path, default=None, help="thresholds.yaml to render the rules from")
    parser.add_argument("--keep", type=Path, default=None, help="write the promtool test files here and keep them")
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--backtest", action="store_true", help="add the backtest column (backtest_quality.py)")
    args = parser.parse_args(argv)
    scenarios = [s for s in SCENARIOS if not args.scenario or s.name in args.scenario]
    if not scenarios:
        parser.error("no scenario matches")
    flavours = FLAVOURS if args.flavour == "all" else (args.flavour,)
    with tempfile.TemporaryDirectory(prefix="gpudash-alerts-") as tmp:
        for flavour in flavours:
            work = (args.keep or Path(tmp)) / flavour
            work.mkdir(parents=True, exist_ok=True)
            ours, naive = evaluate(scenarios, flavour, args.thresholds, work, args.jobs)
            report(flavour, ours, naive)
            if args.backtest:  # the backtest column: bench/backtest_quality.py
                _backtest_column(scenarios, flavour, args.thresholds, work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
