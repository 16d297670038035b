"""The generated inhibitions as Alertmanager applies them (the backtest's estimate of it): a drained node holds
back its InfiniBand port alerts, which carry node_exporter's instance, through the `host` both alerts carry; a
node whose GPU exporter is down does not (node_exporter is another target)."""

from __future__ import annotations

import yaml

from gpudash.backtest.engine import Incident
from gpudash.backtest.notify import parse_inhibitions, uninhibited
from gpudash.config.loading import Settings
from gpudash.repository import ALERTMANAGER_FILE
from gpudash.rules.generated_files import render_all


def _alert(name: str, severity: str, **labels: str) -> Incident:
    return Incident(name, severity, tuple(sorted({"alertname": name, "severity": severity, "cluster": "c1",
                                                  **labels}.items())), 0, 600)


def _held(settings: Settings, alerts: list[Incident]) -> dict[str, bool]:
    """Each alert by its alertname and instance: whether an inhibit rule held all of it back."""
    rules = parse_inhibitions(yaml.safe_load(render_all(settings)[ALERTMANAGER_FILE]))
    left = uninhibited(alerts, rules, 15)
    return {f"{a.alert} {a.label('instance')}": a.labels not in left for a in alerts}


def test_a_drained_node_holds_back_its_ports_an_exporter_down_node_does_not(settings: Settings) -> None:
    port = {"device": "mlx5_0", "port": "1", "action": "drain"}
    held = _held(settings, [
        _alert("GPUNodeDrained", "info", instance="gpu-a:9400", host="gpu-a", source="slurm"),
        # node_exporter scraped by IP: the recording named the GPU node's host
        _alert("GPUFabricPortFlapping", "critical", instance="10.0.0.1:9100", host="gpu-a", **port),
        _alert("GPUExporterDown", "critical", instance="gpu-b:9400"),
        _alert("GPUFabricPortDown", "critical", instance="gpu-b:9100", host="gpu-b", **port),
        _alert("GPUFabricPortDegraded", "critical", instance="gpu-c:9100", host="gpu-c", **port),
    ])
    assert held == {
        "GPUNodeDrained gpu-a:9400": False,
        "GPUFabricPortFlapping 10.0.0.1:9100": True,
        "GPUExporterDown gpu-b:9400": False,
        "GPUFabricPortDown gpu-b:9100": False,  # its GPU exporter is down, its port is a fault of its own
        "GPUFabricPortDegraded gpu-c:9100": False,
    }


def test_a_drained_node_without_host_holds_back_no_port(settings: Settings) -> None:
    """Alertmanager takes a label both alerts lack as equal: a source without `host` must hold back nothing."""
    port = {"device": "mlx5_0", "port": "1", "action": "drain"}
    held = _held(settings, [
        _alert("GPUNodeDrained", "info", instance="gpu-a:9400", source="site"),
        _alert("GPUFabricPortFlapping", "critical", instance="gpu-z:9100", **port),
    ])
    assert held == {"GPUNodeDrained gpu-a:9400": False, "GPUFabricPortFlapping gpu-z:9100": False}
