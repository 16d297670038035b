"""The corpus's hang scenarios (bench/alert_corpus.py appends them to its SCENARIOS): a hung collective, with
and without profiling fields, and the long checkpoint that must not look like one.

A hung collective (the `hang` fault of gpudash.exporter.sim) keeps every GPU of the job at ~100 % utilization
(spin kernels) with tensor and DRAM activity and power near idle; GPUJobHung must name the job, from the
profiling fields where published and from power alone where not (dcgm-exporter's counters carry no power
limit: the watts level judges it there).
"""

from __future__ import annotations

from bench.corpus_scenario import GPUS, HOST, Scenario

JOB = f"48213={HOST}:0-7"
HANG = tuple(f"{i}=hang@1h10m" for i in range(GPUS))

SCENARIOS: tuple[Scenario, ...] = (
    Scenario("hung-collective", "fault",
             "job 48213 on all 8 GPUs hangs in a collective at 1h10m: ~100 % utilization, tensor and DRAM idle, "
             "power near idle", hours=3.0, jobs=(JOB,), faults=HANG, expected=("GPUJobHung",)),
    Scenario("hung-collective-no-prof", "fault",
             "the hung-collective scenario without SM, tensor or DRAM activity series: utilization and power alone",
             hours=3.0, jobs=(JOB,), faults=HANG, profiling=False, expected=("GPUJobHung",)),
    Scenario("checkpoint-long", "benign",
             "job 48213 on all 8 GPUs: a 12-minute checkpoint at 1h (every GPU near idle, utilization down too)",
             hours=3.0, jobs=(JOB,), faults=tuple(f"{i}=stall@1h+12m" for i in range(GPUS)),
             saturated=((3600.0, 4320.0),)),  # the node's CPUs busy writing it
)
