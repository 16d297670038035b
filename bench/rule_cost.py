"""What one evaluation of every rule costs Prometheus: the recording rules and the alerting rules, as
`gpudash rules` renders them now.

    python bench/fleet_scale.py --sizes 1024,8192 --rule-cost

For each fleet size, a TSDB that holds just the history the rules read (the longest range plus offset of any
expression, up to DENSE_CAP: a longer window reads sparse series, which the synthetic fleet does not have),
every signal the rules read, and every recording rule backfilled over it: a rule that reads another
recording is backfilled in a later pass, once the one it reads is there. The raw blocks are cached under
--cache and reused while the signals, the seed and the history stay the same; the recordings are redone when
any of them changes. Then each rule's expression runs as an instant query at the end of the data, one
warm-up and `repeat` timed runs, median of Prometheus's own evaluation time (its answer's `stats` timings):
what Prometheus pays for it every evaluation interval. The round trip a client sees is kept beside it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from bench import fleet_report, fleet_tsdb, grafana_load
from bench import fleetgen as fg
from gpudash.catalog import DCGM
from gpudash.config.durations import parse_duration
from gpudash.config.loading import Settings
from gpudash.promql.recordings import signals_in
from gpudash.promql.scanner import metric_names
from gpudash.repository import ALERTS_FILE, GENERATED_DIR, RECORDING_FILE
from gpudash.rules.generated_files import render_all

FORMAT = 1  # bump when what is generated changes, so cached TSDBs are rebuilt
DENSE_CAP_S = 6 * fg.HOUR  # a window longer than this reads sparse series (events), not every GPU's
MARGIN_S = 15 * 60
SECTION = "## What every rule costs Prometheus"
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Rule:
    group: str
    name: str  # the recorded name, or the alert's name with the labels that tell its rules apart
    expr: str
    recording: bool
    interval_s: int


def rules(settings: Settings) -> list[Rule]:
    """Every rule of the generated rule files as `gpudash rules` renders them now, recording rules first."""
    files = render_all(settings)
    return rules_in([files[RECORDING_FILE], files[ALERTS_FILE]], settings.site.scrape_interval.seconds)


def rules_at(revision: str, interval_s: int) -> list[Rule]:
    """Every rule of the generated rule files committed at a git revision (what the rules cost before), or held
    in a folder laid out as generated/ is (a copy where there is no git history, e.g. on another machine)."""
    paths = (RECORDING_FILE, ALERTS_FILE)
    if Path(revision).is_dir():
        return rules_in([(Path(revision) / path).read_text() for path in paths], interval_s)
    texts = [subprocess.run(["git", "-C", str(ROOT), "show", f"{revision}:{GENERATED_DIR / path}"], check=True,
                            capture_output=True, text=True).stdout for path in paths]
    return rules_in(texts, interval_s)


def rules_in(texts: Sequence[str], interval_s: int) -> list[Rule]:
    out = []
    for text in texts:
        for group in yaml.safe_load(text)["groups"]:
            interval = parse_duration(group["interval"]).seconds if "interval" in group else interval_s
            for rule in group["rules"]:
                if "record" in rule:
                    out.append(Rule(group["name"], rule["record"], rule["expr"], True, interval))
                    continue
                labels = ", ".join(f"{k}={v}" for k, v in rule.get("labels", {}).items())
                out.append(Rule(group["name"], f"{rule['alert']} ({labels})", rule["expr"], False, interval))
    return out


# a range (or subquery) and its offset, if any; an offset after no range reads the 5-minute lookback before it
_RANGE = re.compile(r"\[\s*([0-9][0-9a-z]*)\s*(?::[0-9a-z]*)?\]\s*(?:offset\s+([0-9][0-9a-z]*))?")
_OFFSET_ALONE = re.compile(r"(?<![\]\s])\s*offset\s+([0-9][0-9a-z]*)|(?<=[^\]\s])\s+offset\s+([0-9][0-9a-z]*)")
LOOKBACK_S = 300


def reach_s(expr: str) -> int:
    """How far back from the evaluation time an expression reads: each range plus its own offset."""
    reach = [parse_duration(w).seconds + (parse_duration(o).seconds if o else 0) for w, o in _RANGE.findall(expr)]
    alone = [parse_duration(a or b).seconds + LOOKBACK_S for a, b in _OFFSET_ALONE.findall(expr)]
    return max([LOOKBACK_S, *reach, *alone])


def history_s(exprs: Sequence[str]) -> tuple[int, list[str]]:
    """Seconds of history the expressions read on dense series, and those reading further (left out)."""
    reach = [reach_s(expr) for expr in exprs]
    further = [expr for expr, r in zip(exprs, reach, strict=True) if r > DENSE_CAP_S]
    return max((r for r in reach if r <= DENSE_CAP_S), default=LOOKBACK_S) + MARGIN_S, further


def passes(recordings: Sequence[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """(record, expression) pairs in backfill passes: a recording comes in a pass after every one it reads
    (promtool evaluates each rule against the Prometheus it is given, which holds no recording written yet)."""
    names = {name for name, _ in recordings}
    level: dict[str, int] = {}
    for name, expr in recordings:  # the registry lists a recording after the ones it reads
        reads = [n for n in metric_names(expr) if n in names and n != name]
        level[name] = 1 + max((level.get(n, 0) for n in reads), default=-1)
    out: list[list[tuple[str, str]]] = [[] for _ in range(max(level.values(), default=-1) + 1)]
    for name, expr in recordings:
        out[level[name]].append((name, expr))
    return out


def read_back(recordings: Sequence[Rule], all_rules: Sequence[Rule]) -> dict[str, int]:
    """Per recording, how far back from the end the rules read what it recorded (0: only its own cost counts,
    nothing reads it): a reading recording's own history comes on top of the range it reads."""
    need = dict.fromkeys((r.name for r in recordings), 0)
    for _ in range(len(recordings) + 1):  # settles once every chain of readers is followed
        for rule in all_rules:
            for name in metric_names(rule.expr):
                if name in need and name != rule.name:
                    need[name] = max(need[name], reach_s(rule.expr) + need.get(rule.name, 0))
    return need


