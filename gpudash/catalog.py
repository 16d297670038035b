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
# DCGM_EXP_P2P_STATUS's label naming the peer GPU (its index on this node) of each link.
PEER_GPU_LABEL = "peer_gpu"
# A MIG GPU instance's series carry these after `modelName`, as dcgm-exporter writes them: the instance's
# profile ("1g.18gb") and its GPU instance id.
MIG_PROFILE_LABEL = "GPU_I_PROFILE"
MIG_INSTANCE_LABEL = "GPU_I_ID"

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
    # A running total, yet typed gauge as dcgm-exporter's 2026 counters file declares it; rate() still applies.
    _s("nvlink_bandwidth", "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "1", "gauge",
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
    # GPU health: memory errors, row remapping, NVLink errors, each GPU's own thermal limits.
    _s("ecc_sbe_vol", "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "1", "counter",
       "Total number of single-bit volatile ECC errors.", OPT),
    _s("ecc_dbe_vol", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "1", "counter",
       "Total number of double-bit volatile ECC errors.", OPT),
    _s("ecc_sbe_agg", "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "1", "counter",
       "Total number of single-bit persistent ECC errors.", OPT),
    _s("ecc_dbe_agg", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "1", "counter",
       "Total number of double-bit persistent ECC errors.", OPT),
    _s("retired_sbe", "DCGM_FI_DEV_RETIRED_SBE", "1", "counter",
       "Total number of retired pages due to single-bit errors.", OPT),
    _s("retired_dbe", "DCGM_FI_DEV_RETIRED_DBE", "1", "counter",
       "Total number of retired pages due to double-bit errors.", OPT),
    _s("retired_pending", "DCGM_FI_DEV_RETIRED_PENDING", "1", "counter",
       "Total number of pages pending retirement.", OPT),
    _s("row_remap_pending", "DCGM_FI_DEV_ROW_REMAP_PENDING", "1", "gauge",
       "Whether remapping of rows is pending (1: the next GPU reset applies it).", OPT),
    _s("nvlink_crc_flit", "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "1", "counter",
       "Total number of NVLink flow-control CRC errors.", OPT),
    _s("nvlink_crc_data", "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "1", "counter",
       "Total number of NVLink data CRC errors.", OPT),
    _s("nvlink_replay", "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "1", "counter",
       "Total number of NVLink retries.", OPT),
    _s("nvlink_recovery", "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", "1", "counter",
       "Total number of NVLink recovery errors.", OPT),
    _s("gpu_max_op_temp", "DCGM_FI_DEV_GPU_MAX_OP_TEMP", "C", "gauge",
       "Maximum operating temperature of the GPU (in C).", OPT),
    _s("mem_max_op_temp", "DCGM_FI_DEV_MEM_MAX_OP_TEMP", "C", "gauge",
       "Maximum operating temperature of the memory (in C).", OPT),
    _s("temp_margin", "DCGM_FI_DEV_GPU_TEMP_LIMIT", "C", "gauge",
       "Thermal margin: degrees left before the GPU's maximum operating temperature (T.Limit, in C).", OPT),
    _s("thermal_violation", "DCGM_FI_DEV_THERMAL_VIOLATION", "ns", "counter",
       "Throttling duration due to thermal constraints (in ns).", OPT),
    _s("power_violation", "DCGM_FI_DEV_POWER_VIOLATION", "ns", "counter",
       "Throttling duration due to power constraints (in ns).", OPT),
    _s("recovery_action", "DCGM_FI_DEV_GPU_RECOVERY_ACTION", "1", "gauge",
       "The driver's GPU recovery action (0 none, 1 GPU reset, 2 node reboot, 3 drain P2P, 4 drain and reset, "
       "5 recover IMEX domain, 6 bus reset, 7 system reboot).", OPT),
    _s("fabric_status", "DCGM_FI_DEV_FABRIC_MANAGER_STATUS", "1", "gauge",
       "The GPU's NVSwitch fabric state (0 not supported, 1 not started, 2 in progress, 3 success, 4 failure, "
       "5 unrecognized).", OPT),
    _s("fabric_clique", "DCGM_FI_DEV_FABRIC_CLIQUE_ID", "1", "gauge",
       "The ID of the fabric clique to which this GPU belongs.", OPT),
    # dcgm-exporter's own fields (DCGM_EXP_*), typed as its 2026 counters file declares them.
    _s("xid_count_window", "DCGM_EXP_XID_ERRORS_COUNT", "1", "gauge",
       "XID errors observed during the configured time window.", OPT, "xid", "window_size_in_ms"),
    _s("xid_count_total", "DCGM_EXP_XID_ERRORS_TOTAL", "1", "counter",
       "Total XID errors observed since exporter start.", OPT, "xid"),
    _s("clock_events_count", "DCGM_EXP_CLOCK_EVENTS_COUNT", "1", "gauge",
       "Clock events observed during the configured time window.", OPT, "clock_event", "window_size_in_ms"),
    _s("clock_events_total", "DCGM_EXP_CLOCK_EVENTS_TOTAL", "1", "counter",
       "Total clock events observed since exporter start (edge-counted).", OPT, "clock_event"),
    _s("gpu_health_status", "DCGM_EXP_GPU_HEALTH_STATUS", "1", "gauge",
       "Current DCGM-reported GPU health status.", OPT, "health_watch", "health_error_code"),
    _s("p2p_status", "DCGM_EXP_P2P_STATUS", "1", "gauge",
       "Current NVLink P2P status per peer link.", OPT, PEER_GPU_LABEL),
    # Published only by the bundled exporter.
    _s("clock_event_active", "gpudash_clock_event_active", "1", "gauge",
       "1 while this clock event (throttle) reason is active, else 0.", OWN, "clock_event"),
    _s("xid_total", "gpudash_xid_errors_total", "1", "counter",
       "XID errors seen since the exporter started, by XID code.", OWN, "xid"),
    _s("xid_last_time", "gpudash_xid_last_timestamp_seconds", "s", "gauge",
       "Unix time of the last XID error seen.", OWN),
    _s("process_fb_used", "gpudash_process_fb_used_mib", "MiB", "gauge",
       "Framebuffer memory used by one process (in MiB).", OWN, "pid", "process_name"),
    _s("process_sm_util", "gpudash_process_sm_util_percent", "%", "gauge",
       "Share of the SMs' time one process had over NVML's last sample window (in %).", OWN, "pid", "process_name"),
    _s("gpu_up", "gpudash_gpu_up", "1", "gauge",
       "1 when the last sweep read this GPU, 0 when it fell off the bus or NVML lost it.", OWN),
    _s("nvlink_link_errors", "gpudash_nvlink_errors_total", "1", "counter",
       "NVLink errors of one link by kind (crc_flit, crc_data, replay, recovery), as NVML counts them.", OWN,
       "link", "error"),
    _s("nvlink_link_up", "gpudash_nvlink_link_up", "1", "gauge",
       "1 while this NVLink link is active, 0 while it is inactive; only the links the GPU has.", OWN, "link"),
    _s("gpus_expected", "gpudash_node_gpus_expected", "1", "gauge",
       "How many GPUs this node should have (--expected-gpus, else the NVIDIA GPUs on its PCI bus, else the "
       "count NVML saw at start).", OWN),
)

