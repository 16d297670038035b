"""Each escaping function against a small parser of its language: arbitrary text must read back unchanged.

The parsers follow the real ones closely enough to catch a wrong escape: Prometheus' string lexer and Go's
strconv.Unquote, RE2 literal syntax, Alertmanager 0.25's ParseMatchers/ParseMatcher (ported line by line),
Go's text/template lexer for text and string-literal actions, and PyYAML for YAML.
"""

from __future__ import annotations

import ast
import re

import pytest
import yaml
from hypothesis import example, given
from hypothesis import strategies as st
from support.languages import (
    am_parse_matchers,
    parse_promql_string,
    parse_re2_literal,
    read_go_string,
    render_go_template,
)

from gpudash.escape import (
    am_matcher,
    go_template_text,
    log_quote,
    promql_matcher,
    promql_regex,
    promql_string,
    re2_any,
    yaml_scalar,
)
from gpudash.yamltext import dump

TRICKY = ['a"b', "a\\", '\\"', 'x", severity="critical', 'gpu-exporter"} or vector(1) #', "{{ .Foo }}", "a{",
          "}}", "a\nb", "\r\t\x00\x7f\x85\u2028\ufeff\ufffd", "a,b", "é😀", "", " ", "{", "\\n", ".*", "|"]


# -- Go string literals, as Prometheus' lexer and strconv.Unquote read them -----------------------------

@given(st.text())
@example("\ufffd")
def test_promql_string_round_trips(text: str) -> None:
    assert parse_promql_string(promql_string(text)) == text


# -- RE2: a pattern that is only literal characters ----------------------------------------------------

@given(st.text())
def test_promql_regex_is_the_literal_text(text: str) -> None:
    pattern = parse_promql_string(promql_regex(text))
    assert parse_re2_literal(pattern) == text
    assert re.fullmatch(pattern, text, re.DOTALL)
    assert not re.fullmatch(pattern, text + "x", re.DOTALL)


@given(st.lists(st.text(), min_size=1), st.text())
def test_re2_any_matches_exactly_the_texts_given(texts: list[str], other: str) -> None:
    pattern = parse_promql_string(promql_string(re2_any(texts)))
    assert all(re.fullmatch(pattern, t, re.DOTALL) for t in texts)
    assert [parse_re2_literal(p) for p in pattern_alternatives(pattern)] == texts
    assert (re.fullmatch(pattern, other, re.DOTALL) is not None) == (other in texts)


def pattern_alternatives(pattern: str) -> list[str]:
    """Split a pattern at its top-level `|` (an escaped `\\|` is a literal)."""
    parts, current, i = [], "", 0
    while i < len(pattern):
        if pattern[i] == "\\":
            current += pattern[i:i + 2]
            i += 2
        elif pattern[i] == "|":
            parts.append(current)
            current, i = "", i + 1
        else:
            current += pattern[i]
            i += 1
    return [*parts, current]


@given(st.text())
def test_promql_matcher_quotes_the_value(text: str) -> None:
    matcher = promql_matcher("job", "=", text)
    assert matcher.startswith('job="') and parse_promql_string(matcher[4:]) == text


def test_matcher_labels_and_operators_come_from_code() -> None:
    with pytest.raises(ValueError):
        promql_matcher('job="x"', "=", "y")
    with pytest.raises(ValueError):
        am_matcher("job", "y", "==")


# -- Alertmanager 0.25: pkg/labels/parse.go, ParseMatchers and ParseMatcher -----------------------------

@given(st.text(), st.text())
@example('x", severity="critical', "y")
@example("\ufffd\r\x00", "\\")
def test_alertmanager_matcher_round_trips(first: str, second: str) -> None:
    assert am_parse_matchers(am_matcher("cluster", first)) == [("cluster", "=", first)]
    pair = f"{am_matcher('cluster', first)}, {am_matcher('severity', second, '=~')}"
    assert am_parse_matchers(pair) == [("cluster", "=", first), ("severity", "=~", second)]
    # Alertmanager 0.27's parser reads the quoted part as a Go string literal.
    assert read_go_string(am_matcher("cluster", first)[len("cluster="):], promql=False) == (first, "")


# -- Go text/template: text, and actions that print a string literal -----------------------------------

@given(st.text(), st.text())
@example("a{", "{")
def test_go_template_text_prints_the_text(text: str, after: str) -> None:
    template = f"job {go_template_text(text)}{go_template_text(after)} on {{{{ $labels.instance }}}}"
    assert render_go_template(template, {"$labels.instance": "h:9400"}) == f"job {text}{after} on h:9400"


def test_text_without_braces_stays_readable() -> None:
    assert go_template_text("https://runbooks.example/gpu#gpuexporterdown") == \
        "https://runbooks.example/gpu#gpuexporterdown"
    assert go_template_text("{{ .x }}") == '{{ "{{ .x }}" }}'


# -- YAML ----------------------------------------------------------------------------------------------

@given(st.text())
def test_yaml_scalar_round_trips_on_one_line(text: str) -> None:
    scalar = yaml_scalar(text)
    assert "\n" not in scalar
    assert yaml.safe_load(f"name: {scalar}\n") == {"name": text}


@given(st.text())
def test_generated_files_dumper_round_trips(text: str) -> None:
    assert yaml.safe_load(dump({"expr": text, "list": [text]})) == {"expr": text, "list": [text]}


@pytest.mark.parametrize("text", TRICKY)
def test_tricky_strings(text: str) -> None:
    assert parse_promql_string(promql_string(text)) == text
    assert am_parse_matchers(am_matcher("cluster", text)) == [("cluster", "=", text)]
    assert render_go_template(go_template_text(text), {}) == text
    assert yaml.safe_load(f"k: {yaml_scalar(text)}") == {"k": text}


# -- the log ----------------------------------------------------------------------------------------------

@given(st.one_of(st.text(), st.binary()), st.integers(min_value=12, max_value=200))
@example(bytes(range(256)) * 40, 100)
@example("\x1b[2J\u202e" * 50, 20)
def test_log_quote_is_one_printable_line_within_its_limit_and_a_repr_of_the_start(
        value: str | bytes, limit: int) -> None:
    quoted = log_quote(value, limit)
    assert len(quoted) <= limit and quoted.isprintable()
    shown = quoted.removesuffix("...") if len(repr(value)) > limit else quoted
    start = ast.literal_eval(shown)
    assert shown == repr(start) and value.startswith(start)  # the value's start, escaped as repr escapes it