def keys_read(all_rules: Sequence[Rule]) -> list[str]:
    found = set()
    for rule in all_rules:
        found |= {s.key for s in signals_in(rule.expr, DCGM)}
    return fg.published_keys(found)


def _hardlink_copy(src: Path, dst: Path) -> None:
    """A copy of a TSDB whose block files are hard links: Prometheus replaces files, it never writes into one."""
    shutil.rmtree(dst, ignore_errors=True)
    subprocess.run(["cp", "-al", str(src), str(dst)], check=True)


def build(gpus: int, all_rules: Sequence[Rule], cache: Path, end: int, workers: int, seed: int,
          say: object = print) -> tuple[Path, dict[str, object]]:
    """The size's TSDB for the rules: raw blocks (cached), the recordings on top, compacted; its manifest."""
    home = cache / f"rule-cost-{gpus}-gpus"
    raw, data, log = home / "raw", home / "data", home / "prometheus.log"
    keys = keys_read(all_rules)
    span, further = history_s([r.expr for r in all_rules])
    recordings = [r for r in all_rules if r.recording]
    wanted = {"format": FORMAT, "seed": seed, "keys": keys, "history_s": span}
    manifest_path = home / "manifest.json"
    saved = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    same = all(saved.get(k) == v for k, v in wanted.items() if k != "history_s")
    if not same or saved.get("history_s", 0) < span:  # a longer history than needed serves as well
        shutil.rmtree(home, ignore_errors=True)
        raw.mkdir(parents=True)
        timeline = fg.Timeline(end - span, end, (fg.Window(end - span, end),))
        began = time.monotonic()
        pool = fleet_tsdb.simulate_pool(seed, timeline, keys, workers)
        simulated = time.monotonic() - began
        done = fleet_tsdb.backfill_raw(fg.FleetShape(gpus, seed), timeline, keys, pool, raw, workers, say=say)
        saved = {**wanted, "end": end, "seconds": {"simulate": simulated, "openmetrics+promtool": done["wall_s"]},
                 "openmetrics_gb": done["bytes"] / 1e9, "recordings": []}
        manifest_path.write_text(json.dumps(saved, indent=1))
    if not saved.get("raw_compacted"):  # once: a query over the promtool pieces, side by side, is far slower
        began = time.monotonic()
        fleet_tsdb.compact(raw, log)
        took = {**saved["seconds"], "compaction": time.monotonic() - began}
        saved = {**saved, "raw_compacted": True, "seconds": took}
        manifest_path.write_text(json.dumps(saved, indent=1))
    wanted_recordings = [[r.name, r.expr] for r in recordings]
    if saved["recordings"] != wanted_recordings or not data.exists():
        _hardlink_copy(raw, data)
        began = time.monotonic()
        end_saved = int(saved["end"])
        need = read_back(recordings, all_rules)
        for batch in passes([(r.name, r.expr) for r in recordings if need[r.name]]):
            for seconds in sorted({need[name] for name, _ in batch}):
                window = fg.Window(end_saved - seconds, end_saved - 1)
                # each at its group's interval: rules_file puts the hourly ones in an hourly group
                fleet_tsdb.backfill_rules_in_passes(data, log, [[r for r in batch if need[r[0]] == seconds]],
                                                    min(r.interval_s for r in recordings), (window,), home)
        recorded = time.monotonic() - began
        began = time.monotonic()
        fleet_tsdb.compact(data, log)
        took = dict(saved["seconds"])
        took.update({"rules": recorded, "compaction with the recordings": time.monotonic() - began})
        saved = {**saved, "recordings": wanted_recordings, "seconds": took}
        manifest_path.write_text(json.dumps(saved, indent=1))
    saved["further"] = further
    return data, saved


