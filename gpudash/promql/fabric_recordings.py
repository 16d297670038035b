"""The fabric's recording rules: node_exporter's InfiniBand / RoCE port counters per port, node, cluster, and per
GPU through the bundled exporter's GPU <-> port map (gpudash_gpu_nic_info).

The congestion ratio of a port is the share of its transmit slots spent waiting: transmit-wait ticks over
ticks plus data words sent (PortXmitData counts 4-byte words; node_exporter publishes it in bytes). A tick is
not exactly a word's time on every HCA, so the ratio ranks and thresholds ports; it is no exact duty cycle.

A port is matched to its GPUs through `HOST`: each node_exporter target with ports, labelled `host` with the
host of the GPU exporter target on the same node (its `instance` without the port). The two targets meet on any
name the node goes by: node_exporter's by its `instance` without the port and node_uname_info's `nodename`, the
GPU exporter's by its `instance` without the port and the host-name label of its GPU series; so a node_exporter
scraped as 10.0.0.5:9100 meets a GPU exporter scraped as gpu-node-5:9400 whose series say hostname="gpu-node-5".
Every recording is `filtered`: a fleet without RDMA ports records none, and that is no fault.
"""

from __future__ import annotations

from collections.abc import Callable

from gpudash import infiniband as ib
from gpudash.promql.query import NODE_UNAME, PromQL, Recording

RATE_WINDOW = "5m"
PORT = "cluster, instance, device, port"
_INSTANCE_HOST = "(.+?)(?::[0-9]+)?"  # `instance` without its port
HOST_FROM_INSTANCE = f'"host", "$1", "instance", "{_INSTANCE_HOST}"'
HOST = "cluster_instance:infiniband_host:info"
TX = "cluster_instance_port:infiniband_transmit_bytes:rate"
RX = "cluster_instance_port:infiniband_receive_bytes:rate"
CONGESTION = "cluster_instance_port:infiniband_congestion:ratio"
ERRORS = "cluster_instance_port:infiniband_errors:rate"
GPU_CONGESTION = "cluster_instance_gpu:infiniband_congestion:ratio"
GPU_TX = "cluster_instance_gpu:infiniband_transmit_bytes:rate"
GPU_RX = "cluster_instance_gpu:infiniband_receive_bytes:rate"
GPU_PORT = "cluster, instance, gpu, device, port"
GPU_ERRORS = "cluster_instance_gpu:infiniband_errors:rate"
# The maps the per-GPU and per-job recordings join through, recorded once per evaluation: each reader would
# otherwise find every GPU's host, ports and job again (every GPU's series read several times per rule).
GPU_PORTS = "cluster_instance_gpu:infiniband_port:info"
JOB_GPUS = "cluster_instance_gpu_job:infiniband_port:held"


def port_rate(q: PromQL, name: str) -> str:
    return f"sum by ({PORT}) (rate({name}{q.scope.selector()}[{RATE_WINDOW}]))"


def _congestion(q: PromQL) -> str:
    wait = port_rate(q, ib.TRANSMIT_WAIT)
    return f"{wait}\n/\n(\n  {wait}\n  + {port_rate(q, ib.TRANSMITTED_BYTES)} / 4\n  > 0\n)"


def _errors(q: PromQL) -> str:
    """Sparse: only the ports counting errors, so a list of the worst reads a handful of series, not the fleet's."""
    names = (ib.SYMBOL_ERRORS, ib.LINK_INTEGRITY_ERRORS, ib.RECEIVE_ERRORS)
    rates = "\n  + ".join(port_rate(q, name) for name in names)
    return f"(\n  {rates}\n)\n> 0"


def _gpu_ports(q: PromQL) -> str:
    """1 per GPU and port under it (gpudash_gpu_nic_info), labelled `host` with the GPU exporter's host."""
    return f"label_replace(max by ({GPU_PORT}) ({ib.NIC_INFO}{q.scope.selector()}), {HOST_FROM_INSTANCE})"


