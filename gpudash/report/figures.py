"""The weekly report's figures from the range's totals (pure): GPU-hours per team and category, goodput,
interruptions per 1,000 GPU-days beside a published rate, the top idle holders and the GPUs interrupted most.

The categories split the fleet's GPU-hours (the most GPUs that reported at once, per cluster, times the
range) with no overlap:

- busy and idle: GPU-hours a job held, charged to its team (the job's `gpudash_job_info` label the site
  names, gpudash.yaml `jobs.team`; "(unknown)" without one), idle as the job recordings count it (under
  `alerts.allocated_idle.util_below_percent`). A GPU a job holds is charged to the job even while an alert
  asks for action; the interruption counts show those.
- down: GPU-hours of GPUs that stopped reporting, and of GPUs no job holds while a health alert with an action
  fires on them.
- unallocated: the rest: GPUs reporting, healthy, that no job holds.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpudash.health.published_rates import LLAMA3_GPU_DAYS, LLAMA3_INTERRUPTIONS, LLAMA3_RATE
from gpudash.health.xid import XID_TABLE
from gpudash.report.collect import Totals

__all__ = ["LLAMA3_GPU_DAYS", "LLAMA3_INTERRUPTIONS", "LLAMA3_RATE"]
UNKNOWN_TEAM = "(unknown)"
TOP = 10
HOUR = 3600.0


@dataclass(frozen=True)
class TeamRow:
    team: str
    busy_h: float
    idle_h: float
    jobs: int

    @property
    def held_h(self) -> float:
        return self.busy_h + self.idle_h


@dataclass(frozen=True)
class IdleHolder:
    cluster: str
    job: str
    team: str
    user: str
    idle_h: float
    held_h: float


@dataclass(frozen=True)
class GpuInterruptions:
    gpu: str  # the UUID, or cluster/instance/gpu where the alert carries none
    count: int
    classes: str


@dataclass(frozen=True)
class Report:
    start: float
    end: float
    step_s: int
    team_label: str
    fleet_gpus: int
    capacity_h: float
    teams: tuple[TeamRow, ...]
    not_reporting_h: float
    alert_unheld_h: float
    unallocated_h: float
    utilization_h: float
    goodput_h: float
    interruptions: tuple[tuple[str, int], ...]  # (class, count), most first
    top_idle: tuple[IdleHolder, ...]
    top_gpus: tuple[GpuInterruptions, ...]

    @property
    def down_h(self) -> float:
        return self.not_reporting_h + self.alert_unheld_h

    @property
    def held_h(self) -> float:
        return sum(row.held_h for row in self.teams)

    @property
    def gpu_days(self) -> float:
        return self.capacity_h / 24

    @property
    def interruption_count(self) -> int:
        return sum(count for _, count in self.interruptions)

    @property
    def interruption_rate(self) -> float:
        """Interruptions per 1,000 GPU-days of the fleet."""
        return self.interruption_count / self.gpu_days * 1000 if self.gpu_days else 0.0

    def categories(self) -> tuple[tuple[str, str, float], ...]:
        """(team, category, GPU-hours) for every team's busy and idle, then the fleet's down and unallocated."""
        rows = [(row.team, category, hours) for row in self.teams
                for category, hours in (("busy", row.busy_h), ("idle", row.idle_h))]
        return (*rows, ("(fleet)", "down", self.down_h), ("(fleet)", "unallocated", self.unallocated_h))


def interruption_class(labels: dict[str, str]) -> str:
    """An XID alert's class from the XID table (`XID hardware`), any other health alert's name."""
    if labels.get("alertname") == "GPUXidError":
        code = labels.get("xid", "")
        known = XID_TABLE.get(int(code)) if code.isdigit() else None
        return f"XID {known.cls}" if known else "XID unclassified"
    return labels.get("alertname", "?")


def build_report(totals: Totals, *, start: float, step_s: int, team_label: str, job_label: str) -> Report:
    span = totals.steps * step_s
    fleet = round(sum(totals.fleet_gpus.values()))
    capacity = fleet * span
    teams: dict[str, list[float]] = {}
    holders: list[IdleHolder] = []
    for key, held in totals.held.items():
        idle = min(totals.idle.get(key, 0.0), held)
        info = totals.info.get(key, {})
        team = key[1] if team_label == job_label else info.get(team_label) or UNKNOWN_TEAM
        row = teams.setdefault(team, [0.0, 0.0, 0])
        row[0], row[1], row[2] = row[0] + held - idle, row[1] + idle, row[2] + 1
        holders.append(IdleHolder(key[0], key[1], team, info.get("user", ""), idle / HOUR, held / HOUR))
    held_total = sum(totals.held.values())
    episodes: dict[str, int] = {}
    per_gpu: dict[str, dict[str, int]] = {}
    for series, count in totals.episodes.items():
        labels = dict(series)
        cls = interruption_class(labels)
        episodes[cls] = episodes.get(cls, 0) + count
        gpu = labels.get("UUID") or "/".join(labels.get(n, "") for n in ("cluster", "instance", "gpu"))
        mine = per_gpu.setdefault(gpu, {})
        mine[cls] = mine.get(cls, 0) + count
    not_reporting = max(capacity - totals.reporting, 0.0)
    unallocated = max(totals.reporting - held_total - totals.alert_unheld, 0.0)
    return Report(
        start=float(int(start)), end=float(int(start) + span), step_s=step_s, team_label=team_label,
        fleet_gpus=fleet, capacity_h=capacity / HOUR,
        teams=tuple(TeamRow(team, busy / HOUR, idle / HOUR, int(jobs))
                    for team, (busy, idle, jobs) in sorted(teams.items(), key=lambda kv: -(kv[1][0] + kv[1][1]))),
        not_reporting_h=not_reporting / HOUR, alert_unheld_h=totals.alert_unheld / HOUR,
        unallocated_h=unallocated / HOUR, utilization_h=totals.utilization / HOUR, goodput_h=totals.goodput / HOUR,
        interruptions=tuple(sorted(episodes.items(), key=lambda kv: (-kv[1], kv[0]))),
        top_idle=tuple(sorted(holders, key=lambda h: (-h.idle_h, h.cluster, h.job))[:TOP]),
        top_gpus=tuple(GpuInterruptions(gpu, sum(by.values()), ", ".join(f"{c} {n}" for c, n in sorted(by.items())))
                       for gpu, by in sorted(per_gpu.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))[:TOP]),
    )
