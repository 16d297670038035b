"""Small parsers of the languages gpudash writes, for tests: each reads what the real one would.

- Go string literals as Prometheus' lexer and Go's strconv.Unquote read them (PromQL strings, template
  string literals, Alertmanager 0.27's quoted matcher values);
- RE2 patterns made only of literal characters;
- Alertmanager 0.25's ParseMatchers / ParseMatcher (pkg/labels/parse.go), ported line by line;
- Go text/template: text, actions and string-literal actions;
- PromQL's code outside string literals, to compare the shape of two expressions.
"""

from __future__ import annotations

import re

_SIMPLE = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\", '"': '"'}


def read_go_string(text: str, promql: bool = True) -> tuple[str, str]:
    """Read one double-quoted literal at the start of `text`; return (value, rest).

    Go refuses a raw newline; Prometheus' lexer also reads a raw U+FFFD as invalid UTF-8.
    """
    assert text[0] == '"', text
    out, i = [], 1
    while True:
        char = text[i]
        if char == '"':
            return "".join(out), text[i + 1:]
        assert char != "\n" and not (promql and char == "\ufffd"), f"raw {char!r} in a string literal"
        if char != "\\":
            out.append(char)
            i += 1
            continue
        kind = text[i + 1]
        if kind in _SIMPLE:
            out.append(_SIMPLE[kind])
            i += 2
        elif kind in "uU":
            width = 4 if kind == "u" else 8
            digits = text[i + 2:i + 2 + width]
            assert re.fullmatch(r"[0-9a-fA-F]+", digits) and len(digits) == width, text
            out.append(chr(int(digits, 16)))
            i += 2 + width
        else:
            raise AssertionError(f"escape \\{kind} in {text!r}")


def parse_promql_string(literal: str) -> str:
    value, rest = read_go_string(literal)
    assert rest == "", f"the literal ends early: {literal!r}"
    return value


_RE2_META = set("\\.+*?()|[]{}^$")


def parse_re2_literal(pattern: str) -> str:
    """The text an RE2 pattern matches when it is made of literals only; fail on any operator."""
    out, i = [], 0
    while i < len(pattern):
        if pattern[i] == "\\":
            escaped = pattern[i + 1]
            assert escaped.isascii() and not escaped.isalnum(), f"\\{escaped} is not a literal in RE2"
            out.append(escaped)
            i += 2
        else:
            assert pattern[i] not in _RE2_META, f"operator {pattern[i]!r} in {pattern!r}"
            out.append(pattern[i])
            i += 1
    return "".join(out)


_AM_MATCHER = re.compile(r"^\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(=~|=|!=|!~)\s*(.*?)\s*$", re.DOTALL)
_GO_SPACE = " \t\n\f\r\v"  # \s in Go's RE2 is ASCII whitespace


def am_parse_matcher(text: str) -> tuple[str, str, str]:
    found = _AM_MATCHER.fullmatch(text)
    assert found, f"bad matcher format: {text!r}"
    raw, expect_quote = found.group(3), False
    if raw.startswith('"'):
        raw, expect_quote = raw[1:], True
    value: list[str] = []
    escaped = False
    for i, char in enumerate(raw):
        if escaped:
            escaped = False
            value.append({"n": "\n", '"': '"', "\\": "\\"}.get(char, "\\" + char))
            continue
        if char == "\\":
            if i < len(raw) - 1:
                escaped = True
                continue
            value.append("\\")
        elif char == '"':
            assert expect_quote and i == len(raw) - 1, f"unescaped double quote in {text!r}"
            expect_quote = False
        else:
            value.append(char)
    assert not expect_quote, f"unescaped double quote in {text!r}"
    return found.group(1), found.group(2), "".join(value)


def am_parse_matchers(text: str) -> list[tuple[str, str, str]]:
    text = text.removeprefix("{").removesuffix("}")
    tokens, token, inside, escaped = [], [], False, False
    for char in text:
        if char == "," and not inside:
            tokens.append("".join(token))
            token = []
            continue
        if char == '"':
            if not escaped:
                inside = not inside
            else:
                escaped = False
        elif char == "\\":
            escaped = not escaped
        else:
            escaped = False
        token.append(char)
    last = "".join(token).strip(_GO_SPACE)
    if last:
        tokens.append(last)
    return [am_parse_matcher(t) for t in tokens]


def template_tokens(template: str) -> list[tuple[str, str]]:
    """A Go template as ("text", text) and ("action", body) tokens; an action is read past its string literals."""
    tokens = []
    while (start := template.find("{{")) >= 0:
        tokens.append(("text", template[:start]))
        body, i = template[start + 2:], 0
        assert not body.startswith(("-", "/*")), f"trim marker or comment in {template!r}"
        while not body.startswith("}}", i):
            assert i < len(body), f"unterminated action in {template!r}"
            if body[i] == '"':
                _, rest = read_go_string(body[i:], promql=False)
                i = len(body) - len(rest)
            else:
                i += 1
        tokens.append(("action", body[:i].strip()))
        template = body[i + 2:]
    tokens.append(("text", template))
    return tokens


def template_actions(template: str) -> list[str]:
    """The bodies of a Go template's actions."""
    return [body for kind, body in template_tokens(template) if kind == "action"]


def render_go_template(template: str, values: dict[str, str]) -> str:
    """Render text, `{{ "literal" }}`, `{{ $name }}` and `{{ if $name }}..{{ else }}..{{ end }}` as text/template
    would (an empty value is false)."""
    out: list[str] = []
    active, stack = True, []
    for kind, body in template_tokens(template):
        if kind == "text" or body.startswith('"'):
            text = body if kind == "text" else read_go_string(body, promql=False)[0]
            assert kind == "text" or read_go_string(body, promql=False)[1] == "", f"not one literal: {body!r}"
            out.append(text if active else "")
        elif body.startswith("if "):
            condition = bool(values[body[3:].strip()])
            stack.append((active, condition))
            active = active and condition
        elif body == "else":
            active = stack[-1][0] and not stack[-1][1]
        elif body == "end":
            active = stack.pop()[0]
        else:
            out.append(values[body] if active else "")
    assert not stack, f"unclosed if in {template!r}"
    return "".join(out)


def is_string_action(action: str) -> bool:
    """An action that only prints one string literal."""
    return action.startswith('"') and read_go_string(action)[1] == ""


def promql_code(expr: str) -> str:
    """The expression with every string literal's content dropped: what is syntax, not data."""
    out, i = [], 0
    while i < len(expr):
        if expr[i] == '"':
            _, rest = read_go_string(expr[i:])
            out.append('""')
            i = len(expr) - len(rest)
        else:
            out.append(expr[i])
            i += 1
    return "".join(out)
