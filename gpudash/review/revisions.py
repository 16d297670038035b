"""What changes between two sets of dashboards (two revisions, or a revision and the working tree): pure.

The panel-level summary is the one `gpudash diff` prints against Grafana (gpudash.compare.diffing), so a
reviewer reads the same lines whichever two sides are compared.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpudash.compare.content import same_content
from gpudash.compare.diffing import headline, summarize


@dataclass(frozen=True)
class Comparison:
    lines: tuple[str, ...]
    differ: int  # dashboards added, removed or changed
    total: int  # dashboards on either side


def _label(name: str, dashboard: Mapping[str, Any]) -> str:
    return f"{name} {str(dashboard.get('title', ''))!r}"


def compare(before: Mapping[str, dict[str, Any]], after: Mapping[str, dict[str, Any]]) -> Comparison:
    """Per dashboard file (by name): added, removed, or its headline and summary lines; equal ones are left out."""
    lines: list[str] = []
    differ = 0
    names = sorted(set(before) | set(after))
    for name in names:
        old, new = before.get(name), after.get(name)
        if old is None and new is not None:
            lines.append(f"added       {_label(name, new)}: {len(new.get('panels') or [])} panels")
        elif new is None and old is not None:
            lines.append(f"removed     {_label(name, old)}")
        elif old is not None and new is not None and not same_content(old, new):
            lines.append(f"differs     {_label(name, new)}: {headline(old, new)}")
            lines += summarize(old, new)
        else:
            continue
        differ += 1
    return Comparison(tuple(lines), differ, len(names))
