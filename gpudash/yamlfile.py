"""Reading a YAML file a person wrote: safe types only, no duplicate keys, no anchors or aliases.

PyYAML's `safe_load` keeps the last of two equal keys without a word (a second `memory:` section silently
replaces the first) and expands aliases wherever the loaded data is walked, so a few lines of
`&a [*b, *b, ...]` become billions of items in the code that reads them. Config files need neither, so
both are refused with the file, line and column. The exporter reads its web-config through this module
too, so it imports nothing but PyYAML.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


class YamlError(ValueError):
    """The text is not acceptable YAML; the message says where (line and column) and why, on one line."""


class _StrictLoader(yaml.SafeLoader):
    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            raise YamlError(f"{_where(event.start_mark)}aliases (*{event.anchor}) are not accepted in a config file")
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            raise YamlError(f"{_where(event.start_mark)}anchors (&{anchor}) are not accepted in a config file")
        return super().compose_node(parent, index)

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


def read_yaml(path: Path) -> Any:
    """Read and parse one file. OSError and UnicodeDecodeError pass through for the caller to name."""
    return parse_yaml(path.read_text(encoding="utf-8"))
