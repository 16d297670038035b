"""The metric catalog: one row per GPU signal, read by the exporter, the dashboards and the rules.

No metric name is typed anywhere else. A signal has a canonical key (``fb_used``), the unit DCGM reports
it in, its Prometheus type and help text. A *profile* maps keys to the names one exporter publishes:

- ``dcgm`` (default): dcgm-exporter's names and labels, which the bundled exporter also publishes.
- ``nvidia_smi``: utkuozdemir/nvidia_gpu_exporter's ``nvidia_smi_*`` names, converted to DCGM units.

A signal a profile cannot provide is simply absent from it; whatever reads it must leave that panel or
rule out rather than emit a query that returns nothing.

This module imports nothing outside the standard library: the exporter, deployed on every GPU node,
reads it too.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Publisher(Enum):
    """Who publishes a signal under the dcgm profile."""

    DCGM_DEFAULT = "dcgm-default"  # in dcgm-exporter's default-counters.csv: present on every real deployment
    DCGM_OPTIONAL = "dcgm-optional"  # a DCGM field dcgm-exporter can publish when enabled in its counters CSV
    GPUDASH = "gpudash"  # published only by the bundled exporter


@dataclass(frozen=True)
class Signal:
    key: str
    dcgm_name: str
    unit: str
    type: str  # gauge | counter
    help: str
    publisher: Publisher
    labels: tuple[str, ...] = ()  # extra labels beyond the per-GPU ones

    @property
    def optional(self) -> bool:
        """Panels built on an optional signal may legitimately be empty on a dcgm-exporter deployment."""
        return self.publisher is not Publisher.DCGM_DEFAULT


def _s(key: str, name: str, unit: str, kind: str, help_: str, publisher: Publisher, *labels: str) -> Signal:
    return Signal(key, name, unit, kind, help_, publisher, labels)


DEF, OPT, OWN = Publisher.DCGM_DEFAULT, Publisher.DCGM_OPTIONAL, Publisher.GPUDASH

SIGNALS: tuple[Signal, ...] = (
    # dcgm-exporter default counters (default-counters.csv), DCGM units.
    _s("sm_clock", "DCGM_FI_DEV_SM_CLOCK", "MHz", "gauge", "SM clock frequency (in MHz).", DEF),
    _s("mem_clock", "DCGM_FI_DEV_MEM_CLOCK", "MHz", "gauge", "Memory clock frequency (in MHz).", DEF),
    _s("hbm_temp", "DCGM_FI_DEV_MEMORY_TEMP", "C", "gauge", "Memory temperature (in C).", DEF),
    _s("gpu_temp", "DCGM_FI_DEV_GPU_TEMP", "C", "gauge", "GPU temperature (in C).", DEF),
    _s("power", "DCGM_FI_DEV_POWER_USAGE", "W", "gauge", "Power draw (in W).", DEF),
    _s("energy", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "mJ", "counter",
       "Total energy consumption since boot (in mJ).", DEF),
    _s("pcie_replay", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "1", "counter", "Total number of PCIe retries.", DEF),
    _s("gpu_util", "DCGM_FI_DEV_GPU_UTIL", "%", "gauge", "GPU utilization (in %).", DEF),
    _s("mem_copy_util", "DCGM_FI_DEV_MEM_COPY_UTIL", "%", "gauge", "Memory utilization (in %).", DEF),
    _s("enc_util", "DCGM_FI_DEV_ENC_UTIL", "%", "gauge", "Encoder utilization (in %).", DEF),
    _s("dec_util", "DCGM_FI_DEV_DEC_UTIL", "%", "gauge", "Decoder utilization (in %).", DEF),
    _s("xid_last", "DCGM_FI_DEV_XID_ERRORS", "1", "gauge", "Value of the last XID error encountered.", DEF),
    _s("fb_free", "DCGM_FI_DEV_FB_FREE", "MiB", "gauge", "Framebuffer memory free (in MiB).", DEF),
    _s("fb_used", "DCGM_FI_DEV_FB_USED", "MiB", "gauge", "Framebuffer memory used (in MiB).", DEF),
    _s("fb_reserved", "DCGM_FI_DEV_FB_RESERVED", "MiB", "gauge", "Framebuffer memory reserved (in MiB).", DEF),
    _s("nvlink_bandwidth", "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "1", "counter",
       "Total number of NVLink bandwidth counters for all lanes.", DEF),
    _s("vgpu_license", "DCGM_FI_DEV_VGPU_LICENSE_STATUS", "1", "gauge", "vGPU License status", DEF),
    _s("remapped_rows_unc", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "1", "counter",
       "Number of remapped rows for uncorrectable errors", DEF),
    _s("remapped_rows_cor", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "1", "counter",
       "Number of remapped rows for correctable errors", DEF),
    _s("row_remap_failure", "DCGM_FI_DEV_ROW_REMAP_FAILURE", "1", "gauge", "Whether remapping of rows has failed", DEF),
    _s("gr_engine_active", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "ratio", "gauge",
       "Ratio of time the graphics engine is active.", DEF),
    _s("tensor_active", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "ratio", "gauge",
       "Ratio of cycles the tensor (HMMA) pipe is active.", DEF),
    _s("dram_active", "DCGM_FI_PROF_DRAM_ACTIVE", "ratio", "gauge",
       "Ratio of cycles the device memory interface is active sending or receiving data.", DEF),
    _s("pcie_tx", "DCGM_FI_PROF_PCIE_TX_BYTES", "B/s", "gauge",
       "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - "
       "in bytes per second.", DEF),
    _s("pcie_rx", "DCGM_FI_PROF_PCIE_RX_BYTES", "B/s", "gauge",
       "The rate of data received over the PCIe bus - including both protocol headers and data payloads - "
       "in bytes per second.", DEF),
    # DCGM fields dcgm-exporter can publish when its counters CSV enables them.
    _s("sm_active", "DCGM_FI_PROF_SM_ACTIVE", "ratio", "gauge",
       "The ratio of cycles an SM has at least 1 warp assigned.", OPT),
    _s("sm_occupancy", "DCGM_FI_PROF_SM_OCCUPANCY", "ratio", "gauge",
       "The ratio of number of warps resident on an SM.", OPT),
    _s("fb_total", "DCGM_FI_DEV_FB_TOTAL", "MiB", "gauge", "Framebuffer memory total (in MiB).", OPT),
    _s("power_limit", "DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "W", "gauge", "Enforced power limit (in W).", OPT),
    _s("sm_clock_max", "DCGM_FI_DEV_MAX_SM_CLOCK", "MHz", "gauge", "Maximum SM clock frequency (in MHz).", OPT),
    _s("slowdown_temp", "DCGM_FI_DEV_SLOWDOWN_TEMP", "C", "gauge", "Slowdown temperature (in C).", OPT),
    _s("shutdown_temp", "DCGM_FI_DEV_SHUTDOWN_TEMP", "C", "gauge", "Shutdown temperature (in C).", OPT),
    _s("clock_event_reasons", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "1", "gauge",
       "Current clock event (throttle) reasons, as the NVML bitmask.", OPT),
    # Published only by the bundled exporter.
    _s("clock_event_active", "gpudash_clock_event_active", "1", "gauge",
       "1 while this clock event (throttle) reason is active, else 0.", OWN, "clock_event"),
    _s("xid_total", "gpudash_xid_errors_total", "1", "counter",
       "XID errors seen since the exporter started, by XID code.", OWN, "xid"),
    _s("xid_last_time", "gpudash_xid_last_timestamp_seconds", "s", "gauge",
       "Unix time of the last XID error seen.", OWN),
    _s("process_fb_used", "gpudash_process_fb_used_mib", "MiB", "gauge",
       "Framebuffer memory used by one process (in MiB).", OWN, "pid", "process_name"),
    _s("gpu_up", "gpudash_gpu_up", "1", "gauge",
       "1 when the last sweep read this GPU, 0 when it fell off the bus or NVML lost it.", OWN),
)

# dcgm-exporter's own counters (not DCGM fields), published when its counters CSV enables them: events in a
# sliding window (window_size_in_ms), per clock event reason and per XID code. Dashboards fall back to them;
# the bundled exporter does not compute them (it publishes its own per-reason and per-code series), so they
# stay out of SIGNALS, which is what an exporter reads.
DCGM_EXPORTER_COUNTERS: tuple[Signal, ...] = (
    _s("clock_events_count", "DCGM_EXP_CLOCK_EVENTS_COUNT", "1", "counter",
       "Clock events (throttle reasons) reported within the exporter's window.", OPT, "clock_event"),
    _s("xid_count", "DCGM_EXP_XID_ERRORS_COUNT", "1", "counter", "XIDs reported within the exporter's window.",
       OPT, "xid"),
)

BY_KEY: dict[str, Signal] = {s.key: s for s in (*SIGNALS, *DCGM_EXPORTER_COUNTERS)}
BY_DCGM_NAME: dict[str, Signal] = {s.dcgm_name: s for s in (*SIGNALS, *DCGM_EXPORTER_COUNTERS)}

# dcgm-exporter's label that carries the driver version (a "label" row of its counters CSV).
DRIVER_VERSION_LABEL = "DCGM_FI_DRIVER_VERSION"

# Job attribution labels, as dcgm-exporter publishes them: `hpc_job` from its HPC job-mapping files (one
# copy of a GPU's series per job), `pod`/`namespace`/`container` from the kubelet's PodResources API.
HPC_JOB_LABEL = "hpc_job"
POD_LABELS = ("pod", "namespace", "container")
ATTRIBUTION_LABELS = (HPC_JOB_LABEL, *POD_LABELS)

# The bundled exporter's metrics about itself: not GPU signals, so no profile maps them.
EXPORTER_SWEEP_SECONDS = "gpudash_exporter_collection_duration_seconds"
EXPORTER_ERRORS = "gpudash_exporter_collection_errors_total"
EXPORTER_LAST_SWEEP = "gpudash_exporter_last_sweep_timestamp_seconds"
EXPORTER_PENDING = "gpudash_exporter_fields_pending"

# Clock event (throttle) reason bits, as NVML defines them; label values follow dcgm-exporter's clock_event.
CLOCK_EVENT_REASONS: tuple[tuple[int, str], ...] = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)
# The reasons that mean "slowed by heat or by the power brake": what throttling panels and alerts look for.
THERMAL_OR_BRAKE_REASONS = ("sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "hw_slowdown")


@dataclass(frozen=True)
class MetricRef:
    """How one profile publishes one signal: the metric name and how to convert it to the DCGM unit."""

    name: str
    convert: str = ""  # a PromQL suffix such as "* 100" or "/ 1048576"; empty when units already match


@dataclass(frozen=True)
class Profile:
    name: str
    gpu_label: str  # the label that names one GPU on its node
    hostname_label: str | None  # the label with the node's host name, when the exporter sets one
    metrics: dict[str, MetricRef]
    description: str

    def has(self, key: str) -> bool:
        return key in self.metrics

    def ref(self, key: str) -> MetricRef:
        if key not in BY_KEY:
            raise KeyError(f"unknown signal {key!r}")
        return self.metrics[key]


DCGM = Profile(
    name="dcgm",
    gpu_label="gpu",
    hostname_label="hostname",
    metrics={s.key: MetricRef(s.dcgm_name) for s in (*SIGNALS, *DCGM_EXPORTER_COUNTERS)},
    description="dcgm-exporter names and labels (also what `gpudash exporter` publishes)",
)

_MIB = "/ 1048576"
_MHZ = "/ 1000000"
NVIDIA_SMI = Profile(
    name="nvidia_smi",
    gpu_label="uuid",
    hostname_label=None,
    metrics={
        "gpu_util": MetricRef("nvidia_smi_utilization_gpu_ratio", "* 100"),
        "mem_copy_util": MetricRef("nvidia_smi_utilization_memory_ratio", "* 100"),
        "enc_util": MetricRef("nvidia_smi_utilization_encoder_ratio", "* 100"),
        "dec_util": MetricRef("nvidia_smi_utilization_decoder_ratio", "* 100"),
        "fb_used": MetricRef("nvidia_smi_memory_used_bytes", _MIB),
        "fb_free": MetricRef("nvidia_smi_memory_free_bytes", _MIB),
        "fb_reserved": MetricRef("nvidia_smi_memory_reserved_bytes", _MIB),
        "fb_total": MetricRef("nvidia_smi_memory_total_bytes", _MIB),
        "gpu_temp": MetricRef("nvidia_smi_temperature_gpu"),
        "hbm_temp": MetricRef("nvidia_smi_temperature_memory"),
        "power": MetricRef("nvidia_smi_power_draw_watts"),
        "power_limit": MetricRef("nvidia_smi_enforced_power_limit_watts"),
        "sm_clock": MetricRef("nvidia_smi_clocks_current_sm_clock_hz", _MHZ),
        "mem_clock": MetricRef("nvidia_smi_clocks_current_memory_clock_hz", _MHZ),
        "sm_clock_max": MetricRef("nvidia_smi_clocks_max_sm_clock_hz", _MHZ),
        "clock_event_reasons": MetricRef("nvidia_smi_clocks_event_reasons_active"),
        "remapped_rows_cor": MetricRef("nvidia_smi_remapped_rows_correctable"),
        "remapped_rows_unc": MetricRef("nvidia_smi_remapped_rows_uncorrectable"),
        "row_remap_failure": MetricRef("nvidia_smi_remapped_rows_failure"),
        "process_fb_used": MetricRef("nvidia_smi_compute_app_used_memory_bytes", _MIB),
    },
    description="utkuozdemir/nvidia_gpu_exporter's nvidia_smi_* names, converted to DCGM units",
)

PROFILES: dict[str, Profile] = {p.name: p for p in (DCGM, NVIDIA_SMI)}


def profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise KeyError(f"unknown metric profile {name!r} (known: {', '.join(PROFILES)})") from None
