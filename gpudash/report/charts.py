"""The report as one PNG: GPU-hours by team and category, and interruptions by class beside Llama 3's rate.

matplotlib is an optional extra (`pip install 'gpudash[preview]'`); `gpudash report --charts` loads this module
only when asked (gpudash.report.cli).
"""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")  # never a window, with or without a display

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from gpudash.report.figures import LLAMA3_RATE, Report
from gpudash.report.render import when

COLORS = {"busy": "#37872d", "idle": "#fade2a", "down": "#c4162a", "unallocated": "#8e8e8e"}


def png(report: Report) -> bytes:
    figure = Figure(figsize=(11, 4.5 + 0.3 * len(report.teams)), dpi=100)
    FigureCanvasAgg(figure)
    hours, interruptions = figure.subplots(1, 2, width_ratios=(3, 2))
    names = [row.team for row in report.teams] + ["(fleet)"]
    left = [0.0] * len(names)
    values = {
        "busy": [row.busy_h for row in report.teams] + [0.0],
        "idle": [row.idle_h for row in report.teams] + [0.0],
        "down": [0.0] * len(report.teams) + [report.down_h],
        "unallocated": [0.0] * len(report.teams) + [report.unallocated_h],
    }
    for category, widths in values.items():
        hours.barh(names, widths, left=left, color=COLORS[category], label=category)
        left = [a + b for a, b in zip(left, widths, strict=True)]
    hours.invert_yaxis()
    hours.set_xlabel("GPU-hours")
    hours.set_title(f"GPU-hours by {report.team_label}, {when(report.start)} to {when(report.end)}", fontsize=10)
    hours.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=4, fontsize=8, frameon=False)
    classes = [cls for cls, _ in report.interruptions] or ["(none)"]
    counts = [count for _, count in report.interruptions] or [0]
    interruptions.barh(classes, counts, color="#5794f2")
    interruptions.invert_yaxis()
    interruptions.set_xlabel("interruptions (health alerts with an action)")
    interruptions.set_title(f"{report.interruption_rate:.2f} per 1,000 GPU-days (Llama 3: {LLAMA3_RATE:.2f})",
                            fontsize=10)
    figure.tight_layout()
    out = io.BytesIO()
    figure.savefig(out, format="png", metadata={"Software": None})
    return out.getvalue()
