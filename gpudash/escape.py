"""One escaping function per output language, for every configured string that reaches a generated file.

A site string (cluster name, rack, scrape job, runbook URL, receiver option ...) is data, never syntax: each
function below turns arbitrary text into a token of its language that reads back as exactly that text.

- `promql_string`: a PromQL string literal, for `label="..."` (Prometheus' lexer, then Go's strconv.Unquote).
- `promql_matcher` with `re2_any` (or `re2_literal`): an `=~` matcher for exactly the texts given;
  `promql_regex` is the same as one string literal.
- `yaml_scalar`: a one-line YAML scalar, for the few lines of YAML written as text.
- `am_matcher`: an Alertmanager matcher `label="value"` (0.25's parser; also valid for the 0.27+ parser).
- `label_value`: a label value inside double quotes in the exposition format and in Alertmanager matchers.
- `go_template_text`: text inside a Go template (Prometheus annotations, Alertmanager notifier fields).

And one for the log: `log_quote`, untrusted text (a file's name or content) in a log line, escaped and cut short.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from collections.abc import Iterable

import yaml

# Go's regexp.QuoteMeta set: outside these, every character of an RE2 pattern stands for itself.
_RE2_SPECIAL = re.compile(r"([\\.+*?()|\[\]{}^$])")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_MATCH_OPS = ("=", "!=", "=~", "!~")


def _go_escape(char: str) -> str:
    """A Go string escape for one character that must not appear raw inside "..."."""
    if char in '"\\':
        return "\\" + char
    if char == "\n":
        return "\\n"
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _needs_go_escape(char: str) -> bool:
    # Prometheus' lexer rejects a raw newline and reads a raw U+FFFD as invalid UTF-8; control characters
    # and lone surrogates are escaped too, so the literal stays printable.
    return char in '"\\\ufffd' or unicodedata.category(char) in ("Cc", "Cs")


def go_string(text: str) -> str:
    """A double-quoted Go string literal (strconv.Unquote gives `text` back)."""
    return '"' + "".join(_go_escape(c) if _needs_go_escape(c) else c for c in text) + '"'


def promql_string(text: str) -> str:
    """A PromQL string literal, quotes included: `a"b` -> `"a\\"b"`."""
    return go_string(text)


def re2_literal(text: str) -> str:
    """An RE2 pattern matching exactly `text`: Go's regexp.QuoteMeta."""
    return _RE2_SPECIAL.sub(r"\\\1", text)


def re2_any(texts: Iterable[str]) -> str:
    """An RE2 pattern matching exactly one of `texts`, for an `=~` matcher (which goes through promql_string)."""
    return "|".join(re2_literal(t) for t in texts)


def promql_regex(text: str) -> str:
    """A PromQL string literal of an RE2 regex matching exactly `text` (Prometheus anchors it)."""
    return promql_string(re2_literal(text))


def promql_matcher(label: str, op: str, value: str) -> str:
    """`label<op>"value"`; the value goes through `promql_string` as it is (a regex for =~ and !~)."""
    _check_matcher(label, op)
    return f"{label}{op}{promql_string(value)}"


def am_matcher(label: str, value: str, op: str = "=") -> str:
    """An Alertmanager matcher such as `cluster="a\\"b"`.

    Alertmanager 0.25 unescapes only `\\\\`, `\\"` and `\\n` inside the quotes (any other character is itself),
    and 0.27's parser reads the quotes as a Go string: escaping just those three is right for both.
    """
    _check_matcher(label, op)
    return f'{label}{op}"{label_value(value)}"'


def label_value(text: str) -> str:
    """The text between the quotes of a label value: `\\`, `"` and a line break escaped, nothing else.

    What the Prometheus exposition format and Alertmanager's matchers both read back as exactly `text`.
    """
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def go_template_text(text: str) -> str:
    """`text` as Go template text that prints exactly `text`.

    Text without `{` cannot start an action, so it stays as it is (and generated files stay readable);
    anything else is printed from a template string literal: `{{ "a {{ b" }}`.
    """
    if "{" not in text:
        return text
    return "{{ " + go_string(text) + " }}"


def log_quote(value: str | bytes, limit: int = 100) -> str:
    """`value` as Python's repr writes it (control characters, escape sequences and undecodable bytes escaped,
    so it cannot forge a log line or drive a terminal), at most `limit` characters, then `...` if cut."""
    quoted = repr(value)
    if len(quoted) <= limit:
        return quoted
    low, high = 0, min(len(value), limit)  # the longest start whose repr fits: an escape spans up to 10 characters
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if len(repr(value[:middle])) <= limit - 3 else (low, middle - 1)
    return repr(value[:low]) + "..."


# YAML 1.1 line breaks besides \n: PyYAML writes them raw outside double quotes, and reads them back as a space.
_UNICODE_BREAKS = re.compile("[\r\x85\u2028\u2029]")


def yaml_style(text: str) -> str | None:
    """The scalar style of generated YAML: a literal block for multi-line text (long PromQL), double quotes
    where PyYAML's own choice would not read back, else PyYAML's own choice (None)."""
    if _UNICODE_BREAKS.search(text):
        return '"'
    return "|" if "\n" in text else None


def yaml_scalar(text: str) -> str:
    """A YAML scalar on one line that loads back as the string `text`: plain when it can be, else quoted."""
    # Dumped as a mapping's value, so PyYAML picks the style it would pick inside a generated file; any style
    # other than its own (a line break in the text) falls back to double quotes, which read back exactly.
    out: str = yaml.dump({"k": text}, Dumper=yaml.SafeDumper, width=sys.maxsize, allow_unicode=True,
                         default_style='"' if yaml_style(text) else None)
    return out[out.index(": ") + 2:-1]


def _check_matcher(label: str, op: str) -> None:
    # Label names and operators come from code, never from a config file: a bad one is a bug.
    if not _LABEL_NAME.fullmatch(label) or op not in _MATCH_OPS:
        raise ValueError(f"not a label matcher: {label!r} {op!r}")