@dataclass(frozen=True)
class Cost:
    rule: Rule
    seconds: float  # median of the timed runs: Prometheus's own time evaluating the expression
    series: int  # what one evaluation returns
    round_trip: float = 0.0  # median of the same runs as the client saw them (HTTP and JSON on top)


def engine_seconds(body: bytes, what: str) -> float:
    """Prometheus's own time evaluating a query (the `stats` timings of its answer): what a rule evaluation
    pays, without the HTTP request and the JSON encoding of the result that only an API query pays."""
    doc = json.loads(body)
    try:
        return float(doc["data"]["stats"]["timings"]["evalTotalTime"])
    except (KeyError, TypeError) as err:
        raise RuntimeError(f"{what}: Prometheus sent no query timings (stats) in its answer") from err


def measure(url: str, rule_sets: Sequence[Sequence[Rule]], end: int, repeat: int) -> list[list[Cost]]:
    """Each rule's expression as an instant query at `end`: one warm-up, then the median of `repeat` runs.
    The sets take turns, a round of every rule each, so a busier minute of the machine weighs on all alike."""
    params = [[{"query": rule.expr, "time": str(end), "stats": "1"} for rule in rules] for rules in rule_sets]
    returned = [[len(grafana_load.series(grafana_load.post(url, "/api/v1/query", p), rule.name))
                 for rule, p in zip(rules, ps, strict=True)] for rules, ps in zip(rule_sets, params, strict=True)]
    runs: list[list[list[tuple[float, float]]]] = [[[] for _ in rules] for rules in rule_sets]
    for _ in range(repeat):
        for taken, ps, rules in zip(runs, params, rule_sets, strict=True):
            for times, p, rule in zip(taken, ps, rules, strict=True):
                began = time.perf_counter()
                body = grafana_load.post(url, "/api/v1/query", p)
                times.append((engine_seconds(body, rule.name), time.perf_counter() - began))
    return [[Cost(rule, statistics.median(e for e, _ in times), n, statistics.median(r for _, r in times))
             for rule, times, n in zip(rules, taken, counts, strict=True)]
            for rules, taken, counts in zip(rule_sets, runs, returned, strict=True)]