def _on_gpus(q: PromQL, record: str, pad: str = "") -> str:
    """A per-port recording on each GPU the port serves, with the GPU exporter's instance and the GPU's index: the
    port's node_exporter target meets its GPU exporter through `HOST`, the GPU its ports through `GPU_PORTS` (both
    as recorded earlier in the group's evaluation)."""
    ports = (f"max by (host, device, port) (\n{pad}    {q.recorded_series(record)}\n"
             f"{pad}    * on (cluster, instance) group_left (host)\n{pad}    {q.recorded_series(HOST)}\n{pad}  )")
    return (f"{pad}max by ({GPU_PORT}) (\n{pad}  {ports}\n{pad}  * on (host, device, port) group_right ()\n"
            f"{pad}  {q.recorded_series(GPU_PORTS)}\n{pad})")


def _job_gpus(q: PromQL) -> str:
    """1 per GPU under a port and the job holding it. A GPU two jobs share (a time-sliced GPU) lends its ports to
    one of them: the one with more series on it."""
    job, gpu = q.job_label, q.gpu
    gpus = f"count by (cluster, instance, {gpu}, {job}) ({q.in_job('gpu_util')})"
    return (f"(\n  topk by (cluster, instance, {gpu}) (1, {gpus})\n  and on (cluster, instance, {gpu})\n"
            f"  {q.recorded_series(GPU_PORTS)}\n) * 0 + 1")


def _job_ports(q: PromQL, record: str) -> str:
    """A per-GPU port recording on the job each GPU serves, one series per job and port: a port under two of the
    job's GPUs counts once."""
    job, gpu = q.job_label, q.gpu
    return (f"max by (cluster, {job}, instance, device, port) (\n  {q.recorded_series(record)}\n"
            f"  * on (cluster, instance, {gpu}) group_left ({job})\n  {q.recorded_series(JOB_GPUS)}\n)")


def _per_job(func: str, record: str) -> Callable[[PromQL], str]:
    return lambda q: f"{func} by (cluster, {q.job_label}) (\n{_job_ports(q, record)}\n)"


def _of(func: str, by: str, record: str) -> Callable[[PromQL], str]:
    """`func` by `by` of a per-port recording, as recorded earlier in the group's evaluation."""
    return lambda q: f"{func} by ({by}) ({q.recorded_series(record)})"


def _copy(expr: str, to: str, source: str, regex: str) -> str:
    return f'label_replace({expr}, "{to}", "$1", "{source}", "{regex}")'


def _node_names(q: PromQL) -> str:
    """Each node_exporter target with ports under every name its node goes by (`alias`)."""
    ported = f"{ib.TRANSMITTED_BYTES}{q.scope.selector()}"  # every port counts bytes sent, whatever its state
    ports = _copy(f"group by (cluster, instance) ({ported})", "alias", "instance", _INSTANCE_HOST)
    uname = f"{NODE_UNAME}{q.scope.selector()} and on (cluster, instance) {ported}"
    named = _copy(f"group by (cluster, instance, nodename) ({uname})", "alias", "nodename", "(.+)")
    return f"{ports}\n      or\n      {named}"


def _gpu_names(q: PromQL) -> str:
    """Each GPU exporter target under every name its node goes by (`alias`), its `host` the instance's host."""
    sel = q.scope.selector()
    hostname = q.profile.hostname_label
    gpus = q.per_gpu(f"{q.profile.ref('fb_used').name}{sel} or {ib.NIC_INFO}{sel}", *filter(None, (hostname,)))
    names = [_copy(gpus, "alias", "instance", _INSTANCE_HOST)]
    if hostname:
        names.append(_copy(gpus, "alias", hostname, "(.+)"))
    return "\n      or\n      ".join(_copy(name, "host", "instance", _INSTANCE_HOST) for name in names)


def _hosts(q: PromQL) -> str:
    """One `host` per node_exporter target (topk: a name two GPU exporters share cannot fail the match)."""
    return (f"topk by (cluster, instance) (1,\n  group by (cluster, instance, host) (\n    (\n      {_node_names(q)}\n"
            f"    )\n    * on (alias) group_left (host)\n    topk by (alias) (1,\n      {_gpu_names(q)}\n    )\n  )\n)")


