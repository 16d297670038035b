"""Interruption rates others published, that gpudash's own are set beside (the report, the fleet dashboard)."""

from __future__ import annotations

# Llama 3 (Meta, 2024): 419 unexpected interruptions in 54 days of pre-training on 16,384 H100 GPUs.
LLAMA3_INTERRUPTIONS = 419
LLAMA3_GPU_DAYS = 54 * 16_384
LLAMA3_RATE = LLAMA3_INTERRUPTIONS / LLAMA3_GPU_DAYS * 1000  # per 1,000 GPU-days, about 0.47
