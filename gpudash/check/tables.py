"""What `gpudash check` (and the demo) print: a table per dashboard or rule file, a summary line, JSON."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence

from gpudash.check.judge import GroupResult, Result, Status
from gpudash.check.queries import RULES_PREFIX, one_line
from gpudash.redaction import split_userinfo

EXPR_WIDTH = 64


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def render_table(result: GroupResult, wide: bool = False) -> str:
    group = result.group
    span = f", range {group.range_s // 3600}h" if group.range_s and group.range_s % 3600 == 0 else ""
    lines = [f"{group.title}  ({group.origin}: {len(group.queries)} queries{span})"]
    name_width = min(34, max([5, *(len(item_name(r)) for r in result.results)]))
    first = "RULE" if group.title.startswith(RULES_PREFIX) else "PANEL"
    rows = [(first, "EXPRESSION", "SERIES", "RESULT")]
    for r in result.results:
        expr = one_line(r.query.expr)
        result_text = r.status.value + (f": {r.detail}" if r.detail else "")
        rows.append((_cut(item_name(r), name_width), expr if wide else _cut(expr, EXPR_WIDTH), str(r.series),
                     result_text))
    expr_width = max(len(row[1]) for row in rows)
    for item, expr, series, text in rows:
        lines.append(f"  {item:<{name_width}}  {expr:<{expr_width}}  {series:>6}  {text}")
    return "\n".join(lines)


def item_name(r: Result) -> str:
    """The panel or rule name, with the query's refId when a panel has more than one."""
    return f"{r.query.item} [{r.query.ref}]" if r.query.ref and r.query.ref != "A" else r.query.item


def summary(results: Sequence[GroupResult], url: str) -> str:
    counts = Counter(r.status for g in results for r in g.results)
    late = counts.pop(Status.AFTER_DEADLINE, 0)
    total = sum(counts.values())
    parts = [f"{counts[s]} {s.value.lower()}" for s in Status if counts[s] and not s.failed]
    bad = sum(counts[s] for s in Status if s.failed)
    shown = split_userinfo(url).url  # credentials in the URL log in; they are never printed
    text = f"checked {total} queries against {shown}: {', '.join(parts) or 'none passed'}; {bad} failed"
    return text + (f"; {late} not checked before the deadline" if late else "")


def as_json(results: Sequence[GroupResult]) -> str:
    return json.dumps([
        {"title": g.group.title, "origin": g.group.origin, "results": [
            {"item": r.query.item, "ref": r.query.ref, "kind": r.query.kind, "expr": r.query.expr,
             "series": r.series, "status": r.status.name.lower(), "detail": r.detail} for r in g.results]}
        for g in results
    ], indent=2)
