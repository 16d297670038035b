"""bench/fabricgen.py and bench/fabric_scale.py: the synthetic fabric's series, labels and faults, no servers."""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from pathlib import Path

import numpy as np
from support.paths import ROOT

from bench import fabric_scale
from bench import fabricgen as fb
from bench import fleetgen as fg
from bench.fleet_report import write_section
from gpudash import infiniband as ib
from gpudash.config.loading import load_settings
from gpudash.rules.alerts import alert_rules
from gpudash.rules.fabric_alerts import FABRIC_ALERTS

END = 1_800_000_000 // 7200 * 7200
SHAPE = fg.FleetShape(2 * fg.GPUS_PER_NODE)
TROUBLE = (fb.Trouble(1, 2, "ib-down", None, 10), fb.Trouble(0, 5, "ib-flap", 120.0, 20),
           fb.Trouble(0, 0, "fabric-failure", None, 10), fb.Trouble(9, 0, "ib-down", None, 10))
TIMELINE = fg.Timeline(END - 1800, END, (fg.Window(END - 1800, END),))
_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+) (\d+)$")


@functools.cache
def _series() -> dict[tuple[str, frozenset[tuple[str, str]]], list[tuple[int, float]]]:
    """The two nodes' OpenMetrics text, parsed: (name, labels) -> [(timestamp, value)]."""
    instants = TIMELINE.instants()
    traces = fb.port_traces(SHAPE, TIMELINE, TROUBLE)
    troubled = fb.troubled_ports(SHAPE, TROUBLE)
    ports = fb.formatted(traces, list(traces), slice(0, len(instants)), instants)
    out: dict[tuple[str, frozenset[tuple[str, str]]], list[tuple[int, float]]] = defaultdict(list)
    for node in range(SHAPE.nodes):
        stamps = [str(t) for t in (instants + fb.phase_s(node)).tolist()]
        status = [str(int(v)) for v in fb.fabric_status(SHAPE, TIMELINE, node, TROUBLE).tolist()]
        for text in fb.node_text(SHAPE, node, ports, troubled, stamps, status):
            for line in text.splitlines():
                match = _LINE.match(line)
                assert match, line
                labels = frozenset(tuple(pair.split("=", 1)) for pair in re.findall(r'(\w+="[^"]*")', match[2]))
                labels = frozenset((k, v.strip('"')) for k, v in labels)
                out[(match[1], labels)].append((int(match[4]), float(match[3])))
    return out


def _last(series: dict[tuple[str, frozenset[tuple[str, str]]], list[tuple[int, float]]], name: str,
          **wanted: str) -> float:
    found = [samples for (n, labels), samples in series.items() if n == name and set(wanted.items()) <= labels]
    assert len(found) == 1, (name, wanted, len(found))
    return found[0][-1][1]


def test_every_port_has_node_exporters_series_under_the_gpu_fleets_node_and_cluster() -> None:
    series = _series()
    for node in range(SHAPE.nodes):
        host = SHAPE.instance(node).rsplit(":", 1)[0]
        for port in range(fb.PORTS_PER_NODE):
            names = {n for (n, labels), _ in series.items()
                     if ("instance", f"{host}:9100") in labels and ("device", f"mlx5_{port}") in labels}
            assert names == set(fb.PORT_SERIES)
            for name in fb.PORT_SERIES:
                labels = next(lb for (n, lb) in series if n == name and ("device", f"mlx5_{port}") in lb
                              and ("instance", f"{host}:9100") in lb)
                assert dict(labels) == {"device": f"mlx5_{port}", "port": "1", "instance": f"{host}:9100",
                                        "job": fb.NODE_EXPORTER_JOB, "cluster": SHAPE.cluster(node)}
    assert len(series) == SHAPE.nodes * fb.PORTS_PER_NODE * fb.SERIES_PER_PORT


def test_each_gpu_maps_to_the_port_under_it_on_the_gpu_exporters_instance() -> None:
    series = _series()
    for node in range(SHAPE.nodes):
        for gpu in range(fb.PORTS_PER_NODE):
            labels = dict(next(lb for (n, lb) in series if n == ib.NIC_INFO and ("gpu", str(gpu)) in lb
                               and ("instance", SHAPE.instance(node)) in lb))
            assert (labels["device"], labels["port"], labels["UUID"], labels["cluster"]) == (
                f"mlx5_{gpu}", "1", SHAPE.uuid(node, gpu), SHAPE.cluster(node))


def test_every_series_is_scraped_every_15_s_and_counters_never_fall() -> None:
    for (name, _), samples in _series().items():
        stamps = [t for t, _ in samples]
        assert np.all(np.diff(stamps) == TIMELINE.scrape_s), name
        if name.endswith("_total"):
            assert np.all(np.diff([v for _, v in samples]) >= 0), name


def test_the_ports_in_trouble_show_it_and_the_others_do_not() -> None:
    series = _series()
    states = {(node, port): _last(series, ib.STATE, instance=f"{SHAPE.instance(node).rsplit(':', 1)[0]}:9100",
                                  device=f"mlx5_{port}") for node in range(SHAPE.nodes) for port in range(8)}
    assert {k for k, v in states.items() if v != ib.ACTIVE} == {(1, 2)}
    flaps = _last(series, ib.LINK_DOWNED, instance=f"{SHAPE.instance(0).rsplit(':', 1)[0]}:9100", device="mlx5_5")
    assert flaps >= 9  # every 2 min for 20 min
    status = {(node, gpu): _last(series, fb.FABRIC_STATUS, instance=SHAPE.instance(node), gpu=str(gpu))
              for node in range(SHAPE.nodes) for gpu in range(8)}
    assert {k for k, v in status.items() if v != 3} == {(0, gpu) for gpu in range(8)}


def test_every_fault_began_before_any_fabric_alerts_for_would_hold_it_back() -> None:
    """The alerts are backfilled without their `for:`: true of what shows at the end only if every fault that
    still lasts began longer ago than the longest `for:`."""
    settings = load_settings(ROOT / "thresholds.yaml")
    names = {spec.name for spec in FABRIC_ALERTS}
    longest = max(r.for_.seconds for r in alert_rules(settings) if r.alert in names and r.for_ is not None)
    lasting = [t for t in fb.TROUBLE if t.for_min is None]
    assert lasting and min(t.since_min for t in lasting) * 60 > longest
    assert all(t.node < fabric_scale.NODES and t.port < fb.PORTS_PER_NODE for t in fb.TROUBLE)
    recorded = fabric_scale.alerts_as_recordings(settings)
    assert {r["labels"]["alertname"] for r in recorded} == names
    assert all(r["record"] == "ALERTS" and r["labels"]["alertstate"] == "firing" for r in recorded)


def test_the_section_replaces_its_own_text_and_keeps_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "fleet-scale.md"
    path.write_text("# Title\n\nintro\n\n## Other\n\nkept\n")
    write_section(path, [fabric_scale.SECTION, "", "first"], fabric_scale.SECTION)
    write_section(path, [fabric_scale.SECTION, "", "second"], fabric_scale.SECTION)
    text = path.read_text()
    assert "kept" in text and "second" in text and "first" not in text
    assert text.count(fabric_scale.SECTION) == 1
