"""A synthetic InfiniBand fabric beside the synthetic GPU fleet (bench/fleetgen.py), as OpenMetrics text.

Every node of a `fleetgen.FleetShape` has `PORTS_PER_NODE` ports, mlx5_0..mlx5_7 port 1 (ConnectX-7, NDR), one under
each GPU. node_exporter serves them from the node's address at :9100 under the GPU fleet's `cluster`: per port, the
series in `PORT_SERIES` (what the fabric's recording rules and alerts read). Per GPU, the bundled exporter (:9400,
the GPU fleet's `instance`) serves `gpudash_gpu_nic_info` (GPU g -> mlx5_g port 1), the fabric manager status and
the GPU's utilization, which the fabric dashboard's `cluster` variable lists the clusters from.

Values come from gpudash's simulated port (`gpudash.exporter.sim.fabric.port_values`): a port carries 35-45 % of
NDR each way while its GPU runs a job (`FleetShape.job`), almost nothing on a free GPU, and waits in 2 % of its
transmit slots. A healthy port repeats one of `TEMPLATE_NODES` x 8 simulated ports (busy or idle), as fleet nodes
repeat the GPU pool; the ports of `TROUBLE` carry faults of their own (down, flapping, congested, at half speed,
counting symbol errors, a planned reset) and one node's GPUs a failed NVSwitch fabric.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from bench import fleetgen as fg
from gpudash import infiniband as ib
from gpudash.catalog import DCGM
from gpudash.exporter.sim.fabric import gpu_fabric, port_values
from gpudash.exporter.sim.spec import Fault

PORTS_PER_NODE = fg.GPUS_PER_NODE
NODE_EXPORTER_PORT = 9100
NODE_EXPORTER_JOB = "node-exporter"
TEMPLATE_NODES = 32
HISTORY_S = 12 * fg.HOUR  # the counters count from this long before the data starts
PORT_SERIES = (ib.RECEIVED_BYTES, ib.TRANSMITTED_BYTES, ib.TRANSMIT_WAIT, ib.LINK_DOWNED, ib.SYMBOL_ERRORS,
               ib.LINK_INTEGRITY_ERRORS, ib.RECEIVE_ERRORS, ib.RATE, ib.STATE, ib.PHYSICAL_STATE)
FABRIC_STATUS = DCGM.ref("fabric_status").name
GPU_UTIL = DCGM.ref("gpu_util").name
BUSY_UTIL, IDLE_UTIL = 95, 0
SERIES_PER_PORT = len(PORT_SERIES) + 3  # and the GPU's port map, fabric status and utilization


@dataclass(frozen=True)
class Trouble:
    """A fault on one port (or, for fabric-failure, on every GPU of the node), in minutes before the data's end."""

    node: int
    port: int
    kind: str  # a fault of gpudash.exporter.sim.fabric: ib-down, ib-flap, ib-congested, ib-degraded, ...
    arg: float | None
    since_min: int
    for_min: int | None = None  # None: still on at the end

    def fault(self, epoch: int, end: int) -> Fault:
        duration = None if self.for_min is None else self.for_min * 60.0
        return Fault(self.kind, float(end - self.since_min * 60 - epoch), duration, self.arg)


TROUBLE: tuple[Trouble, ...] = (
    Trouble(17, 3, "ib-down", None, 40),
    Trouble(600, 0, "ib-down", None, 25),
    Trouble(64, 4, "ib-down", None, 200, 2),  # a planned port reset, long over: no alert
    Trouble(88, 5, "ib-flap", 120.0, 30),
    Trouble(901, 2, "ib-flap", 180.0, 20),
    Trouble(250, 1, "ib-congested", 0.6, 60),
    Trouble(251, 1, "ib-congested", 0.45, 60),
    Trouble(700, 6, "ib-congested", 0.35, 90),
    Trouble(333, 4, "ib-degraded", 0.5, 120),
    Trouble(1000, 7, "ib-degraded", 0.5, 45),
    Trouble(140, 2, "ib-symbol-burst", 20.0, 60),
    Trouble(512, 5, "ib-symbol-burst", 2.0, 180),
    Trouble(777, 0, "ib-symbol-burst", 0.5, 240),
    Trouble(300, 3, "ib-symbol-burst", 0.05, 300),  # 180 an hour: under the alert's level, still in the lists
    Trouble(420, 0, "fabric-failure", None, 50),
)


def troubles_in(shape: fg.FleetShape, troubles: Sequence[Trouble] = TROUBLE) -> tuple[Trouble, ...]:
    return tuple(t for t in troubles if t.node < shape.nodes)


def host(shape: fg.FleetShape, node: int) -> str:
    return shape.instance(node).rsplit(":", 1)[0]


def port_labels(shape: fg.FleetShape, node: int, port: int) -> str:
    return (f'device="mlx5_{port}",port="1",instance="{host(shape, node)}:{NODE_EXPORTER_PORT}",'
            f'job="{NODE_EXPORTER_JOB}",cluster="{shape.cluster(node)}"')


