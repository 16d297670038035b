"""The simulated node's fabric: one InfiniBand port per GPU, served under node_exporter's own names, and each
GPU's NVSwitch fabric state. A pure function of (seed, GPU, t, faults), like the rest of the fleet.

GPU i is served by ``mlx5_<i>`` port 1 (a ConnectX-7 under the GPU's PCIe switch, 400 Gb/s NDR); a training
GPU's port carries 35-45 % of its rate each way, an idle one's almost nothing, and a healthy port waits to
transmit in 2 % of its slots. Faults on GPU i (``IDX=KIND[:ARG][@START][+DURATION]``) hit its port:

- ``ib-down``: the port goes down (state 1, physical state polling) and comes back after DURATION; one
  link-downed event. A short one is a planned port reset.
- ``ib-flap[:PERIOD]``: down for 15 s of every PERIOD (default 120 s), a link-downed and a recovery each time.
- ``ib-congested[:RATIO]``: the port waits in RATIO (default 0.6) of its transmit slots; its throughput drops.
- ``ib-degraded[:SHARE]``: the port runs at SHARE (default 0.5) of its rated speed (200 Gb/s for NDR).
- ``ib-symbol-burst[:RATE]``: RATE (default 20) symbol errors a second, a link-integrity error per 100 and a
  receive error per 10.
- ``fabric-failure``: the GPU's NVSwitch fabric registration completed with an error (status 4) until DURATION.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

from gpudash.escape import label_value
from gpudash.exporter.nic_affinity import GpuNic, NicPort, PciPlace
from gpudash.exporter.sim.noise import uniform
from gpudash.exporter.sim.spec import Fault
from gpudash.exporter.source import GpuIdentity
from gpudash.infiniband import (
    ACTIVE,
    DOWN,
    LINK_DOWNED,
    LINK_ERROR_RECOVERY,
    LINK_INTEGRITY_ERRORS,
    LINK_UP,
    PHYSICAL_STATE,
    POLLING,
    RATE,
    RECEIVE_ERRORS,
    RECEIVED_BYTES,
    SERIES,
    STATE,
    SYMBOL_ERRORS,
    TRANSMIT_DISCARDS,
    TRANSMIT_WAIT,
    TRANSMITTED_BYTES,
)

NDR_BYTES_PER_SECOND = 400e9 / 8
FLAP_DOWN_SECONDS = 15.0
HEALTHY_WAIT = 0.02  # share of transmit slots a healthy port waits
FABRIC_SUCCESS, FABRIC_FAILURE = 3.0, 4.0  # dcgmFabricManagerStatus_t
FABRIC_CLIQUE = 32766.0
_CH_IB = 13  # a noise channel of its own (faults_health.py uses 11 and 12)
_DEFAULTS = {"ib-flap": 120.0, "ib-congested": 0.6, "ib-degraded": 0.5, "ib-symbol-burst": 20.0}


def port_of(gpu: GpuIdentity) -> GpuNic:
    """The simulated port under GPU ``gpu``'s PCIe switch."""
    domain, bus, rest = gpu.pci_bus_id.lower().split(":")
    nic = f"{int(domain, 16):04x}:{(int(bus, 16) + 1) % 0x100:02x}:{rest}"
    place = PciPlace(f"pci{int(domain, 16):04x}:00", (nic,))
    return GpuNic(gpu, NicPort(f"mlx5_{gpu.index}", "1", nic, "InfiniBand", place), "PIX")


def gpu_fabric(faults: Sequence[Fault], t: float) -> dict[str, float]:
    """fabric_status and fabric_clique of one GPU at t."""
    failed = any(f.kind == "fabric-failure" and f.active(t) for f in faults)
    return {"fabric_status": FABRIC_FAILURE if failed else FABRIC_SUCCESS, "fabric_clique": FABRIC_CLIQUE}


def _arg(f: Fault) -> float:
    return f.arg if f.arg is not None else _DEFAULTS[f.kind]