# now, TSDB, load, baseline, floor (one instant read of each signal the rules read)
Measured = tuple[list[Cost], dict[str, object], tuple[float, float], list[Cost], list[Cost]]


def floor_reads(url: str, all_rules: Sequence[Rule]) -> list[Rule]:
    """One instant read (a count) of each series set the rules read that the TSDB holds, recordings aside: what a
    rule set pays at least, every evaluation, if it reads each of those signals once."""
    with urllib.request.urlopen(f"{url}/api/v1/label/__name__/values", timeout=300) as answer:
        held = set(json.loads(answer.read())["data"])
    recorded = {r.name for r in all_rules if r.recording}
    names = sorted({n for r in all_rules for n in metric_names(r.expr)} & held - recorded)
    interval = all_rules[0].interval_s if all_rules else 15
    return [Rule("floor", name, f"count({name})", True, interval) for name in names]


def alert_signals(all_rules: Sequence[Rule]) -> set[str]:
    """The signals the alerting rules read, directly or through the recordings they read, at any depth."""
    exprs = {r.name: r.expr for r in all_rules if r.recording}
    seen: set[str] = set()
    todo = [n for r in all_rules if not r.recording for n in metric_names(r.expr)]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += metric_names(exprs.get(name, ""))
    return seen - set(exprs)


def run(gpus: int, settings: Settings, cache: Path, end: int, workers: int, seed: int, repeat: int,
        settle: Callable[[], float], baseline: str | None = None) -> Measured:
    """Build (or reuse) the size's TSDB and time every rule once `settle` returns (it waits for a quieter
    machine and gives the 1-minute load average), and the rules committed at `baseline` beside them; the load
    average before and after."""
    all_rules = rules(settings)
    before_rules = rules_at(baseline, settings.site.scrape_interval.seconds) if baseline else []
    data, saved = build(gpus, all_rules, cache, end, workers, seed)
    with fleet_tsdb.running_prometheus(data, data.parent / "prometheus.log") as url:
        floor = floor_reads(url, all_rules)
        before = settle()
        costs = measure(url, [all_rules, before_rules, floor], int(saved["end"]), repeat)  # type: ignore[call-overload]
        after = os.getloadavg()[0]
    return costs[0], saved, (before, after), costs[1], costs[2]


# ------------------------------------------------------------------------------------------ the report


def core_share(costs: Sequence[Cost]) -> float:
    """The share of one core the rules take, each group evaluated at its own interval (an hourly group's reads
    weigh 1/240 of a 15 s group's)."""
    return sum(c.seconds / c.rule.interval_s for c in costs)


def runs_out_near(costs: Sequence[Cost], gpus: int) -> dict[str, int]:
    """Per group, the fleet size at which one evaluation of it would take its whole interval, scaling its cost at
    `gpus` linearly with the fleet (its rules read every GPU's series). Prometheus evaluates groups side by side
    and a group's rules one after another: past that size the group misses evaluations, whatever the cores."""
    out = {}
    for group in dict.fromkeys(c.rule.group for c in costs):
        mine = [c for c in costs if c.rule.group == group]
        took = sum(c.seconds for c in mine)
        out[group] = int(mine[0].rule.interval_s / took * gpus) if took > 0 else 0
    return out


def _every(seconds: int) -> str:
    if seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    return f"{seconds // 60} min" if seconds % 60 == 0 else f"{seconds} s"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f}" if seconds >= 0.0095 else f"{seconds * 1000:.1f}"


