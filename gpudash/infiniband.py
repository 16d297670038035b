"""node_exporter's infiniband collector: the names of its series, read by the rules, the dashboards and the
simulated node that serves them. Every series has the labels ``device`` (mlx5_0) and ``port`` (1); RoCE ports
are listed there too. Standard library only: the exporter's simulated node reads it.
"""

from __future__ import annotations

# (name, type, help) as node_exporter publishes them
RECEIVED_BYTES = "node_infiniband_port_data_received_bytes_total"
TRANSMITTED_BYTES = "node_infiniband_port_data_transmitted_bytes_total"
TRANSMIT_WAIT = "node_infiniband_port_transmit_wait_total"
LINK_DOWNED = "node_infiniband_link_downed_total"
LINK_ERROR_RECOVERY = "node_infiniband_link_error_recovery_total"
SYMBOL_ERRORS = "node_infiniband_symbol_error_total"
LINK_INTEGRITY_ERRORS = "node_infiniband_local_link_integrity_errors_total"
RECEIVE_ERRORS = "node_infiniband_port_errors_received_total"
TRANSMIT_DISCARDS = "node_infiniband_port_discards_transmitted_total"
RATE = "node_infiniband_rate_bytes_per_second"
STATE = "node_infiniband_state_id"
PHYSICAL_STATE = "node_infiniband_physical_state_id"

SERIES: tuple[tuple[str, str, str], ...] = (
    (RECEIVED_BYTES, "counter", "Number of data octets received on all links"),
    (TRANSMITTED_BYTES, "counter", "Number of data octets transmitted on all links"),
    (TRANSMIT_WAIT, "counter",
     "Number of ticks during which the port had data to transmit but no data was sent during the entire tick"),
    (LINK_DOWNED, "counter",
     "Number of times the link failed to recover from an error state and went down"),
    (LINK_ERROR_RECOVERY, "counter", "Number of times the link successfully recovered from an error state"),
    (SYMBOL_ERRORS, "counter", "Number of minor link errors detected on one or more physical lanes."),
    (LINK_INTEGRITY_ERRORS, "counter",
     "Number of times that the count of local physical errors exceeded the threshold specified by LocalPhyErrors."),
    (RECEIVE_ERRORS, "counter", "Number of packets containing an error that were received on this port"),
    (TRANSMIT_DISCARDS, "counter",
     "Number of outbound packets discarded by the port because the port is down or congested"),
    (RATE, "gauge", "Maximum signal transfer rate"),
    (STATE, "gauge",
     "State of the InfiniBand port (0: no change, 1: down, 2: init, 3: armed, 4: active, 5: act defer)"),
    (PHYSICAL_STATE, "gauge",
     "Physical state of the InfiniBand port (0: no change, 1: sleep, 2: polling, 3: disable, 4: shift, 5: link up, "
     "6: link error recover, 7: phytest)"),
)
ACTIVE = 4  # STATE: the port passes traffic
LINK_UP = 5  # PHYSICAL_STATE
DOWN, POLLING = 1, 2  # STATE down; PHYSICAL_STATE polling (no peer: a cable out, a switch port off)
PORT_LABELS = ("device", "port")
# The bundled exporter's GPU <-> port map (gpudash.exporter.nic_affinity): labels gpu, UUID, device, port, ...
NIC_INFO = "gpudash_gpu_nic_info"
