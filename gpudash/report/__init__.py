"""The weekly report: GPU-hours by team and category, goodput, interruptions (docs/report.md)."""
