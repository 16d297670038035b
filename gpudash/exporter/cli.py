"""`gpudash exporter`: serve NVML (or a simulated node) on :9400 with dcgm-exporter's names and labels."""

from __future__ import annotations

import logging
import signal
import threading
from dataclasses import replace
from pathlib import Path
from types import FrameType

import click

from gpudash.catalog import SIGNALS
from gpudash.config.options import option_seconds
from gpudash.errors import UsageError
from gpudash.exporter.attribution import Attributor, combined
from gpudash.exporter.attribution.hpc import HpcJobMapping
from gpudash.exporter.attribution.kubelet import KubeletConfig
from gpudash.exporter.attribution.kubernetes_cli import kubelet_attributor, kubernetes_options
from gpudash.exporter.attribution.procs import ProcessAttribution
from gpudash.exporter.collectors import Collectors, all_signals, load_collectors, with_nvlink_per_link
from gpudash.exporter.expected import SYSFS_PCI_DEVICES, gpus_expected
from gpudash.exporter.nic_affinity import gpu_nics
from gpudash.exporter.service import Exporter
from gpudash.exporter.source import COUNT_WINDOW_SECONDS, MAX_COUNT_WINDOW_SECONDS, Source
from gpudash.exporter.webconfig import load_web_config

log = logging.getLogger("gpudash.exporter")


def _seconds(flag: str, text: str) -> float:
    return option_seconds(flag, text, minimum=0.05, examples="1s, 500ms or 30s")


def _whole(flag: str, text: str, lowest: int, highest: int) -> int:
    try:
        value = int(text)
    except ValueError:
        value = lowest - 1
    if not lowest <= value <= highest:
        raise UsageError(f"{flag} {text!r}: expected a whole number from {lowest} to {highest}")
    return value


def _fields_table() -> str:
    width = max(len(s.dcgm_name) for s in SIGNALS) + 1
    rows = [f"{s.dcgm_name:{width}} {s.type:8} {s.unit:6} {s.publisher.value}" for s in SIGNALS]
    return "\n".join([f"{'FIELD':{width}} {'TYPE':8} {'UNIT':6} SOURCE", *rows])


class _FaultOption(click.Option):
    """--fault, whose help lists the simulator's own fault table, read only to show it: a GPU node never loads
    the simulator."""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        from gpudash.exporter.sim.spec import fault_kinds_text

        self.help = ("Inject a fault on one simulated GPU (e.g. 2=leak, 5=thermal@5m+15m, 3=xid:79@2m, "
                     f"4=ib-flap:120@1h, 5=straggler:30@10m; docs/simulation.md): {fault_kinds_text()}.")
        return super().get_help_record(ctx)