def lines(results: Mapping[int, Measured], machine: str, repeat: int, command: str,
          baseline: str | None = None) -> list[str]:
    sizes = sorted(results)
    largest = sizes[-1]
    costs, saved, _, before, floor = results[largest]
    interval = min(c.rule.interval_s for c in costs)
    hours = ", ".join(f"{g:,} GPUs {int(results[g][1]['history_s']) / 3600:.2f} h" for g in sizes)  # type: ignore[call-overload]
    loads = "; ".join(f"{g:,} GPUs {results[g][2][0]:.2f} before, {results[g][2][1]:.2f} after" for g in sizes)
    then = f" `{baseline}`" if baseline else ""
    out = [SECTION, "",
           f"Generated by `{command}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {machine}. "
           "Every rule of the generated rule files, recording and alerting, as "
           "`gpudash rules` renders them for dcgm-exporter's names; each expression run as an instant query at "
           f"the end of the data, one warm-up then the median of {repeat} runs of Prometheus's own evaluation "
           "time (the `stats` timings of its answer, `evalTotalTime`; the HTTP round trip and the JSON encoding "
           "of the answer, which a rule evaluation does not pay, left out): what Prometheus pays at every "
           f"evaluation of the rule's group (every {interval} s, or the group's own interval). History: {hours} "
           "at a 15 s scrape (the rules' longest window and offset), "
           "every signal the rules read, the recordings backfilled over it. 1-minute load average: "
           f"{loads} (the machine is shared: compare rules within one run)."
           + (f" *Before*: the rules committed at{then}, timed in the same run, taking turns with the rules now."
              if baseline else ""), ""]

    def column(g: int, pick: str) -> list[Cost]:
        return results[g][3] if pick == "before" else results[g][0]

    picks = ["now", "before"] if baseline else ["now"]
    heads = [f"{g:,} GPUs{'' if p == 'now' else ', before'} (ms)" for g in sizes for p in picks]
    near = {p: runs_out_near(column(largest, p), largest) for p in picks}
    rows = []
    for group in dict.fromkeys(c.rule.group for c in [*costs, *before]):
        cells = [_ms(sum(c.seconds for c in column(g, p) if c.rule.group == group))
                 if any(c.rule.group == group for c in column(g, p)) else "-" for g in sizes for p in picks]
        counts = " / ".join(str(sum(1 for c in column(largest, p) if c.rule.group == group)) for p in picks)
        every = " / ".join(dict.fromkeys(_every(c.rule.interval_s) for p in picks for c in column(largest, p)
                                         if c.rule.group == group))
        out_of = " / ".join(f"{near[p][group]:,}" if near[p].get(group) else "-" for p in picks)
        rows.append([group, counts, every, *cells, out_of])
    totals = {(g, p): sum(c.seconds for c in column(g, p)) for g in sizes for p in picks}
    rows.append(["**every rule**", " / ".join(str(len(column(largest, p))) for p in picks), "",
                 *[f"**{_ms(totals[g, p])}**" for g in sizes for p in picks],
                 " / ".join(f"**{min(v for v in near[p].values() if v):,}**" if any(near[p].values()) else "-"
                            for p in picks)])
    out += fleet_report.table(["group", "rules" + (" (now / before)" if baseline else ""), "every", *heads,
                               "GPUs at which it takes its whole interval" + (" (now / before)" if baseline else "")],
                              rows)
    total = totals[largest, "now"]
    trip = sum(c.round_trip for c in costs)
    share = core_share(costs)
    out += ["", f"At {largest:,} GPUs one evaluation of every rule takes {total:.2f} s"
                + (f" (before: {totals[largest, 'before']:.2f} s)" if baseline else "")
                + f". Each group at its own interval, the rules take {share * interval:.2f} s of every {interval} s: "
                f"{share:.1%} of one core" + (f" (before: {core_share(before):.1%})." if baseline else ".")
            + f" As API queries, with the HTTP round trip and the JSON answers, the same rules took {trip:.2f} s.",
            "",
            "Prometheus evaluates rule groups side by side, and the rules of one group one after another: a group "
            "whose evaluation takes longer than its interval misses evaluations, however many cores the server "
            "has. The last column scales each group's cost linearly with the fleet (each rule reads every GPU's "
            f"series) to the size at which it would take its whole interval: the first group to get there does "
            f"near {min(v for v in near['now'].values() if v):,} GPUs"
            + (f" (before: {min(v for v in near['before'].values() if v):,})." if baseline else ".")
            + " Past that size, a larger rule interval or a Prometheus per cluster keeps it in step.", "",
            *_floor_lines(floor, largest, alert_signals([c.rule for c in costs])),
            f"Every rule, dearest first at {largest:,} GPUs:", ""]
    by_rule = {(g, p): {c.rule.name: c for c in column(g, p)} for g in sizes for p in picks}
    rows = [[c.rule.name, c.rule.group.removeprefix("gpudash-gpu-"),
             *[_ms(by_rule[g, p][c.rule.name].seconds) if c.rule.name in by_rule[g, p] else "-"
               for g in sizes for p in picks], f"{c.series:,}"] for c in sorted(costs, key=lambda c: -c.seconds)]
    rows += [[c.rule.name + " (before only)", c.rule.group.removeprefix("gpudash-gpu-"),
              *[_ms(by_rule[g, p][c.rule.name].seconds) if c.rule.name in by_rule[g, p] else "-"
                for g in sizes for p in picks], f"{c.series:,}"]
             for c in before if c.rule.name not in by_rule[largest, "now"]]
    out += fleet_report.table(["rule", "group", *heads, f"series at {largest:,}"], rows)
    further = saved.get("further") or []
    if further:
        out += ["", f"{len(further)} expressions read further back than {DENSE_CAP_S // 3600} h: over the sparse "  # type: ignore[arg-type]
                "series they read, which this fleet does not publish, so their cost here is a lower bound."]
    return [*out, ""]


