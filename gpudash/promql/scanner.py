"""Just enough PromQL reading to tell which series an expression reads: the one scanner of expressions.

Not a parser: Prometheus itself says whether an expression parses. This finds the vector selectors an
expression reads (the builders map their names to catalog signals; the live check asks each on its own
whether it has series), whether it filters with a comparison (so "nothing passes the filter now" is not
mistaken for "no data"), and its `offset`s (so "this needs a day of history" is not mistaken for "broken").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TOKEN = re.compile(
    r"""(?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
      |(?P<braces>\{(?:[^}"']|"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')*\})
      |(?P<range>\[[^\]]*\])
      |(?P<variable>\$\{[^}]*\}|\$[a-zA-Z0-9_]+)
      |(?P<ident>[a-zA-Z_:][a-zA-Z0-9_:]*)
      |(?P<number>[0-9][0-9a-zA-Z.]*)
      |(?P<compare>==|!=|>=|<=|>|<)
      |(?P<other>\S)""",
    re.VERBOSE,
)
# Words that are never metric names; those followed by a parenthesised label list come first.
_LABEL_LIST_WORDS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
_KEYWORDS = _LABEL_LIST_WORDS | {"offset", "bool", "and", "or", "unless", "atan2", "inf", "nan", "Inf", "NaN"}
_OFFSET = re.compile(r"\s+offset\s+-?[0-9][0-9a-zA-Z]*")


@dataclass(frozen=True)
class Selector:
    name: str  # "" for a selector by matchers only
    matchers: str  # "{...}" as written, or ""

    def __str__(self) -> str:
        return f"{self.name}{self.matchers}" if self.name or self.matchers else ""


def _tokens(expr: str) -> list[tuple[str, str]]:
    return [(m.lastgroup or "other", m.group(0)) for m in _TOKEN.finditer(expr)]


def selectors(expr: str) -> list[Selector]:
    """The vector selectors of an expression, in order, without duplicates (ranges and offsets dropped)."""
    tokens = _tokens(expr)
    found: list[Selector] = []
    i = 0
    while i < len(tokens):
        kind, text = tokens[i]
        nxt = tokens[i + 1] if i + 1 < len(tokens) else ("", "")
        if kind == "ident" and text in _LABEL_LIST_WORDS and nxt[1] == "(":
            while i < len(tokens) and tokens[i][1] != ")":  # skip the label list
                i += 1
        elif kind == "ident" and text not in _KEYWORDS and nxt[1] != "(" and nxt[1] not in ("by", "without"):
            matchers = nxt[1] if nxt[0] == "braces" else ""
            found.append(Selector(text, matchers))
            i += 1 if matchers else 0
        elif kind == "braces":
            found.append(Selector("", text))
        i += 1
    return list(dict.fromkeys(found))


def metric_names(expr: str) -> list[str]:
    """The metric names an expression reads, in order, without duplicates (selectors by matchers only left out)."""
    return list(dict.fromkeys(sel.name for sel in selectors(expr) if sel.name))


def filters(expr: str) -> bool:
    """True when the expression drops series by a comparison (`> 0`, `== 1`), not a `bool` comparison."""
    tokens = _tokens(expr)
    return any(kind == "compare" and (i + 1 >= len(tokens) or tokens[i + 1][1] != "bool")
               for i, (kind, _) in enumerate(tokens))


def offsets(expr: str) -> list[str]:
    """The `offset` durations of an expression, e.g. ["1d"]."""
    tokens = _tokens(expr)
    return [tokens[i + 1][1] for i, (kind, text) in enumerate(tokens[:-1]) if kind == "ident" and text == "offset"]


def without_offsets(expr: str) -> str:
    return _OFFSET.sub("", expr)


_WINDOW = re.compile(r"\[\s*[0-9][0-9a-zA-Z]*\s*\]")


def windows(expr: str) -> list[str]:
    """The range-vector windows of an expression, e.g. ["[4s]"] (subqueries left out)."""
    return _WINDOW.findall(expr)


def widened(expr: str, seconds: int) -> str:
    """The expression with every range-vector window made `seconds` long."""
    return _WINDOW.sub(f"[{seconds}s]", expr)


_SUBQUERY_STEP = re.compile(r"\[\s*[0-9][0-9a-zA-Z]*\s*:\s*([0-9][0-9a-zA-Z]*)\s*\]")


def subquery_steps(expr: str) -> list[str]:
    """The explicit steps of an expression's subqueries, e.g. ["15s"] for `x[1h:15s]`."""
    return _SUBQUERY_STEP.findall(expr)