# Signals of the node, not of one GPU: no gpu/UUID labels, one series per exporter.
NODE_SIGNALS = frozenset({"gpus_expected"})
# Per-link NVLink series: about 90 a GPU on an SXM node. The bundled exporter publishes them only when asked
# (`gpudash exporter --nvlink-per-link`); the per-GPU totals dcgm-exporter publishes stand for them otherwise,
# and every rule and panel that reads them falls back to those totals.
PER_LINK_KEYS = frozenset({"nvlink_link_errors", "nvlink_link_up"})

BY_KEY: dict[str, Signal] = {s.key: s for s in SIGNALS}
BY_DCGM_NAME: dict[str, Signal] = {s.dcgm_name: s for s in SIGNALS}

# dcgm-exporter's label that carries the driver version (a "label" row of its counters CSV).
DRIVER_VERSION_LABEL = "DCGM_FI_DRIVER_VERSION"

# Job attribution labels, as dcgm-exporter publishes them: `hpc_job` from its HPC job-mapping files (one
# copy of a GPU's series per job), `pod`/`namespace`/`container` from the kubelet's PodResources API.
HPC_JOB_LABEL = "hpc_job"
POD_LABELS = ("pod", "namespace", "container")
# With DRA (`--kubernetes-enable-dra`), the claim and the device each copy of a GPU's series stands for.
DRA_LABELS = ("dra_claim_name", "dra_claim_namespace", "dra_driver_name", "dra_pool_name", "dra_device_name",
              "dra_mig_profile", "dra_mig_device_uuid")
