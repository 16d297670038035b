"""The alert scenario corpus: simulated GPU nodes, hours long at 15 s, written as promtool `input_series`.

GPU readings come from gpudash.exporter.sim.simulated (workloads and injected faults). The simulator models
GPUs only, so three things a scenario also needs are modelled here, separately and simply:

- the node's CPU, as node_exporter publishes it (`node_load1`, `node_cpu_seconds_total`): a steady load
  per core, raised to saturation while a data loader starves the GPUs or stalls;
- input-pipeline starvation: while it lasts, every training GPU's utilization is scaled down to ~30 %;
- the exporter target going down: `up` drops to 0 and every GPU series of the node goes stale;
- HBM warmer than the simulator's (core + 3 C): Hopper's memory runs hotter than its core, in the low 80s in
  busy training, and a failing memory cooling path heats it alone (`hbm_heat`).

Job scenarios lay jobs over the node's GPUs (gpudash.exporter.sim.jobs, the node as one of a simulated
cluster): their GPU series carry `hpc_job` while a job runs, as the exporter's job attribution publishes it,
and the profiling series the job rules read (SM, tensor and DRAM activity) and power (with its limit where
the flavour publishes it) come along. The hang scenarios are in bench/scenarios_jobs.py. A job may span the
scenario's `peers` too: nodes written beside it, with no fault of their own, that feel its faults through the job.

Where a fault hits the fabric (bench/scenarios_fabric.py), each node also gets its InfiniBand ports under
node_exporter's names (gpudash.exporter.sim.fabric, one port per GPU), the bundled exporter's GPU <-> port map
(gpudash_gpu_nic_info) and each GPU's NVSwitch fabric state.

Two exporter flavours: `bundled` publishes what `gpudash exporter` does (every catalog signal the rules
read, both XID forms, throttle reasons, gpudash_gpu_up); `dcgm` only dcgm-exporter's default counters.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from bench import scenarios_jobs
from bench.corpus_scenario import GPUS, HOST, STEP, Sample, Scenario
from bench.scenarios_corrected import CORRECTED
from bench.scenarios_fabric import FABRIC_SCENARIOS
from bench.scenarios_health import HEALTH_SCENARIOS
from bench.scenarios_offenders import OFFENDERS
from gpudash.catalog import BY_KEY, CLOCK_EVENT_REASONS, HPC_JOB_LABEL, Publisher
from gpudash.exporter.nic_affinity import GpuNic, nic_info_lines
from gpudash.exporter.sim import fabric
from gpudash.exporter.sim.fleet import Fleet
from gpudash.exporter.source import GpuReading

CLUSTER = "sim"
GPU_JOB = "gpu-exporter"
NODE_JOB = "node"
CPUS = 16
# The signals the rules (ours and the naive set) read; the rest of the catalog would only slow promtool.
KEYS = ("gpu_util", "fb_used", "fb_free", "gpu_temp", "hbm_temp", "sm_clock", "sm_clock_max",
        "clock_event_reasons", "xid_last")
# The health alerts' signals: memory errors, NVLink per GPU (DCGM's totals), each GPU's own temperature limits.
HEALTH_KEYS = ("ecc_dbe_vol", "ecc_dbe_agg", "remapped_rows_unc", "remapped_rows_cor", "row_remap_pending",
               "row_remap_failure", "nvlink_crc_flit", "nvlink_crc_data", "nvlink_replay", "nvlink_recovery",
               "gpu_max_op_temp", "mem_max_op_temp", "recovery_action")
FABRIC_KEYS = ("fabric_status",)  # GPUFabricState's input: only where a fault hits the fabric
SBE_KEYS = ("ecc_sbe_vol", "ecc_sbe_agg")  # corrected ECC errors, no rule's input: only where a scenario counts them
HBM_RAMP = 300.0  # s: how long an `hbm_heat` step takes to reach its full rise
# what the job rules read besides KEYS, in job scenarios only
JOB_KEYS = ("sm_active", "tensor_active", "dram_active", "power", "power_limit")
PROFILING_KEYS = ("sm_active", "tensor_active", "dram_active")
FLAVOURS = ("bundled", "dcgm")



def _m(minutes: float) -> float:
    return minutes * 60.0


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("training-sawtooth", "benign",
             "8 GPUs training: allocator saw-tooth, short data-loader dips, a checkpoint every 30 min"),
    Scenario("dataloader-stall-8m", "benign", "training with one 8-minute input stall (util 0, CPU busy)",
             faults=tuple(f"{i}=stall@1h+8m" for i in range(GPUS)), saturated=((_m(60), _m(68)),)),
    Scenario("checkpoint-burst", "benign",
             "training with a checkpoint every 30 min (GPU idle ~1 min, PCIe TX burst) for 6 hours",
             hours=6.0),
    Scenario("model-load-97-flat", "benign", "inference: model and KV cache loaded to 97 % in 1 min, then flat",
             workloads=tuple(f"{i}=inference" for i in range(GPUS)), cpu_load=0.25),
    Scenario("warmup-ramp", "benign", "job start: weights load, utilization ramps over 2-3 minutes",
             hours=2.0),
    Scenario("idle-and-inference", "benign", "half the node idle (no process), half serving inference",
             workloads=tuple(f"{i}={'idle' if i < 4 else 'inference'}" for i in range(GPUS)), cpu_load=0.1),
    Scenario("busy-training-hbm-82", "benign",
             "8 H200s training hard, HBM in the low 80s (its own max operating temperature is 95 C)",
             hbm_heat=(0.0, math.inf, 15.0)),
    Scenario("memory-leak-oom", "fault", "GPU 3 leaks framebuffer from 30 min, OOM at 3h",
             faults=("3=leak:2h30m@30m",), fault_gpu=3,
             expected=("GPUMemoryLeakPredicted", "GPUMemoryPressure"), naive_expected=("NaiveMemoryFull",),
             notes={"oom": _m(180)}),
    Scenario("thermal-throttling", "fault", "GPU 5 loses cooling at 1h10m: 91 C, clock down ~35 %, for 40 min",
             faults=("5=thermal:91@1h10m+40m",), fault_gpu=5, expected=("GPUThermalThrottling",),
             naive_expected=("NaiveHighTemperature",)),
    Scenario("stalled-job", "fault", "GPU 2's job hangs at 1h10m: memory held, utilization 0",
             faults=("2=stall@1h10m",), fault_gpu=2, expected=("GPUJobStalled",),
             naive_expected=("NaiveLowUtilization",)),
    Scenario("xid-79", "fault", "GPU 6 reports XID 79 at 1h10m (stays on the bus)",
             faults=("6=xid:79@1h10m",), fault_gpu=6, expected=("GPUXidError",)),
    Scenario("hbm-overheat", "fault",
             "GPU 4's memory cooling fails at 1h10m: HBM climbs to ~97 C in 5 min, at or above its 95 C, for 40 min",
             hbm_heat=(_m(70), _m(110), 30.0), fault_gpu=4, expected=("GPUHighTemperature",)),
    Scenario("gpu-lost", "fault", "GPU 1 raises XID 79 at 1h10m and falls off the bus for 1 hour",
             faults=("1=lost@1h10m+1h",), fault_gpu=1, expected=("GPUExporterDown", "GPUXidError")),
    Scenario("dbe-burst", "fault", "GPU 1 counts 4 double-bit ECC errors at 1h10m (XID 48, a row remap pending)",
             faults=("1=dbe-burst@1h10m",), fault_gpu=1, expected=("GPUEccUncorrectable",)),
    Scenario("remap-pending", "fault", "GPU 2 has a row remap pending from 1h10m until a reset 1 hour later",
             faults=("2=remap-pending@1h10m+1h",), fault_gpu=2, expected=("GPURowRemapPending",)),
    Scenario("remap-failure", "fault", "GPU 3's row remapping fails at 1h10m (XID 64): a GPU to replace",
             faults=("3=remap-failure@1h10m",), fault_gpu=3, expected=("GPURowRemapFailure",)),
    Scenario("nvlink-crc-storm", "fault",
             "one NVLink link of GPU 4 counts 300 CRC errors a second from 1h10m for 15 min",
             faults=("4=nvlink-crc-storm@1h10m+15m",), fault_gpu=4, expected=("GPUNVLinkErrors",)),
    Scenario("fell-off-bus", "fault", "GPU 5 falls off the bus at 1h10m (XID 79) and stays off",
             faults=("5=fell-off-bus@1h10m",), fault_gpu=5, expected=("GPUFellOffBus", "GPUExporterDown")),
    Scenario("xid-classes", "fault",
             "at 1h10m: XID 13 on GPU 0 (restart job), 94 on 1 (restart job), 119 on 2 (reset GPU), 63 on 3 "
             "(info), 999 on 4 (not in the table)",
             faults=("0=xid:13@1h10m", "1=xid:94@1h10m", "2=xid:119@1h10m", "3=xid:63@1h10m", "4=xid:999@1h10m"),
             fault_gpus=(0, 1, 2, 3, 4), expected=("GPUXidError",)),
    Scenario("exporter-down", "fault", "the node's GPU exporter is unreachable from 1h10m for 20 min",
             target_down=(_m(70), _m(90)), expected=("GPUExporterDown",)),
    Scenario("dataloader-starvation", "fault",
             "from 1h10m for 90 min the input pipeline saturates every CPU and GPUs idle at ~30 %",
             starved=(_m(70), _m(160)), saturated=((_m(70), _m(160)),), expected=("GPUDataLoaderBottleneck",),
             naive_expected=("NaiveLowUtilization",)),
    # Jobs (the job rules need a job of at least 4 GPUs for a straggler, an hour for an idle holder).
    Scenario("straggler", "fault",
             "job 48213 on all 8 GPUs; GPU 5 throttled 30 % slower from 1h10m for 1 hour, the others wait on it",
             jobs=(f"48213={HOST}:0-7",), faults=("5=straggler:30@1h10m+1h",), fault_gpu=5,
             expected=("GPUJobStraggler",), naive_expected=("NaiveSlowClock",)),
    # (two idle GPUs, not more: promtool's unit tests load at most 10,000 samples per query, and every GPU held
    # idle keeps three naive alerts firing for hours)
    Scenario("idle-holder", "fault",
             "job 48217 holds GPUs 6-7 idle from 1h10m (a process, a little memory, 0 %); job 48213 trains on 0-5",
             jobs=(f"48213={HOST}:0-5", f"48217={HOST}:6-7"),
             faults=("6=idle-holder@1h10m", "7=idle-holder@1h10m"), fault_gpus=(6, 7),
             expected=("GPUAllocatedIdle",), naive_expected=("NaiveAllocatedIdle",)),
    Scenario("job-wide-dip", "benign",
             "job 48213 on all 8 GPUs: checkpoints, hourly evaluations, stalls and an 8-minute input stall, "
             "every GPU together", jobs=(f"48213={HOST}:0-7",),
             faults=tuple(f"{i}=stall@1h+8m" for i in range(GPUS)), saturated=((_m(60), _m(68)),)),
    Scenario("small-job-straggler", "benign",
             "2-GPU job 48213 with GPU 1 30 % slower from 1h10m (under the straggler rule's 4 GPUs); "
             "job 48215 trains on 2-7", jobs=(f"48213={HOST}:0-1", f"48215={HOST}:2-7"),
             faults=("1=straggler:30@1h10m+1h",)),
    Scenario("job-start-end", "benign",
             "job 48213 on 8 GPUs from 10m for 2 hours, then job 48231 on 0-3 from 2h30m for 1h20m; GPUs free between",
             jobs=(f"48213={HOST}:0-7@10m+2h", f"48231={HOST}:0-3@2h30m+1h20m")),
    Scenario("straggler-no-profiling", "fault",
             "the straggler scenario without SM or tensor activity series (utilization and clocks only)",
             jobs=(f"48213={HOST}:0-7",), faults=("5=straggler:30@1h10m+1h",), fault_gpu=5, profiling=False,
             expected=("GPUJobStraggler",), naive_expected=("NaiveSlowClock",)),
    *(Scenario(**offender) for offender in OFFENDERS),  # a GPU that needs a reset three times: an RMA
    *(Scenario(**corrected) for corrected in CORRECTED),  # replays, CRC and single-bit ECC errors: never an alert
    *scenarios_jobs.SCENARIOS,
    *(Scenario(**health) for health in HEALTH_SCENARIOS),
    *FABRIC_SCENARIOS,
)
BY_NAME = {s.name: s for s in SCENARIOS}


def _noise(*parts: int) -> float:
    """Deterministic uniform noise in [0, 1)."""
    return (math.sin(12.9898 * parts[0] + 78.233 * sum(parts[1:]) + 0.5) * 43758.5453) % 1.0


class _Series:
    def __init__(self, n: int) -> None:
        self.data: dict[str, list[Sample]] = {}
        self.n = n

    def put(self, key: str, index: int, value: Sample) -> None:
        self.data.setdefault(key, [None] * self.n)[index] = value


def _labels(**labels: str) -> str:
    return ",".join(f'{k}="{v}"' for k, v in labels.items())


def build_series(scenario: Scenario, flavour: str) -> dict[str, list[Sample]]:
    """Series selector text -> one sample per STEP (None where the series is absent)."""
    if flavour not in FLAVOURS:
        raise ValueError(flavour)
    sbe = SBE_KEYS if any("sbe" in f for f in scenario.faults) else ()
    fabric_keys = FABRIC_KEYS if scenario.fabric else ()
    wanted = KEYS + HEALTH_KEYS + (JOB_KEYS if scenario.jobs else ()) + sbe + fabric_keys
    keys = [k for k in wanted if (flavour == "bundled" or BY_KEY[k].publisher is Publisher.DCGM_DEFAULT)
            and (scenario.profiling or k not in PROFILING_KEYS)]
    out = _Series(scenario.samples)
    for host in scenario.hosts:
        _put_node(out, scenario, flavour, keys, host)
    _mark_stale(out.data)
    return out.data


def _put_node(out: _Series, scenario: Scenario, flavour: str, keys: list[str], host: str) -> None:
    fleet = scenario.fleet(host)
    gpu_instance = f"{host}:9400"
    node_instance = f"{host}:9100"
    base = {"cluster": CLUSTER, "rack": "rack-1"}
    node = _labels(**base, instance=node_instance, job=NODE_JOB)
    nics = [(pair, _nic_info(pair, _labels(**base, instance=gpu_instance, job=GPU_JOB, hostname=host)))
            for pair in map(fabric.port_of, fleet.identities)] if scenario.fabric else []
    for index in range(scenario.samples):
        t = float(index * STEP)
        down = (host == HOST and scenario.target_down is not None
                and scenario.target_down[0] <= t < scenario.target_down[1])
        out.put(f'up{{{_labels(**base, instance=gpu_instance, job=GPU_JOB)}}}', index, 0.0 if down else 1.0)
        saturated = any(a <= t < b for a, b in scenario.saturated)
        load = (0.97 if saturated else scenario.cpu_load) + 0.06 * (_noise(index, 1) - 0.5)
        out.put(f"node_load1{{{node}}}", index, round(load * CPUS, 2))
        for cpu in range(CPUS):
            out.put(f'node_cpu_seconds_total{{{node},cpu="{cpu}",mode="idle"}}', index,
                    round(t * (1 - min(load, 1.0)), 1))
        for pair, _ in nics:  # node_exporter's infiniband collector: whichever exporter flavour serves the GPUs
            i = pair.gpu.index
            values = fabric.port_values(fleet.seed, i, t, fleet.faults.get(i, ()), fleet.workload(i) != "idle")
            port = f'device="{pair.nic.device}",port="{pair.nic.port}"'
            for name, value in values.items():
                out.put(f"{name}{{{node},{port}}}", index, float(value))
        if down:
            continue
        if flavour == "bundled":
            gpus = _labels(**base, instance=gpu_instance, job=GPU_JOB)
            out.put(f"{BY_KEY['gpus_expected'].dcgm_name}{{{gpus}}}", index, float(GPUS))
            for _, info in nics:  # the bundled exporter's GPU <-> port map; dcgm-exporter has none
                out.put(info, index, 1.0)
        for reading in fleet.sample(t):
            _put_gpu(out, index, reading, fleet, scenario, keys, flavour, host, base)


def _nic_info(pair: GpuNic, exporter: str) -> str:
    """The selector of the bundled exporter's gpudash_gpu_nic_info sample for one GPU and its port."""
    (line,) = nic_info_lines([pair], exporter)
    return line.rsplit(" ", 1)[0]


