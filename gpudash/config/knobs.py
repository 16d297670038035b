"""A section of thresholds.yaml as a frozen dataclass that declares its own keys: each field's annotation
says what its value is (`Span`, `Percent`, `Ratio`, `Number(lo, hi)`, `Whole(lo, hi)`), and `read_knobs`
reads any such section, in field order, with the bounds and the error messages of `FieldReader`.

A field's key is its name without a trailing underscore (`for_` is `for:`); a field with no such annotation
is not a key of its own (its section's parser fills it).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Annotated, Any, TypeVar, get_args, get_origin, get_type_hints

from gpudash.config.durations import Duration
from gpudash.config.fields import FieldReader

T = TypeVar("T")


@dataclass(frozen=True)
class Number:
    """A finite number from lo to hi."""

    lo: float
    hi: float

    def read(self, r: FieldReader, key: str) -> float:
        return r.number(key, self.lo, self.hi)


@dataclass(frozen=True)
class Whole:
    """A whole number from lo to hi."""

    lo: int
    hi: int

    def read(self, r: FieldReader, key: str) -> int:
        return r.integer(key, self.lo, self.hi)


@dataclass(frozen=True)
class _Duration:
    def read(self, r: FieldReader, key: str) -> Duration:
        return r.duration(key)


Span = Annotated[Duration, _Duration()]  # a window, a horizon or a `for:` (5m, 1h)
Percent = Annotated[float, Number(0, 100)]  # a utilization level, 0 to 100
Ratio = Annotated[float, Number(0, 1)]  # a fraction, 0 to 1


def read_knobs(r: FieldReader, cls: type[T]) -> T:
    """One section as `cls`, each knob read from its key (the other fields keep their defaults)."""
    return cls(**{name: knob.read(r, name.rstrip("_")) for name, knob in _knobs(cls).items()})


def _knobs(cls: type) -> dict[str, Any]:
    hints = get_type_hints(cls, include_extras=True)
    out = {}
    for f in fields(cls):
        hint = hints[f.name]
        if get_origin(hint) is Annotated:
            out[f.name] = get_args(hint)[1]
    return out