@click.command(context_settings={"max_content_width": 110})
@click.option("--listen", "-a", default=":9400", show_default=True, help="Address to serve /metrics on.")
@click.option("--interval", "-c", default="1s", show_default=True, help="How often the fast fields are read.")
@click.option(
    "--slow-interval", default="10s", show_default=True, help="How often costly fields (energy, PCIe, ...) are read."
)
@click.option(
    "--collectors", "-f", type=click.Path(path_type=Path, dir_okay=False),
    help="A dcgm-exporter counters CSV selecting the fields to publish (default: every field).",
)
@click.option("--simulate", type=click.IntRange(1, 4096), metavar="N", help="Serve N simulated H200s instead of NVML.")
@click.option("--seed", default=0, show_default=True, help="Seed of the simulated node.")
@click.option(
    "--workload", multiple=True, metavar="IDX=NAME", help="Simulated workload of one GPU: train, inference, idle."
)
@click.option(
    "--fault", multiple=True, metavar="[NODE/]IDX=KIND[:ARG][@START][+DURATION]",
    cls=_FaultOption,
)
# -- simulated jobs over a cluster of simulated nodes (gpudash.exporter.sim.jobs, .cluster)
@click.option(
    "--sim-job", "sim_job", multiple=True, metavar="ID[/KIND]=NODE:GPUS[,NODE:GPUS]...[@START][+DURATION]",
    help="A job of the simulated cluster (e.g. 48213=node-01:0-7,node-02:0-7@10m+4h); KIND train (default), "
         "inference or idle. Its GPUs publish hpc_job. Faults may then name a node (node-02/5=straggler) and "
         "take the job faults straggler[:PCT], starved, idle-holder, foreign[:JOBID]. Give every node the same "
         "job and fault options and its own --hostname.",
)
@click.option(
    "--sim-jobs", metavar="default|FILE",
    help="'default': lay seeded jobs over --sim-nodes (one multi-node training job, smaller ones starting and "
         "ending, an inference job, free GPUs); FILE: a YAML file, 'jobs:' and a list of --sim-job specs.",
)
@click.option("--sim-nodes", default="", metavar="NODE,NODE,...", help="The simulated cluster's node names.")
@click.option(
    "--sim-mig", "sim_mig", multiple=True, metavar="IDX=PROFILE[,PROFILE...]",
    help="Partition one simulated GPU with MIG (e.g. 0=3g.71gb,1g.18gb,1g.18gb): its instances publish their "
         "memory and activity with GPU_I_PROFILE and GPU_I_ID, as on a real MIG GPU.",
)
@click.option(
    "--sim-epoch", type=float, metavar="UNIX_SECONDS",
    help="Unix time of the simulated cluster's t = 0 (default: the start of the current UTC hour, which nodes "
         "started separately agree on).",
)
@click.option("--hostname", default="", help="Value of the host label (default: this machine's name).")
@click.option("--no-hostname", "-n", is_flag=True, help="Leave the host label out, as dcgm-exporter's --no-hostname.")
@click.option(
    "--legacy-hostname-label", is_flag=True,
    help="Spell the host label 'Hostname', as dcgm-exporter did before it was renamed 'hostname'.",
)
# -- job attribution (docs/jobs.md): which job or pod each GPU and each GPU process belongs to -----------
@click.option(
    "--hpc-job-mapping-dir", envvar="DCGM_HPC_JOB_MAPPING_DIR", show_envvar=True, metavar="DIR",
    type=click.Path(path_type=Path, file_okay=False),
    help="Slurm job attribution, dcgm-exporter's contract: DIR holds one file per GPU, named by its index "
    "(the gpu label: 0, 1, ...), one job id per line; each job gets its own copy of that GPU's series with "
    "hpc_job=\"<id>\". deploy/slurm/ has the prolog and epilog that write them (GPU Operator default: "
    "/var/lib/dcgm-exporter/job-mapping). Read every sweep; a missing DIR is logged, never fatal. Also "
    "labels each GPU process with its job, from /proc/<pid>/cgroup.",
)
@click.option(
    "--proc-root", default=Path("/proc"), show_default=True, metavar="DIR",
    type=click.Path(path_type=Path, file_okay=False),
    help="Where the host's /proc is seen, for per-process attribution (e.g. /host/proc in a container; "
    "GPU processes are host pids).",
)
# -- end of job attribution ---------------------------------------------------------------------------
@click.option(
    "--web-config", "--web.config.file", "web_config", type=click.Path(path_type=Path, dir_okay=False),
    help="exporter-toolkit web config: TLS and basic auth.",
)
@click.option(
    "--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info", show_default=True
)
@click.option(
    "--xid-count-window-size", default=str(round(COUNT_WINDOW_SECONDS * 1000)), show_default=True, metavar="MS",
    envvar="DCGM_EXPORTER_XID_COUNT_WINDOW_SIZE", show_envvar=True,
    help="Window of DCGM_EXP_XID_ERRORS_COUNT and DCGM_EXP_CLOCK_EVENTS_COUNT, in milliseconds (dcgm-exporter's flag).",
)
@click.option(
    "--expected-gpus", metavar="N",
    help="How many GPUs this node should have (gpudash_node_gpus_expected; default: the NVIDIA GPUs on the PCI "
         "bus, else the count NVML sees at start).",
)
@click.option(
    "--nvlink-per-link", is_flag=True,
    help="Also publish gpudash_nvlink_errors_total and gpudash_nvlink_link_up per NVLink link (about 90 series a "
         "GPU on an SXM node). Default: only the per-GPU totals dcgm-exporter publishes "
         "(DCGM_FI_DEV_NVLINK_*_ERROR_COUNT_TOTAL); alerts and panels read those then.",
)
@click.option("--list-fields", is_flag=True, help="Print every field the exporter can publish and exit.")
@kubernetes_options
def exporter(
    listen: str,
    interval: str,
    slow_interval: str,
    collectors: Path | None,
    simulate: int | None,
    seed: int,
    workload: tuple[str, ...],
    fault: tuple[str, ...],
    sim_job: tuple[str, ...],
    sim_jobs: str | None,
    sim_nodes: str,
    sim_mig: tuple[str, ...],
    sim_epoch: float | None,
    hostname: str,
    no_hostname: bool,
    legacy_hostname_label: bool,
    hpc_job_mapping_dir: Path | None,
    proc_root: Path,
    web_config: Path | None,
    log_level: str,
    xid_count_window_size: str,
    expected_gpus: str | None,
    nvlink_per_link: bool,
    list_fields: bool,
    kubernetes: KubeletConfig | None,
) -> None:
    """Run the GPU exporter: NVML read in the background, dcgm-exporter compatible /metrics.

    \b
    Examples:
      gpudash exporter                                  # every GPU of this node on :9400
      gpudash exporter -f default-counters.csv          # only the fields a dcgm-exporter CSV names
      gpudash exporter --simulate 8 --fault 2=leak --fault 5=thermal --seed 7
      gpudash exporter --simulate 8 --hostname node-01 --sim-job 48213=node-01:0-7,node-02:0-7 \\
          --fault node-02/5=straggler:30@10m                 # node-01 of a cluster; node-02 likewise
      gpudash exporter --web-config web-config.yml      # TLS and basic auth
      gpudash exporter --kubernetes                     # pod/namespace/container from the kubelet
      gpudash exporter --hpc-job-mapping-dir /var/lib/dcgm-exporter/job-mapping   # hpc_job labels (Slurm)
    """
    if list_fields:
        click.echo(_fields_table())
        return
    logging.basicConfig(level=log_level.upper(), format="gpudash-exporter: %(levelname)s: %(message)s")
    if (workload or fault) and simulate is None:
        raise UsageError("--workload and --fault need --simulate N")
    if (sim_job or sim_jobs or sim_nodes or sim_epoch is not None) and simulate is None:
        raise UsageError("--sim-job, --sim-jobs, --sim-nodes and --sim-epoch need --simulate N")
    if sim_mig and simulate is None:
        raise UsageError("--sim-mig needs --simulate N (a real GPU is partitioned with `nvidia-smi mig`)")
    if (sim_job or sim_jobs) and hpc_job_mapping_dir is not None:
        raise UsageError("--hpc-job-mapping-dir with --sim-job/--sim-jobs: both would set hpc_job; give one of them")
    attributors: list[Attributor] = []
    fast, slow = _seconds("--interval", interval), _seconds("--slow-interval", slow_interval)
    window_ms = _whole("--xid-count-window-size", xid_count_window_size, 1, int(MAX_COUNT_WINDOW_SECONDS * 1000))
    expected = None if expected_gpus is None else _whole("--expected-gpus", expected_gpus, 0, 4096)
    chosen: Collectors = load_collectors(collectors) if collectors else all_signals()
    if nvlink_per_link:
        chosen = with_nvlink_per_link(chosen)
    web = load_web_config(web_config) if web_config is not None else None
    source: Source
    node_series = None
    if simulate is not None:  # the simulator is imported only here: a GPU node never loads it
        from gpudash.exporter.sim.cluster_node import cluster_from_options
        from gpudash.exporter.sim.fleet import fleet_from_specs
        from gpudash.exporter.sim.mig_layout import parse_mig
        from gpudash.exporter.sim.simulated import SimulatedSource

        cluster = cluster_from_options(simulate, seed, workload, fault, hostname=hostname, job_specs=sim_job,
                                       jobs=sim_jobs, nodes=sim_nodes, epoch=sim_epoch)
        if cluster is None:
            fleet = fleet_from_specs(simulate, seed, workload, fault)
        else:
            fleet, simulated_jobs = cluster
            attributors.append(simulated_jobs)
        source = SimulatedSource(replace(fleet, mig=parse_mig(sim_mig)) if sim_mig else fleet)
        nics = source.nics()
        node_series = source.node_series
    else:
        from gpudash.exporter.nvml import NvmlSource

        source = NvmlSource()
        nics = gpu_nics(source.gpus())
    try:
        attributors += _attribution(hpc_job_mapping_dir, proc_root, kubernetes, simulated=simulate is not None)
        service = Exporter(
            source,
            collectors=chosen,
            listen=listen,
            interval=fast,
            slow_interval=slow,
            hostname=None if no_hostname else hostname,
            hostname_label="Hostname" if legacy_hostname_label else "hostname",
            web=web,
            attributor=combined(attributors),
            count_window=window_ms / 1000.0,
            # a simulated node has no PCI functions of its own: this host's would be the wrong count
            gpus_expected=gpus_expected(expected, len(source.gpus()),
                                        None if simulate is not None else SYSFS_PCI_DEVICES),
            nics=nics,
            node_series=node_series,
        )
    except BaseException:
        for attributor in attributors:
            attributor.close()
        source.close()
        raise
    _serve(service, chosen, simulate)