def _put_gpu(out: _Series, index: int, reading: GpuReading, fleet: Fleet, scenario: Scenario,
             keys: list[str], flavour: str, host: str, base: dict[str, str]) -> None:
    instance = f"{host}:9400"
    ident = fleet.identities[reading.index]
    t = index * STEP
    job = fleet.job(reading.index, float(t))
    gpu = _labels(**base, instance=instance, job=GPU_JOB, gpu=str(reading.index), UUID=ident.uuid,
                  modelName=ident.model_name, hostname=host, **({HPC_JOB_LABEL: job.id} if job else {}))
    if flavour == "bundled":
        out.put(f"{BY_KEY['gpu_up'].dcgm_name}{{{gpu}}}", index, 1.0 if reading.up else 0.0)
        for code, count in sorted(reading.xid.counts.items()):
            out.put(f'{BY_KEY["xid_total"].dcgm_name}{{{gpu},xid="{code}"}}', index, float(count))
    if not reading.up:
        return
    values = dict(reading.values)
    if flavour == "dcgm":
        values["xid_last"] = _dcgm_last_xid(fleet, reading.index, float(t))
    if scenario.starved and scenario.starved[0] <= t < scenario.starved[1] and fleet.workload(reading.index) == "train":
        values["gpu_util"] = round(values["gpu_util"] * (0.28 + 0.08 * _noise(index, reading.index)))
    if scenario.hbm_heat:
        start, end, rise = scenario.hbm_heat
        if start <= t < end:
            values["hbm_temp"] += round(rise * min(1.0, (t - start) / HBM_RAMP)) if scenario.on(reading.index) else 0
    for key in keys:
        if key in values:
            out.put(f"{BY_KEY[key].dcgm_name}{{{gpu}}}", index, float(values[key]))
    # per-link series only where a link fails: 576 series that stay 0 double promtool's time, and the GPU
    # totals above carry the same (zero) counts for the NVLink rule elsewhere
    if flavour == "bundled" and scenario.link_errors:
        for link in reading.links:
            for error, count in link.errors.items():
                out.put(f'{BY_KEY["nvlink_link_errors"].dcgm_name}{{{gpu},link="{link.link}",error="{error}"}}',
                        index, count)
        mask = int(values["clock_event_reasons"])
        for bit, name in CLOCK_EVENT_REASONS:
            out.put(f'{BY_KEY["clock_event_active"].dcgm_name}{{{gpu},clock_event="{name}"}}', index,
                    1.0 if mask & bit else 0.0)


