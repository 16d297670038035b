"""The config file reader: YAML 1.2 scalars, and bounds on size, nesting and number length, each one line."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml
from support.paths import ROOT

from gpudash import yamlfile
from gpudash.init.sitekit import SITE_ID_MARK
from gpudash.yamlfile import MAX_DEPTH, MAX_DIGITS, YamlError, parse_yaml, read_yaml


@pytest.mark.parametrize(("text", "value"), [
    # YAML 1.1 (PyYAML's safe_load) reads each of these as a number, a boolean or a date; YAML 1.2 as text
    ("1:30", "1:30"), ("190:20:30", "190:20:30"), ("on", "on"), ("off", "off"), ("yes", "yes"), ("No", "No"),
    ("y", "y"), ("1_000", "1_000"), ("0b101", "0b101"), ("2026-01-01", "2026-01-01"), ("=", "="),
    ("1:30.5", "1:30.5"), ("+.5e", "+.5e"),
    # and these mean the same in both, or what YAML 1.2 says
    ("true", True), ("False", False), ("TRUE", True), ("~", None), ("null", None), ("NULL", None), ("", None),
    ("017", 17), ("0o17", 15), ("0x1F", 31), ("+5", 5), ("-5", -5), ("0", 0), ("0.5", 0.5), (".5", 0.5),
    ("5.", 5.0), ("1e3", 1000.0), ("-2.5E-1", -0.25), (".inf", math.inf), ("-.Inf", -math.inf),
])
def test_plain_scalars_are_read_as_yaml_1_2_core_schema(text: str, value: object) -> None:
    loaded = parse_yaml(f"key: {text}\n")["key"]
    assert loaded == value and type(loaded) is type(value)


def test_nan_is_a_float_and_the_schema_holds_for_keys() -> None:
    assert math.isnan(parse_yaml("x: .nan\n")["x"])
    assert parse_yaml("on: 1\n13: a\n1:30: b\n") == {"on": 1, 13: "a", "1:30": "b"}


@pytest.mark.parametrize(("text", "message"), [
    ("x: !!int 1:30\n", "line 1, column 4: expected a whole number (YAML 1.2), got '1:30'"),
    ("x: !!int 1_000\n", "line 1, column 4: expected a whole number (YAML 1.2), got '1_000'"),
    ("x: !!bool yes\n", "line 1, column 4: expected true or false (YAML 1.2), got 'yes'"),
    ("x: !!float 1:30.5\n", "line 1, column 4: expected a number (YAML 1.2), got '1:30.5'"),
])
def test_an_explicit_tag_follows_the_same_schema(text: str, message: str) -> None:
    with pytest.raises(YamlError) as info:
        parse_yaml(text)
    assert str(info.value) == message


@pytest.mark.parametrize("text", [
    "x: " + "[" * 3000 + "]" * 3000 + "\n",  # flow style
    "".join(f"{' ' * level}k{level}:\n" for level in range(3000)) + " " * 3000 + "v: 1\n",  # block style
    "[" * 3000 + ": x\n",  # as a key
])
def test_deep_nesting_is_one_line_not_a_recursion_error(text: str) -> None:
    with pytest.raises(YamlError, match=rf"^line \d+, column \d+: nested more than {MAX_DEPTH} levels deep$"):
        parse_yaml(text)


def test_nesting_up_to_the_limit_loads() -> None:
    data = parse_yaml("[" * (MAX_DEPTH - 1) + "1" + "]" * (MAX_DEPTH - 1) + "\n")
    for _ in range(MAX_DEPTH - 1):
        (data,) = data
    assert data == 1


@pytest.mark.parametrize(("text", "digits"), [("9" * 5001, 5001), ("-" + "1" * 4301, 4301),
                                              ("0x" + "f" * (MAX_DIGITS + 1), MAX_DIGITS + 1)])
def test_a_very_long_integer_is_one_line_not_a_value_error(text: str, digits: int) -> None:
    with pytest.raises(YamlError) as info:
        parse_yaml(f"n: {text}\n")
    assert str(info.value) == f"line 1, column 4: a whole number of {digits} digits; a config file holds at most 100"


def test_the_longest_integer_loads() -> None:
    assert parse_yaml(f"n: {'9' * MAX_DIGITS}\n")["n"] == 10 ** MAX_DIGITS - 1


def test_a_file_over_the_size_limit_is_refused_unread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "big.yaml"
    path.write_bytes(b"# " + b"x" * ((1 << 20) - 3) + b"\n")
    assert read_yaml(path) is None  # exactly 1 MiB: read
    path.write_bytes(b"a: 1\n" * ((12 << 20) // 5))  # 12 MiB: minutes of PyYAML
    with pytest.raises(YamlError) as info:
        read_yaml(path)
    assert str(info.value) == f"{path.stat().st_size:,} bytes; a config file is at most 1,048,576 bytes"
    monkeypatch.setattr(yamlfile, "MAX_FILE_BYTES", 5)
    path.write_bytes(b"a: 1\n")
    assert read_yaml(path) == {"a": 1}
    path.write_bytes(b"a: 12\n")
    with pytest.raises(YamlError, match=r"^6 bytes; a config file is at most 5 bytes$"):
        read_yaml(path)


@pytest.mark.parametrize("name", ["thresholds.yaml", "gpudash/init/template/thresholds.yaml",
                                  "gpudash/init/template/gpudash.yaml", "deploy/web-config.example.yml",
                                  "deploy/kubernetes/web-config.yml"])
def test_the_config_files_gpudash_ships_read_the_same_as_under_yaml_1_1(name: str) -> None:
    # The template's site id is filled in by `gpudash init`, as it does.
    text = (ROOT / name).read_text(encoding="utf-8").replace(SITE_ID_MARK, "site-0a1b2c3d")
    assert parse_yaml(text) == yaml.safe_load(text)
