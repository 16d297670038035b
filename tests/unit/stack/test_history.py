"""A simulated node's past as OpenMetrics: the series the exporter serves, under the names it serves them."""

from __future__ import annotations

import re

from gpudash.exporter.sim.fleet import fleet_from_specs
from gpudash.stack.history import OpenMetricsHistory, moments, node_poller, simulated_openmetrics

TARGET = {"job": "gpu-exporter", "instance": "127.0.0.1:9400", "cluster": "demo", "rack": "rack-1"}
T0 = 1_796_000_000.0


def _samples(text: str) -> list[tuple[str, str, float, float]]:
    """(name, labels, value, time) of each sample line."""
    out = []
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        series, value, moment = line.rsplit(" ", 2)
        name, _, labels = series.partition("{")
        out.append((name, labels.rstrip("}"), float(value), float(moment)))
    return out


def test_the_history_holds_the_series_the_exporter_serves_under_their_own_names() -> None:
    times = moments(T0, 0, 30, 15.0)
    text = simulated_openmetrics(8, 7, times, TARGET, faults=("2=leak",))
    poller = node_poller(fleet_from_specs(8, 7, (), ("2=leak",), epoch=times[0] - 3600.0))
    poller.sweep("static", times[-1])
    poller.sweep("fast", times[-1])
    poller.sweep("slow", times[-1])
    served = {line.split("{")[0].split(" ")[0]
              for line in poller.exposition.body.decode().splitlines() if line and not line.startswith("#")}
    written = {name for name, _, _, _ in _samples(text)}
    # counters keep the names the exporter gives them (no `_total` added to DCGM's own counter names)
    assert "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION" in written and "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" in written
    assert written == served


def test_every_sample_carries_the_scrape_labels_and_its_moment() -> None:
    times = moments(T0, 0, 30, 15.0)
    samples = _samples(simulated_openmetrics(2, 7, times, TARGET))
    assert {moment for _, _, _, moment in samples} == set(times)
    for _, labels, _, _ in samples:
        for key, value in TARGET.items():
            assert f'{key}="{value}"' in labels
    util = [(labels, v) for name, labels, v, _ in samples if name == "DCGM_FI_DEV_GPU_UTIL"]
    assert len(util) == 2 * len(times) and all(re.search(r'gpu="[01]"', labels) for labels, _ in util)


def test_each_metric_is_written_together_and_in_time_order() -> None:
    history = OpenMetricsHistory()
    history.add_exposition('b{gpu="0",modelName="NVIDIA H200"} 1\na 2\n# HELP a x\n', {"job": "j"}, 10.0)
    history.add_exposition('a 3\nb{gpu="0",modelName="NVIDIA H200"} 4\n', {"job": "j"}, 20.0)
    assert len(history) == 4
    assert history.text().splitlines() == [
        'a{job="j"} 2.0 10.000',
        'a{job="j"} 3.0 20.000',
        'b{gpu="0",modelName="NVIDIA H200",job="j"} 1.0 10.000',
        'b{gpu="0",modelName="NVIDIA H200",job="j"} 4.0 20.000',
        "# EOF",
    ]