def _floor_lines(floor: Sequence[Cost], gpus: int, alerts_read: set[str]) -> list[str]:
    if not floor:
        return []
    total = sum(c.seconds for c in floor)
    mine = [c for c in floor if c.rule.name in alerts_read]
    return [f"The floor: one instant read (`count(...)`) of each of the {len(floor)} signals the rules read took "
            f"{total:.2f} s at {gpus:,} GPUs in the same run ({total / len(floor) * 1000:.0f} ms each on average): "
            "a rule set that reads each of them once per evaluation pays at least that. Of these, the "
            f"{len(mine)} signals the alerting rules read, directly or through the recordings they read, took "
            f"{sum(c.seconds for c in mine):.2f} s: the alerts alone, with no dashboard aggregate, cost at least "
            "that.", ""]


def print_costs(gpus: int, measured: Measured, top: int = 10) -> None:
    costs, _, load, before, floor = measured
    total = sum(c.seconds for c in costs)
    then = f", before {sum(c.seconds for c in before) * 1000:.0f} ms" if before else ""
    print(f"  {gpus:>5} GPUs: {len(costs)} rules, one evaluation {total * 1000:.0f} ms{then}, "
          f"{core_share(costs):.1%} of a core at the groups' intervals, "
          f"round trips {sum(c.round_trip for c in costs) * 1000:.0f} ms "
          f"(load {load[0]:.2f} -> {load[1]:.2f})")
    near = runs_out_near(costs, gpus)
    for group in dict.fromkeys(c.rule.group for c in costs):
        print(f"    {group}: {sum(c.seconds for c in costs if c.rule.group == group) * 1000:.0f} ms, takes its whole "
              f"interval near {near[group]:,} GPUs")
    if floor:
        print(f"    floor: one read of each of {len(floor)} signals {sum(c.seconds for c in floor) * 1000:.0f} ms")
    for c in sorted(costs, key=lambda c: -c.seconds)[:top]:
        print(f"    {c.seconds * 1000:8.1f} ms  {c.series:>6} series  {c.rule.name}")