def _gpu_congestion(q: PromQL) -> str:
    """Each GPU's worst port, with the port's device and port labels (one series per GPU, as topk keeps it)."""
    return f"topk by (cluster, instance, gpu) (1,\n{_on_gpus(q, CONGESTION, '  ')}\n)"


def _rec(record: str, build: Callable[[PromQL], str], help_: str) -> Recording:
    return Recording(record, (), build, help_, filtered=True)


FABRIC_RECORDINGS: tuple[Recording, ...] = (
    _rec(TX, lambda q: port_rate(q, ib.TRANSMITTED_BYTES), "InfiniBand / RoCE transmit throughput (B/s), per port."),
    _rec(RX, lambda q: port_rate(q, ib.RECEIVED_BYTES), "InfiniBand / RoCE receive throughput (B/s), per port."),
    _rec(CONGESTION, _congestion,
         "Share of a port's transmit slots spent waiting (transmit wait over wait plus words sent), per port."),
    _rec(ERRORS, _errors, "Symbol, link-integrity and receive errors a second, per port counting any."),
    _rec("cluster_instance:infiniband_transmit_bytes:rate", _of("sum", "cluster, instance", TX),
         "InfiniBand / RoCE transmit throughput (B/s), per node."),
    _rec("cluster_instance:infiniband_receive_bytes:rate", _of("sum", "cluster, instance", RX),
         "InfiniBand / RoCE receive throughput (B/s), per node."),
    _rec("cluster_instance:infiniband_congestion:max", _of("max", "cluster, instance", CONGESTION),
         "The congestion ratio of the node's most congested port."),
    _rec("cluster:infiniband_transmit_bytes:rate", _of("sum", "cluster", TX),
         "InfiniBand / RoCE transmit throughput (B/s), per cluster."),
    _rec("cluster:infiniband_receive_bytes:rate", _of("sum", "cluster", RX),
         "InfiniBand / RoCE receive throughput (B/s), per cluster."),
    _rec("cluster:infiniband_congestion:avg", _of("avg", "cluster", CONGESTION),
         "Mean congestion ratio of the cluster's ports that carry traffic."),
    _rec(HOST, _hosts,
         "Per node_exporter target with InfiniBand / RoCE ports: 1, labelled host with the host of the GPU exporter "
         "target on the same node (matched by instance or node_uname_info nodename against instance or host name)."),
    _rec(GPU_PORTS, _gpu_ports,
         "Per GPU and RDMA port under it (gpudash_gpu_nic_info): 1, labelled host with the GPU exporter's host."),
    _rec(JOB_GPUS, _job_gpus,
         "Per GPU under an RDMA port and the job holding it (a GPU two jobs share: one of them): 1."),
    _rec(GPU_CONGESTION, _gpu_congestion,
         "The congestion ratio of each GPU's most congested port (gpudash_gpu_nic_info), with its device and port."),
    _rec(GPU_TX, lambda q: _on_gpus(q, TX),
         "Transmit throughput (B/s) of each RDMA port under a GPU (gpudash_gpu_nic_info), on that GPU's series."),
    _rec(GPU_RX, lambda q: _on_gpus(q, RX),
         "Receive throughput (B/s) of each RDMA port under a GPU (gpudash_gpu_nic_info), on that GPU's series."),
    _rec(GPU_ERRORS, lambda q: _on_gpus(q, ERRORS),
         "Errors a second of each RDMA port under a GPU that counts any (gpudash_gpu_nic_info), on that GPU's series."),
    _rec("cluster_job:infiniband_transmit_bytes:rate", _per_job("sum", GPU_TX),
         "InfiniBand / RoCE transmit throughput (B/s) of the ports under a job's GPUs, per job."),
    _rec("cluster_job:infiniband_receive_bytes:rate", _per_job("sum", GPU_RX),
         "InfiniBand / RoCE receive throughput (B/s) of the ports under a job's GPUs, per job."),
    _rec("cluster_job:infiniband_congestion:max", _per_job("max", GPU_CONGESTION),
         "The congestion ratio of the most congested port under a job's GPUs, per job."),
    _rec("cluster_job:infiniband_errors:rate", _per_job("sum", GPU_ERRORS),
         "Errors a second of the ports under a job's GPUs that count any, per job."),
)
