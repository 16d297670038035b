"""gpudash: NVIDIA GPU fleet monitoring as code."""

__version__ = "0.1.0"
