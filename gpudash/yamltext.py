"""Deterministic YAML text for the generated rule files and configs."""

from __future__ import annotations

from typing import Any

import yaml

from gpudash.escape import yaml_style


class _Dumper(yaml.SafeDumper):
    """Block style throughout; multi-line strings (long PromQL) as literal blocks."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        # Indent list items under their key, as promtool's and Alertmanager's own examples do.
        super().increase_indent(flow, False)

    def ignore_aliases(self, data: Any) -> bool:
        return True  # no &anchors: every generated file reads on its own


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=yaml_style(value))


_Dumper.add_representer(str, _str)


def dump(data: Any) -> str:
    """YAML text for `data`, keys in the order given, wide enough that no expression is folded."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=10_000,
                     allow_unicode=True)