def _overlap(f: Fault, t: float) -> float:
    """Seconds of fault ``f`` up to t."""
    return max(0.0, min(t, f.end) - f.start)


def _flaps(f: Fault, t: float) -> tuple[int, float]:
    """(flaps begun, seconds down) of a flapping port up to t."""
    span = _overlap(f, t)
    period = max(_arg(f), 2 * FLAP_DOWN_SECONDS)
    whole, part = divmod(span, period)
    return int(whole) + (part > 0), whole * FLAP_DOWN_SECONDS + min(part, FLAP_DOWN_SECONDS)


def _down_now(f: Fault, t: float) -> bool:
    if not f.active(t):
        return False
    return f.kind == "ib-down" or (f.kind == "ib-flap" and (t - f.start) % max(_arg(f), 2 * FLAP_DOWN_SECONDS)
                                   < FLAP_DOWN_SECONDS)


def port_values(seed: int, i: int, t: float, faults: Sequence[Fault], busy: bool) -> dict[str, float]:
    """GPU i's port at t: each node_exporter series name -> value."""
    t = max(0.0, t)
    downs, down_seconds = 0, 0.0
    for f in faults:
        if f.kind == "ib-down" and f.start <= t:
            downs, down_seconds = downs + 1, down_seconds + _overlap(f, t)
        elif f.kind == "ib-flap":
            n, seconds = _flaps(f, t)
            downs, down_seconds = downs + n, down_seconds + seconds
    up = max(0.0, t - down_seconds)
    rate = NDR_BYTES_PER_SECOND
    for f in faults:
        if f.kind == "ib-degraded" and f.active(t):
            rate *= _arg(f)
    share = (0.35 + 0.1 * uniform(seed, i, _CH_IB)) if busy else 0.001
    rx_bytes = share * NDR_BYTES_PER_SECOND * up
    tx_bytes, wait = rx_bytes, HEALTHY_WAIT / (1 - HEALTHY_WAIT) * rx_bytes / 4
    discards = 0.0
    for f in faults:
        if f.kind == "ib-congested":
            ratio, seconds = min(_arg(f), 0.95), _overlap(f, t)
            full = share * NDR_BYTES_PER_SECOND / 4 * seconds  # words a healthy port would have sent
            words = full * (1 - ratio)  # what it still sends
            tx_bytes -= (full - words) * 4
            wait += ratio / (1 - ratio) * words - HEALTHY_WAIT / (1 - HEALTHY_WAIT) * full
            discards += 0.5 * seconds
    symbols = sum(_arg(f) * _overlap(f, t) for f in faults if f.kind == "ib-symbol-burst")
    down = any(_down_now(f, t) for f in faults)
    return {
        RECEIVED_BYTES: math.floor(rx_bytes), TRANSMITTED_BYTES: math.floor(tx_bytes), TRANSMIT_WAIT: math.floor(wait),
        LINK_DOWNED: float(downs), LINK_ERROR_RECOVERY: float(downs), SYMBOL_ERRORS: math.floor(symbols),
        LINK_INTEGRITY_ERRORS: math.floor(symbols / 100), RECEIVE_ERRORS: math.floor(symbols / 10),
        TRANSMIT_DISCARDS: math.floor(discards), RATE: rate,
        STATE: float(DOWN if down else ACTIVE), PHYSICAL_STATE: float(POLLING if down else LINK_UP),
    }


def exposition(ports: Sequence[tuple[GpuNic, dict[str, float]]]) -> Iterator[str]:
    """node_exporter's infiniband families for these ports, in its text format."""
    for name, kind, help_ in SERIES:
        yield f"# HELP {name} {help_}\n# TYPE {name} {kind}\n"
        for pair, values in ports:
            labels = f'device="{label_value(pair.nic.device)}",port="{label_value(pair.nic.port)}"'
            value = values[name]
            yield f"{name}{{{labels}}} {int(value) if float(value).is_integer() else value}\n"
