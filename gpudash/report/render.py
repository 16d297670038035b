"""The report as Markdown (a wiki page), CSV (one row per figure, for a spreadsheet) and JSON (pure).

The three carry the same numbers, rounded the same way (GPU-hours to 2 decimals), so they agree line by line.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime, timezone
from typing import Any

from gpudash.report.figures import LLAMA3_GPU_DAYS, LLAMA3_INTERRUPTIONS, LLAMA3_RATE, Report

FORMATS = ("markdown", "csv", "json")
SUFFIX = {"markdown": "md", "csv": "csv", "json": "json"}
GOODPUT_NOTE = ("a proxy: GPU-hours weighted by tensor-core activity (SM activity where a cluster publishes no "
                "tensor figure), not a count of useful work")


def when(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def hours(value: float) -> str:
    return f"{value:.2f}"


def share(value: float, whole: float) -> str:
    return f"{100 * value / whole:.1f} %" if whole else "-"


def rows(report: Report) -> list[tuple[str, str, str, str]]:
    """(section, name, category, value): every figure of the report, as CSV and JSON give them."""
    out = [("fleet", "gpus", "", str(report.fleet_gpus)), ("fleet", "capacity", "gpu_hours", hours(report.capacity_h))]
    out += [("gpu_hours", team, category, hours(value)) for team, category, value in report.categories()]
    out += [("fleet", "down", "not_reporting", hours(report.not_reporting_h)),
            ("fleet", "down", "health_alert_unheld", hours(report.alert_unheld_h)),
            ("activity", "utilization", "gpu_hours", hours(report.utilization_h)),
            ("activity", "goodput_proxy", "gpu_hours", hours(report.goodput_h))]
    out += [("interruptions", cls, "count", str(count)) for cls, count in report.interruptions]
    out += [("interruptions", "total", "count", str(report.interruption_count)),
            ("interruptions", "rate", "per_1000_gpu_days", f"{report.interruption_rate:.3f}"),
            ("interruptions", "llama3_reference", "per_1000_gpu_days", f"{LLAMA3_RATE:.3f}")]
    out += [("top_idle", f"{h.cluster}/{h.job}", h.team, hours(h.idle_h)) for h in report.top_idle]
    out += [("gpu_interruptions", g.gpu, g.classes, str(g.count)) for g in report.top_gpus]
    return out


def as_csv(report: Report) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(("section", "name", "category", "value"))
    writer.writerows(rows(report))
    return buffer.getvalue()


def as_json(report: Report) -> str:
    data: dict[str, Any] = asdict(report)
    data.update(down_h=report.down_h, held_h=report.held_h, gpu_days=report.gpu_days,
                interruption_count=report.interruption_count, interruption_rate=report.interruption_rate,
                llama3_rate=LLAMA3_RATE, goodput_note=GOODPUT_NOTE,
                interruptions=[{"class": c, "count": n} for c, n in report.interruptions])
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def _table(head: tuple[str, ...], body: Sequence[tuple[str, ...]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    return lines + ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in body]


def as_markdown(report: Report) -> str:
    cap = report.capacity_h
    out = [f"# GPU report, {when(report.start)} to {when(report.end)}", "",
           f"{report.fleet_gpus:,} GPUs (the most that reported at once), {hours(cap)} GPU-hours "
           f"({report.gpu_days:,.1f} GPU-days); step {report.step_s} s.", "",
           f"## GPU-hours by {report.team_label}", ""]
    body = [(row.team, hours(row.busy_h), hours(row.idle_h), "", "", hours(row.held_h), share(row.held_h, cap))
            for row in report.teams]
    body.append(("(fleet)", "", "", hours(report.down_h), hours(report.unallocated_h),
                 hours(report.down_h + report.unallocated_h), share(report.down_h + report.unallocated_h, cap)))
    out += _table((report.team_label, "busy", "idle", "down", "unallocated", "total", "share"), body)
    out += ["", f"Down: {hours(report.not_reporting_h)} GPU-hours not reporting, {hours(report.alert_unheld_h)} "
            "under a health alert with an action and held by no job (a held GPU is charged to its job).", "",
            "## Activity", "",
            *_table(("figure", "GPU-hours", "share"), [
                ("held by jobs", hours(report.held_h), share(report.held_h, cap)),
                ("utilization-weighted", hours(report.utilization_h), share(report.utilization_h, cap)),
                ("goodput (proxy)", hours(report.goodput_h), share(report.goodput_h, cap))]),
            "", f"Goodput is {GOODPUT_NOTE}.", "",
            "## Interruptions", "",
            f"Health alerts with an action, counted once per firing episode and GPU: {report.interruption_count} "
            f"in {report.gpu_days:,.1f} GPU-days, **{report.interruption_rate:.2f} per 1,000 GPU-days**; Llama 3's "
            f"pre-training saw {LLAMA3_RATE:.2f} ({LLAMA3_INTERRUPTIONS} in {LLAMA3_GPU_DAYS:,} GPU-days).", ""]
    out += _table(("class", "interruptions"), [(cls, str(count)) for cls, count in report.interruptions])
    out += ["", "## Top idle holders", ""]
    out += _table(("job", report.team_label, "user", "idle GPU-hours", "held GPU-hours"),
                  [(f"{h.cluster}/{h.job}", h.team, h.user, hours(h.idle_h), hours(h.held_h))
                   for h in report.top_idle])
    out += ["", "## GPUs with the most interruptions", ""]
    out += _table(("GPU", "interruptions", "classes"), [(g.gpu, str(g.count), g.classes) for g in report.top_gpus])
    return "\n".join(out) + "\n"


RENDER = {"markdown": as_markdown, "csv": as_csv, "json": as_json}
