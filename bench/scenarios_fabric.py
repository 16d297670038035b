"""The corpus's fabric scenarios (bench/alert_corpus.py appends them to its SCENARIOS): InfiniBand ports that
flap, run at half speed or congest under a straggler, a failed NVSwitch fabric, and what must stay quiet (a
traffic burst, one symbol error, a planned port reset).

The faults are the simulator's (gpudash.exporter.sim.fabric); GPU i is served by port mlx5_<i>/1, so a fault on
GPU i is a fault on its port. The port alerts name a port, not a GPU: they count on the faulted GPU's node, and
only there (alerts are keyed by node and GPU: a peer's GPU 5 is not the faulted GPU 5).
"""

from __future__ import annotations

from bench.corpus_scenario import GPUS, HOST, Scenario

PEER = "gpu-node-02"
JOB16 = f"48213={HOST}:0-7,{PEER}:0-7"

FABRIC_SCENARIOS: tuple[Scenario, ...] = (
    Scenario("ib-flapping", "fault",
             "training; GPU 3's InfiniBand port goes down for 15 s every 2 min from 1h10m for 30 min",
             hours=3.0, faults=("3=ib-flap:120@1h10m+30m",), fault_gpu=3, expected=("GPUFabricPortFlapping",)),
    Scenario("ib-congested-straggler", "fault",
             f"job 48213 on 16 GPUs ({HOST} and {PEER}); from 1h10m for 1 hour GPU 5 of {HOST} runs 30 % "
             "slower and its port waits in 60 % of its transmit slots; the other 15 wait on it",
             hours=3.0, jobs=(JOB16,), peers=(PEER,),
             faults=(f"{HOST}/5=ib-congested:0.6@1h10m+1h", f"{HOST}/5=straggler:30@1h10m+1h"), fault_gpu=5,
             fault_host=HOST,
             expected=("GPUFabricStragglerCongestion",)),
    Scenario("ib-half-speed", "fault",
             "training; GPU 2's port retrains at half its 400 Gb/s at 1h10m and stays there for 1 hour",
             hours=3.0, faults=("2=ib-degraded:0.5@1h10m+1h",), fault_gpu=2, expected=("GPUFabricPortDegraded",)),
    Scenario("fabric-manager-failure", "fault",
             "training; the node's NVSwitch fabric fails at 1h10m (every GPU's fabric state 4) for 1 hour "
             "(dcgm-exporter's default counters do not publish the field)",
             hours=3.0, faults=tuple(f"{i}=fabric-failure@1h10m+1h" for i in range(GPUS)),
             expected=("GPUFabricState",)),
    Scenario("ib-traffic-burst", "benign",
             "job 48213 on all 8 GPUs; at 1h10m for 4 min an all-to-all burst: every port waits in 50 % of its "
             "transmit slots, together (no straggler)",
             hours=3.0, jobs=(f"48213={HOST}:0-7",),
             faults=tuple(f"{i}=ib-congested:0.5@1h10m+4m" for i in range(GPUS))),
    Scenario("ib-rare-symbol-error", "benign",
             "training; GPU 6's port counts one symbol error at 1h10m (the link corrected it)",
             hours=3.0, faults=("6=ib-symbol-burst:1@1h10m+1s",)),
    Scenario("ib-planned-reset", "benign",
             "training; GPU 4's port is reset at 1h10m: down for 2 min, then active again",
             hours=3.0, faults=("4=ib-down@1h10m+2m",)),
)