def _attribution(hpc_job_mapping_dir: Path | None, proc_root: Path, kubernetes: KubeletConfig | None, *,
                 simulated: bool) -> list[Attributor]:
    """The attributors the flags ask for; per-process attribution comes with any of them."""
    parts: list[Attributor] = []
    sluid_lookup = None
    pod_lookup = None
    if hpc_job_mapping_dir is not None:
        hpc = HpcJobMapping(hpc_job_mapping_dir)
        parts.append(hpc)
        sluid_lookup = hpc.job_for_sluid
    if kubernetes is not None:
        kubelet = kubelet_attributor(kubernetes, simulated=simulated)
        parts.append(kubelet)
        pod_lookup = kubelet.pod_by_uid
    if parts and not simulated:  # simulated processes have made-up pids: /proc would name someone else's
        parts.append(ProcessAttribution(proc_root, sluid_lookup=sluid_lookup, pod_lookup=pod_lookup))
    return parts


def _serve(service: Exporter, chosen: Collectors, simulate: int | None) -> None:
    done = threading.Event()

    def _on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s, shutting down", signal.Signals(signum).name)
        done.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    service.start()
    what = f"{simulate} simulated GPUs" if simulate else f"{len(service.poller.gpus)} GPUs through NVML"
    log.info("serving %s, %d signals (%s), on %s/metrics", what, len(chosen.keys), chosen.origin, service.url)
    try:
        while not done.wait(1.0):
            pass
    finally:
        service.stop()
    log.info("stopped")