def _dcgm_last_xid(fleet: Fleet, i: int, t: float) -> float:
    """dcgm-exporter's last-XID gauge keeps the last code until DCGM restarts with a reset (a fault's end);
    the bundled exporter's returns to 0 after XID_HOLD_SECONDS, which the simulated reading follows."""
    events = [(when, code) for when, code in fleet.xid_events(i) if when <= t]
    resets = [f.end for f in fleet.faults.get(i, ()) if f.end <= t]
    if not events or (resets and max(resets) >= events[-1][0]):
        return 0.0
    return float(events[-1][1])


def _mark_stale(data: dict[str, list[Sample]]) -> None:
    """A series that stops being published gets a staleness marker, as Prometheus writes on a scrape."""
    for samples in data.values():
        for i in range(1, len(samples)):
            if samples[i] is None and samples[i - 1] not in (None, "stale"):
                samples[i] = "stale"


def _number(value: float) -> str:
    return f"{value:.10g}"


def expand(samples: list[Sample]) -> str:
    """promtool's expanding notation: runs of one value as `VxN`, absent samples as `_`."""
    parts: list[str] = []
    i = 0
    while i < len(samples):
        value = samples[i]
        j = i
        while j + 1 < len(samples) and samples[j + 1] == value and value != "stale":
            j += 1
        run = j - i + 1
        if value is None:
            parts.append("_" if run == 1 else f"_x{run}")  # `_xN` is N absent samples ...
        elif value == "stale":
            parts.append("stale")
        else:
            text = _number(float(value))
            parts.append(text if run == 1 else f"{text}x{run - 1}")  # ... but `VxN` is N + 1 samples
        i = j + 1
    return " ".join(parts)


def input_series(scenario: Scenario, flavour: str) -> Iterator[dict[str, str]]:
    for selector, samples in sorted(build_series(scenario, flavour).items()):
        yield {"series": selector, "values": expand(samples)}


def throttle_onset(scenario: Scenario) -> float | None:
    """First time the faulted GPU reports a thermal or power-brake clock event reason (throttling begins)."""
    if scenario.fault_gpu is None:
        return None
    fleet = scenario.fleet()
    thermal = sum(bit for bit, name in CLOCK_EVENT_REASONS if "thermal" in name or "brake" in name)
    for index in range(scenario.samples):
        reading = fleet.sample_gpu(scenario.fault_gpu, float(index * STEP))
        if reading.up and int(reading.values["clock_event_reasons"]) & thermal:
            return float(index * STEP)
    return None
