"""gpudash backtest and tune against a real Prometheus holding backfilled history of known scenarios.

Exactness: on the same input series, the backtest engine's firing evaluations equal promtool's rule unit
test evaluation, alert by alert (bench/backtest_quality.py holds the comparison; here a subset of the corpus,
chosen so that for:, inlined recording rules read over a range and at an offset, and a target going down are
all exercised). Then the commands themselves: --compare on two files with a known difference, tune on a
synthetic fleet that runs above the default warning, and the one-line errors.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.paths import ROOT

from bench import alert_corpus as corpus
from bench import backtest_quality as bq
from gpudash.backtest.cli import backtest_command, tune_command
from gpudash.backtest.engine import replay
from gpudash.backtest.rule_set import AlertSpec
from gpudash.backtest.yamledit import set_value
from gpudash.check.prometheus_api import PrometheusClient
from gpudash.config.loading import load_settings
from gpudash.errors import ConfigError
from gpudash.stack.history import SeededPrometheus

pytestmark = pytest.mark.e2e

EXACT = ("memory-leak-oom", "thermal-throttling", "stalled-job", "exporter-down")
HOURS = 2.0  # each scenario cut short (its faults begin by 1h10m), so promtool's reference stays quick


def scenarios() -> list[corpus.Scenario]:
    return [replace(corpus.BY_NAME[n], hours=HOURS) for n in EXACT]


# Left out: the GPUs' own max operating temperatures. The comparison below moves the fixed Celsius levels, which
# judge only a GPU that publishes no limits of its own.
OWN_LIMITS = ("DCGM_FI_DEV_GPU_MAX_OP_TEMP{", "DCGM_FI_DEV_MEM_MAX_OP_TEMP{")


@functools.cache
def series(name: str) -> dict[str, list[float | None]]:
    every = bq.scenario_series(replace(corpus.BY_NAME[name], hours=HOURS), "bundled")
    return {k: v for k, v in every.items() if not k.startswith(OWN_LIMITS)}


@pytest.fixture(scope="module")
def corpus_history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SeededPrometheus, int]]:
    work = tmp_path_factory.mktemp("backtest-corpus")
    merged = {k: v for name in EXACT for k, v in series(name).items()}
    base = (int(time.time()) - 2 * 86400) // 7200 * 7200
    with bq.backfilled(bq.openmetrics(merged, base), work) as prometheus:
        yield prometheus, base


def test_backtest_equals_promtool_alert_by_alert(corpus_history: tuple[SeededPrometheus, int],
                                                 tmp_path: Path) -> None:
    prometheus, base = corpus_history
    settings = load_settings(ROOT / "thresholds.yaml")
    cut = scenarios()
    ours = bq.backtest_firing(prometheus.url, settings, cut, base)

    def reference(scenario: corpus.Scenario) -> bq.Firing:
        return bq.reference_firing(scenario, series(scenario.name), settings,
                                   tmp_path / scenario.name)

    with ThreadPoolExecutor(max_workers=len(cut)) as pool:
        references = list(pool.map(reference, cut))
    for scenario, reference in zip(cut, references, strict=True):
        assert reference, f"{scenario.name}: the reference fired nothing; the comparison would prove nothing"
        comparison = bq.Comparison(scenario, reference, ours[scenario.name])
        assert comparison.equal, f"{scenario.name}: {comparison.differences()}"


def _thresholds_with(tmp_path: Path, name: str, warning: str, critical: str) -> Path:
    path = tmp_path / name
    text = (ROOT / "thresholds.yaml").read_text(encoding="utf-8")
    for sensor in ("gpu", "hbm"):
        text = set_value(text, ("temperature", f"{sensor}_warning_celsius"), warning)
        text = set_value(text, ("temperature", f"{sensor}_critical_celsius"), critical)
    path.write_text(text, encoding="utf-8")
    return path


def _span(base: int, scenario: str) -> list[str]:
    end = base + int(HOURS * 3600)
    return ["--start", str(base), "--end", str(end)]


def test_compare_shows_a_known_difference(corpus_history: tuple[SeededPrometheus, int], tmp_path: Path) -> None:
    prometheus, base = corpus_history
    hot = _thresholds_with(tmp_path, "raised.yaml", "97", "99")  # the hot GPU peaks at 92 C, its HBM at 96 C
    args = ["--prometheus", prometheus.url, *_span(base, "thermal-throttling"), "--recording-rules", "inline",
            "--thresholds", str(ROOT / "thresholds.yaml")]
    result = CliRunner().invoke(backtest_command, [*args, "--compare", str(hot), "--json"])
    assert result.exit_code == 0, result.output
    both = json.loads(result.stdout)

    def incidents(side: str, alert: str, severity: str) -> int:
        return next(a["incidents"] for a in both[side]["alerts"] if (a["alert"], a["severity"]) == (alert, severity))

    assert incidents("old", "GPUHighTemperature", "warning") >= 1
    assert incidents("new", "GPUHighTemperature", "warning") == 0, both["new"]["alerts"][:2]
    assert incidents("old", "GPUThermalThrottling", "warning") == incidents("new", "GPUThermalThrottling", "warning")
    table = CliRunner().invoke(backtest_command, [*args, "--compare", str(hot)])
    assert table.exit_code == 0, table.output
    assert "| GPUHighTemperature | warning |" in table.stdout and " -> 0 |" in table.stdout


def test_backtest_table_and_notifications(corpus_history: tuple[SeededPrometheus, int]) -> None:
    prometheus, base = corpus_history
    result = CliRunner().invoke(backtest_command, ["--prometheus", prometheus.url, *_span(base, "thermal-throttling"),
                                                   "--thresholds", str(ROOT / "thresholds.yaml"), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    hot = next(a for a in summary["alerts"] if (a["alert"], a["severity"]) == ("GPUHighTemperature", "critical"))
    assert hot["incidents"] >= 1 and hot["notifications"] >= 2  # the page, then its resolution
    assert hot["top_gpus"][0]["gpu"] == "thermal-throttling-node:9400 gpu 5"
    assert summary["notifications_by_receiver"]["gpudash-critical"] >= 2


def test_history_shorter_than_asked_says_how_much(corpus_history: tuple[SeededPrometheus, int]) -> None:
    prometheus, base = corpus_history
    result = CliRunner().invoke(backtest_command, ["--prometheus", prometheus.url, "--start", str(base - 86400),
                                                   "--end", str(base + 3600),
                                                   "--thresholds", str(ROOT / "thresholds.yaml")])
    assert result.exit_code == 2
    assert "holds 1h of history" in result.stderr and "asked" in result.stderr


def test_unreachable_prometheus_is_one_line() -> None:
    result = CliRunner().invoke(backtest_command, ["--prometheus", "http://127.0.0.1:1",
                                                   "--thresholds", str(ROOT / "thresholds.yaml")])
    assert result.exit_code == 4
    assert result.stderr.strip().splitlines() == ["gpudash: cannot reach Prometheus at http://127.0.0.1:1: "
                                                  "connection refused"]


def _hot_fleet(end: int, hours: int = 3) -> str:
    """4 busy H200s at 83-85 C for `hours` up to `end`: a fleet that runs above the default 80 C warning."""
    lines: dict[str, list[str]] = {}
    first = end - hours * 3600
    for i, t in enumerate(range(first, end + 1, 15)):
        for gpu in range(4):
            labels = f'cluster="hot",instance="hot-node:9400",gpu="{gpu}",modelName="NVIDIA H200"'
            temp = 83 + (i + gpu) % 3
            for name, value in (("DCGM_FI_DEV_GPU_TEMP", temp), ("DCGM_FI_DEV_GPU_UTIL", 95),
                                ("DCGM_FI_DEV_FB_USED", 60000), ("DCGM_FI_DEV_FB_FREE", 80000)):
                lines.setdefault(name, []).append(f"{name}{{{labels}}} {value} {t}")
    return "\n".join([*(line for name in sorted(lines) for line in lines[name]), "# EOF"]) + "\n"


def test_tune_proposes_a_warning_above_a_hot_fleet(tmp_path: Path) -> None:
    end = (int(time.time()) - 600) // 15 * 15
    with bq.backfilled(_hot_fleet(end), tmp_path) as prometheus:
        thresholds = tmp_path / "thresholds.yaml"
        original = (ROOT / "thresholds.yaml").read_text(encoding="utf-8")
        thresholds.write_text(original, encoding="utf-8")
        args = ["--prometheus", prometheus.url, "--thresholds", str(thresholds)]
        too_long = CliRunner().invoke(tune_command, [*args, "--since", "14d"])
        assert too_long.exit_code == 2 and "of history" in too_long.stderr
        shown = CliRunner().invoke(tune_command, [*args, "--since", "2h"])
        assert shown.exit_code == 0, shown.output
        assert "temperature.gpu_warning_celsius: 80 -> 88" in shown.stdout  # p99 85 C + 3 C margin
        assert "NVIDIA H200" in shown.stdout
        assert thresholds.read_text(encoding="utf-8") == original  # nothing written without --write
        written = CliRunner().invoke(tune_command, [*args, "--since", "2h", "--write"])
        assert written.exit_code == 0, written.output
    new = thresholds.read_text(encoding="utf-8").splitlines()
    old = original.splitlines()
    changed = [(a, b) for a, b in zip(old, new, strict=True) if a != b]
    assert [b.split("#")[0].split() for _, b in changed] == [["gpu_warning_celsius:", "88"],
                                                              ["gpu_critical_celsius:", "93"]]
    assert all(a.split("#")[1] == b.split("#")[1] for a, b in changed)  # comments kept
    loaded = load_settings(thresholds).thresholds.temperature.gpu
    assert (loaded.warning, loaded.critical) == (88, 93)


def test_a_rule_that_does_not_parse_is_one_line(corpus_history: tuple[SeededPrometheus, int]) -> None:
    prometheus, base = corpus_history
    bad = AlertSpec("GPUBroken", "max by (gpu) (rate(DCGM_FI_DEV_GPU_TEMP[5m])", labels={"severity": "warning"})
    with pytest.raises(ConfigError, match=r"^alert rule GPUBroken \(warning\) does not parse: .*parse error"):
        replay(PrometheusClient(prometheus.url), [bad], base, base + 3600, corpus.STEP)
