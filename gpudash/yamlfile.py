"""Reading a YAML file a person wrote: safe types only, YAML 1.2 scalars, no duplicate keys, no anchors or aliases,
and bounds on size, nesting and number length.

PyYAML's `safe_load` keeps the last of two equal keys without a word (a second `memory:` section silently
replaces the first) and expands aliases wherever the loaded data is walked, so a few lines of
`&a [*b, *b, ...]` become billions of items in the code that reads them. Config files need neither, so
both are refused with the file, line and column.

PyYAML also reads scalars as YAML 1.1 does: `1:30` is the number 90 (base 60), `on`, `off`, `yes` and `no` are
booleans, `1_000` is 1000 and `017` is octal. Prometheus, Alertmanager and Kubernetes read YAML 1.2, and so does
this loader (its core schema): only `true`/`false` are booleans, integers are decimal, `0o17` or `0x1F`, and
everything else that is not a plain number (`1:30`, `on`, `1_000`, `2026-01-01`) stays text, which the config
readers then refuse by key ("expected a whole number ..., got '1:30'").

A file over MAX_FILE_BYTES (1 MiB; PyYAML takes minutes over 12 MB), nesting deeper than MAX_DEPTH levels
(PyYAML composes recursively) and an integer of more than MAX_DIGITS digits (Python refuses to convert a few
thousand) are refused with one line each, never a traceback. The exporter reads its web-config through this
module too, so it imports nothing but PyYAML.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import yaml

MAX_FILE_BYTES = 1 << 20  # 1 MiB: the bundled thresholds.yaml is 10 KiB
MAX_DEPTH = 64  # sections within sections; thresholds.yaml nests 4 deep (alerts.xid.overrides)
MAX_DIGITS = 100  # far above any count, limit or port a config holds (2^64 has 20 digits)


class YamlError(ValueError):
    """The text is not acceptable YAML; the message says where (line and column) and why, on one line."""


# YAML 1.2's core schema (yaml.org/spec/1.2.2, 10.3.2): the plain scalars that are not text, each with the first
# characters PyYAML looks it up by ("" is the empty scalar).
_NULL = re.compile(r"(?:~|null|Null|NULL|)\Z")
_BOOL = re.compile(r"(?:true|True|TRUE|false|False|FALSE)\Z")
_INT = re.compile(r"(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)\Z")
_FLOAT = re.compile(r"(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))\Z")
_CORE_SCHEMA = (("null", _NULL, ["~", "n", "N", ""]), ("bool", _BOOL, list("tTfF")),
                ("int", _INT, list("-+0123456789")), ("float", _FLOAT, list("-+0123456789.")))  # int before float


class _StrictLoader(yaml.SafeLoader):
    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            raise YamlError(f"{_where(event.start_mark)}aliases (*{event.anchor}) are not accepted in a config file")
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            raise YamlError(f"{_where(event.start_mark)}anchors (&{anchor}) are not accepted in a config file")
        if self._depth >= MAX_DEPTH:
            raise YamlError(f"{_where(event.start_mark)}nested more than {MAX_DEPTH} levels deep")
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:
                raise YamlError(f"{_where(key_node.start_mark)}a mapping key must be a plain value") from None
            if first is not None:
                raise YamlError(f"{_where(key_node.start_mark)}duplicate key {key!r} "
                                f"(first at line {first.line + 1})")
            seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)

    # The constructors also serve explicit tags (`!!int 1:30`), so each checks its text against the schema.
    def construct_yaml_bool(self, node: yaml.ScalarNode) -> bool:
        text = self._scalar(node, _BOOL, "true or false")
        return text.lower() == "true"

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        text = self._scalar(node, _INT, "a whole number")
        sign, digits = (-1, text[1:]) if text[0] == "-" else (1, text.lstrip("+"))
        base = {"0o": 8, "0x": 16}.get(digits[:2], 10)
        digits = digits[2:] if base != 10 else digits
        if len(digits) > MAX_DIGITS:
            raise YamlError(f"{_where(node.start_mark)}a whole number of {len(digits)} digits; a config file "
                            f"holds at most {MAX_DIGITS}")
        return sign * int(digits, base)

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float:
        text = self._scalar(node, _FLOAT, "a number")
        if text.lstrip("+-").lower() == ".inf":
            return -math.inf if text[0] == "-" else math.inf
        return math.nan if text.lower() == ".nan" else float(text)

    def _scalar(self, node: yaml.ScalarNode, form: re.Pattern[str], what: str) -> str:
        text = str(self.construct_scalar(node))
        if not form.match(text):
            raise YamlError(f"{_where(node.start_mark)}expected {what} (YAML 1.2), got {text!r}")
        return text


_StrictLoader.yaml_implicit_resolvers = {}  # SafeLoader's YAML 1.1 ones replaced by the core schema's only
for _tag, _form, _first in _CORE_SCHEMA:
    _StrictLoader.add_implicit_resolver(f"tag:yaml.org,2002:{_tag}", _form, _first)
for _tag in ("bool", "int", "float"):
    _StrictLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", getattr(_StrictLoader, f"construct_yaml_{_tag}"))


def _where(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""


def parse_yaml(text: str) -> Any:
    """Parse YAML text strictly; raise YamlError with line, column and the problem."""
    try:
        return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass: safe types only
    except YamlError:
        raise
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise YamlError(f"{_where(mark)}invalid YAML: {problem}") from None


def read_config_text(path: Path) -> str:
    """The text of one config file (YAML or CSV) of at most MAX_FILE_BYTES, read no further than that.
    OSError and UnicodeDecodeError pass through for the caller to name; YamlError says the file is too big."""
    with path.open("rb") as stream:
        data = stream.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            size = max(path.stat().st_size, len(data))
            raise YamlError(f"{size:,} bytes; a config file is at most {MAX_FILE_BYTES:,} bytes")
    return data.decode("utf-8")


def read_yaml(path: Path) -> Any:
    """Read and parse one file of at most MAX_FILE_BYTES. OSError and UnicodeDecodeError pass through for the
    caller to name; YamlError says what is wrong (the caller adds the path)."""
    return parse_yaml(read_config_text(path))
