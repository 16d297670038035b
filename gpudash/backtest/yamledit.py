"""Changing values in thresholds.yaml in place: every comment, blank line and the order of keys kept.

thresholds.yaml is written by hand, with a comment on each knob; loading and dumping it would lose them.
This edits the text of one `key: value` line at a time (found by its path of indented keys), then the whole
result is parsed as thresholds before it replaces the file, atomically: all or nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from gpudash.config.thresholds import parse_thresholds
from gpudash.errors import ConfigError
from gpudash.files import write_tree
from gpudash.yamlfile import YamlError, parse_yaml

_KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_][A-Za-z0-9_]*):(?P<space>[ \t]*)(?P<value>[^#\n]*?)"
                  r"(?P<rest>[ \t]*(?:#.*)?)$")


def set_value(text: str, path: Sequence[str], value: str) -> str:
    """`text` with the scalar at `path` (e.g. ("temperature", "gpu_warning_celsius")) replaced by `value`.

    The comment after it keeps its column where the new value fits before it.
    """
    lines = text.split("\n")
    stack: list[tuple[int, str]] = []
    for number, line in enumerate(lines):
        match = _KEY.match(line)
        if not match:
            continue
        indent = len(match.group("indent"))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, match.group("key")))
        if tuple(k for _, k in stack) != tuple(path):
            continue
        old = match.group("value")
        if not old:
            raise ConfigError(f"{'.'.join(path)} is a section, not a value")
        width = len(match.group("space")) + len(old)
        spaced = f" {value}".ljust(width) if match.group("rest").strip() else f" {value}"
        lines[number] = f"{match.group('indent')}{match.group('key')}:{spaced}{match.group('rest')}"
        return "\n".join(lines)
    raise ConfigError(f"{'.'.join(path)} not found in thresholds.yaml")


def edited(text: str, changes: Mapping[tuple[str, ...], str]) -> str:
    for path, value in changes.items():
        text = set_value(text, path, value)
    return text


def write_validated(path: Path, text: str) -> None:
    """Check that `text` loads as thresholds, then replace `path` with it atomically (gpudash.files.write_tree).

    A `path` that is a symbolic link keeps being one: the file it points to is replaced, in its own folder.
    """
    try:
        parse_thresholds(str(path), parse_yaml(text))
    except YamlError as exc:
        raise ConfigError(f"the proposed thresholds do not load, nothing written: {path}: {exc}") from None
    except ConfigError as exc:
        raise ConfigError(f"the proposed thresholds do not load, nothing written: {exc}") from None
    write_tree(path.parent, {path.name: text.encode("utf-8")})
