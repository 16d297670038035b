"""What doctor says about one link of the chain: a verdict, what was seen, why it matters and what fixes it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Verdict(str, Enum):
    OK = "ok"
    FAIL = "FAIL"  # the link is broken: doctor exits 1
    HINT = "hint"  # evidence worth a look that breaks nothing (a pending alert, a throttled GPU)


class Link(str, Enum):
    """The links, in the order data flows through them."""

    EXPORTER = "exporter"
    TARGETS = "targets"
    LABELS = "labels"
    RULES = "rules"
    ALERTING = "alerting"
    GRAFANA = "grafana"
    PHYSICS = "physics"


@dataclass(frozen=True)
class Finding:
    link: Link
    verdict: Verdict
    subject: str  # what was looked at: an exporter's address, a rule group, a data source uid
    what: str  # what doctor saw
    why: str = ""  # the likely cause, for a failure or a hint
    fix: str = ""  # the command or config line that repairs it

    @property
    def failed(self) -> bool:
        return self.verdict is Verdict.FAIL


def ok(link: Link, subject: str, what: str) -> Finding:
    return Finding(link, Verdict.OK, subject, what)


def fail(link: Link, subject: str, what: str, why: str = "", fix: str = "") -> Finding:
    return Finding(link, Verdict.FAIL, subject, what, why, fix)


def hint(link: Link, subject: str, what: str, why: str = "", fix: str = "") -> Finding:
    return Finding(link, Verdict.HINT, subject, what, why, fix)


def count(n: int, word: str) -> str:
    """`1 GPU`, `3 GPUs`: a count with its noun."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def listed(items: list[str] | tuple[str, ...], limit: int = 4) -> str:
    """`a, b, c and 2 more`: a list short enough for one line."""
    shown = ", ".join(items[:limit])
    return f"{shown} and {len(items) - limit} more" if len(items) > limit else shown