def nic_info_labels(shape: fg.FleetShape, node: int, gpu: int) -> str:
    bus = fg.BUS_IDS[gpu]
    return (f'gpu="{gpu}",UUID="{shape.uuid(node, gpu)}",pci_bus_id="00000000:{bus}:00.0",device="mlx5_{gpu}",'
            f'port="1",nic_pci_bus_id="0000:{(int(bus, 16) + 1) % 0x100:02x}:00.0",link_layer="InfiniBand",'
            f'pcie="PIX",hostname="{shape.hostname(node)}",{fg.gpu_target(shape, node)}')


# A port's values come from a template: (pool node, port, busy) for a healthy one, (-1 - node, port, busy) for one
# with faults of its own.
Template = tuple[int, int, bool]


def busy(shape: fg.FleetShape, node: int, port: int) -> bool:
    return shape.job(node, port) != ""


def template_of(shape: fg.FleetShape, node: int, port: int, troubled: frozenset[tuple[int, int]]) -> Template:
    own = (node, port) in troubled
    return (-1 - node if own else node % TEMPLATE_NODES, port, busy(shape, node, port))


def phase_s(node: int, scrape_s: int = 15) -> int:
    """The node's scrape offset within the interval (node_exporter and the GPU exporter scraped together)."""
    return (node % TEMPLATE_NODES * 7) % scrape_s


def port_traces(shape: fg.FleetShape, timeline: fg.Timeline, troubles: Sequence[Trouble] = TROUBLE
                ) -> dict[Template, dict[str, np.ndarray]]:
    """Every template's series over the timeline's instants: name -> values."""
    epoch = timeline.start - HISTORY_S
    mine = troubles_in(shape, troubles)
    faults: dict[tuple[int, int], list[Fault]] = {}
    for t in mine:
        if t.kind != "fabric-failure":
            faults.setdefault((t.node, t.port), []).append(t.fault(epoch, timeline.end))
    troubled = troubled_ports(shape, troubles)
    instants = timeline.instants()
    out: dict[Template, dict[str, np.ndarray]] = {}
    for node in range(shape.nodes):
        for port in range(PORTS_PER_NODE):
            key = template_of(shape, node, port, troubled)
            if key in out:
                continue
            seed, own = node % TEMPLATE_NODES, faults.get((node, port), [])
            rows = [port_values(seed, port, float(when + phase_s(node) - epoch), own, key[2])
                    for when in instants.tolist()]
            out[key] = {name: np.array([r[name] for r in rows], dtype=np.float64) for name in PORT_SERIES}
    return out


def fabric_status(shape: fg.FleetShape, timeline: fg.Timeline, node: int,
                  troubles: Sequence[Trouble] = TROUBLE) -> np.ndarray:
    """The node's GPUs' fabric manager status over the timeline (every GPU of a node alike)."""
    epoch = timeline.start - HISTORY_S
    faults = [t.fault(epoch, timeline.end) for t in troubles_in(shape, troubles)
              if t.kind == "fabric-failure" and t.node == node]
    return np.array([gpu_fabric(faults, float(when + phase_s(node) - epoch))["fabric_status"]
                     for when in timeline.instants().tolist()])


def formatted(traces: Mapping[Template, Mapping[str, np.ndarray]], keys: Sequence[Template], sl: slice,
              instants: np.ndarray) -> dict[Template, dict[str, list[str]]]:
    """The templates' samples over the instants `sl` selects, as 'value timestamp' strings (the node's phase in)."""
    out = {}
    for key in keys:
        stamps = [str(t) for t in (instants[sl] + phase_s(key[0] if key[0] >= 0 else -1 - key[0])).tolist()]
        out[key] = {name: fg._samples(fg._texts(values[sl]), stamps) for name, values in traces[key].items()}
    return out


def node_text(shape: fg.FleetShape, node: int, ports: Mapping[Template, Mapping[str, list[str]]],
              troubled: frozenset[tuple[int, int]], stamps: Sequence[str], status: Sequence[str]) -> Iterator[str]:
    """The OpenMetrics lines of one node's fabric (`stamps`: its instants, `status`: its GPUs' fabric status as
    text at each), one string per series."""

    def series(name: str, labels: str, samples: Sequence[str]) -> str:
        prefix = f"{name}{{{labels}}} "
        return prefix + ("\n" + prefix).join(samples) + "\n"

    for port in range(PORTS_PER_NODE):
        labels = port_labels(shape, node, port)
        for name, samples in ports[template_of(shape, node, port, troubled)].items():
            yield series(name, labels, samples)
    target = fg.gpu_target(shape, node)
    for gpu in range(PORTS_PER_NODE):
        identity = f"{fg.gpu_identity(shape, node, gpu)},{target}"
        util = BUSY_UTIL if busy(shape, node, gpu) else IDLE_UTIL
        yield series(ib.NIC_INFO, nic_info_labels(shape, node, gpu), [f"1 {t}" for t in stamps])
        yield series(FABRIC_STATUS, identity, [f"{v} {t}" for v, t in zip(status, stamps, strict=True)])
        yield series(GPU_UTIL, identity, [f"{util} {t}" for t in stamps])


def troubled_ports(shape: fg.FleetShape, troubles: Sequence[Trouble] = TROUBLE) -> frozenset[tuple[int, int]]:
    return frozenset((t.node, t.port) for t in troubles_in(shape, troubles) if t.kind != "fabric-failure")
