"""The bundled GPU exporter: dcgm-exporter's names and labels from NVML (or a simulated fleet).

Imports only the standard library, prometheus-client's neighbours (none needed on the hot path),
nvidia-ml-py when reading real GPUs, and gpudash.catalog / gpudash.errors: it runs on every GPU node.
"""