ATTRIBUTION_LABELS = (HPC_JOB_LABEL, *POD_LABELS)
# Who holds a Slurm job (deploy/slurm's Prolog records it): one series per job on the node, value 1, with
# the job label and these, for joins (`* on (cluster, hpc_job) group_left (account) gpudash_job_info`).
JOB_INFO = "gpudash_job_info"
JOB_INFO_LABELS = ("user", "account", "partition", "job_name")

# The bundled exporter's metrics about itself: not GPU signals, so no profile maps them.
EXPORTER_SWEEP_SECONDS = "gpudash_exporter_collection_duration_seconds"
EXPORTER_ERRORS = "gpudash_exporter_collection_errors_total"
EXPORTER_LAST_SWEEP = "gpudash_exporter_last_sweep_timestamp_seconds"
EXPORTER_PENDING = "gpudash_exporter_fields_pending"
# 1 per GPU and published field that NVML answers NotSupported for there (no NVLink, no GPM profiling), labelled
# with the GPU's labels and `field` (the field's metric name): what `check`, `doctor` and the demo call a hint.
EXPORTER_UNSUPPORTED = "gpudash_exporter_field_unsupported"
UNSUPPORTED_FIELD_LABEL = "field"

# Prometheus' own series of its alerts: one per alert and state (ALERTS), and the time each became active
# (ALERTS_FOR_STATE, Unix seconds). The health dashboard reads the health alerts from them by their `action`.
PROMETHEUS_ALERTS = "ALERTS"
PROMETHEUS_ALERTS_FOR_STATE = "ALERTS_FOR_STATE"

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
# dcgm-exporter's clock_event label values on DCGM_EXP_CLOCK_EVENTS_COUNT (its clockEventToString), by bit.
DCGM_EXP_CLOCK_EVENTS: tuple[tuple[int, str], ...] = (
    (0x1, "gpu_idle"),
    (0x2, "clocks_setting"),
    (0x4, "power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal"),
    (0x40, "hw_thermal"),
    (0x80, "hw_power_brake"),
    (0x100, "display_clocks"),
)
# The `error` label values of gpudash_nvlink_errors_total, and the DCGM total each one sums into.
NVLINK_ERROR_KINDS: tuple[tuple[str, str], ...] = (
    ("crc_flit", "nvlink_crc_flit"),
    ("crc_data", "nvlink_crc_data"),
    ("replay", "nvlink_replay"),
    ("recovery", "nvlink_recovery"),
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
    uuid_label: str  # the label with the GPU's UUID: it follows the GPU from node to node
    metrics: dict[str, MetricRef]
    description: str

    @property
    def card_labels(self) -> tuple[str, ...]:
        """The labels that name the card: its UUID, and its node's host name where the exporter sets one."""
        return (self.uuid_label, *((self.hostname_label,) if self.hostname_label else ()))

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
    uuid_label="UUID",
    metrics={s.key: MetricRef(s.dcgm_name) for s in SIGNALS},
    description="dcgm-exporter names and labels (also what `gpudash exporter` publishes)",
)

_MIB = "/ 1048576"
_MHZ = "/ 1000000"
NVIDIA_SMI = Profile(
    name="nvidia_smi",
    gpu_label="uuid",
    hostname_label=None,
    uuid_label="uuid",
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
