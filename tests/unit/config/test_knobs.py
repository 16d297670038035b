"""Sections of thresholds.yaml read from the dataclasses that declare their keys (gpudash.config.knobs)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Annotated, get_type_hints

import pytest
import yaml
from support.paths import ROOT

from gpudash.config.durations import parse_duration
from gpudash.config.fields import FieldReader
from gpudash.config.knobs import Percent, Ratio, Span, Whole, read_knobs
from gpudash.config.thresholds import Alerts
from gpudash.errors import ConfigError


@dataclass(frozen=True)
class Sample:
    window: Span
    busy_percent: Percent
    min_gpus: Annotated[int, Whole(2, 64)]
    share: Ratio
    for_: Span
    note: str = "kept"  # no knob annotation: not a key


def reader(data: dict[str, object]) -> FieldReader:
    return FieldReader("thresholds.yaml", data, "alerts.sample")


GOOD = {"window": "5m", "busy_percent": 50, "min_gpus": 4, "share": 0.5, "for": "10m"}


def test_each_annotated_field_is_read_from_its_key_and_for_is_the_key_of_for_() -> None:
    r = reader(dict(GOOD))
    sample = read_knobs(r, Sample)
    assert sample == Sample(parse_duration("5m"), 50.0, 4, 0.5, parse_duration("10m"))
    assert r.used == set(GOOD)
    r = reader({**GOOD, "note": "x"})
    read_knobs(r, Sample)
    with pytest.raises(ConfigError, match=r"alerts\.sample: unknown key 'note'"):
        r.done()


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("window", 5, "alerts.sample.window: expected a positive duration such as 5m or 1h, got 5"),
    ("busy_percent", 101, "alerts.sample.busy_percent: expected a number from 0 to 100, got 101"),
    ("min_gpus", 1, "alerts.sample.min_gpus: expected a whole number from 2 to 64, got 1"),
    ("share", "half", "alerts.sample.share: expected a number between 0 and 1, got 'half'"),
    ("for", None, "alerts.sample.for: is required but missing"),
])
def test_a_bad_value_names_its_key_path(key: str, value: object, expected: str) -> None:
    data = {**GOOD, key: value}
    if value is None:
        del data[key]
    with pytest.raises(ConfigError) as caught:
        read_knobs(reader(data), Sample)
    assert str(caught.value) == f"thresholds.yaml: {expected}"


def test_the_alert_sections_declare_exactly_the_keys_of_thresholds_yaml() -> None:
    shipped = yaml.safe_load((ROOT / "thresholds.yaml").read_text())["alerts"]
    sections = get_type_hints(Alerts)
    assert list(sections) == [f.name for f in dataclasses.fields(Alerts)]
    assert set(shipped) == set(sections)
    for name, cls in sections.items():
        hints = get_type_hints(cls, include_extras=True)
        declared = {f.name.rstrip("_") for f in dataclasses.fields(cls) if hasattr(hints[f.name], "__metadata__")}
        special = {"overrides"} if name == "xid" else set()  # read by the section's own parser
        assert declared | special == set(shipped[name]), name
