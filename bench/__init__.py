"""Benchmarks and the synthetic data they share; tests import what they check: `from bench.fleetgen import ...`."""
