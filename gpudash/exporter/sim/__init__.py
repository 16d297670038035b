"""The simulated GPU node: the same Source interface as NVML, with workloads and injected faults."""
