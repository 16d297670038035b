"""Reading a config file's mapping: typed values, each checked where it is read, each error naming its key path.

A value is accepted only if every generated file can represent it: numbers are finite, durations fit
Prometheus and stay readable, names hold no control characters or line breaks, addresses are host:port,
URLs are http(s) with a host. The escaping in gpudash.escape then makes any accepted string safe to write.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Iterator
from typing import Any

from gpudash.config.durations import DURATION_EXPECTED, Duration, parse_duration
from gpudash.errors import ConfigError
from gpudash.repository import GRAFANA_UID

_HOST = r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?)"
_HOST_PORT = re.compile(rf"{_HOST}:([0-9]{{1,5}})")
_URL = re.compile(rf"https?://{_HOST}(?::[0-9]{{1,5}})?(?:[/?#][!-~]*)?")
_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NOT_IN_NAMES = ("Cc", "Cs", "Zl", "Zp")  # control characters, lone surrogates, line and paragraph separators


def name_problem(value: str) -> str | None:
    """Why `value` cannot be a name in a generated file, or None when it can."""
    if any(unicodedata.category(c) in _NOT_IN_NAMES for c in value):
        return f"expected text without control characters or line breaks, got {value!r}"
    return None


def host_port_problem(value: str) -> str | None:
    """Why `value` is not host:port (a DNS name or IP, and a port from 1 to 65535), or None."""
    match = _HOST_PORT.fullmatch(value)
    if not match or not 1 <= int(match.group(1)) <= 65535:
        return f"expected host:port (a host name or IP address and a port from 1 to 65535), got {value!r}"
    return None


def url_problem(value: str) -> str | None:
    """Why `value` is not an http(s) URL with a host, or None. The value is not repeated: it may hold a secret."""
    if not _URL.fullmatch(value) or _PERCENT.search(value):
        return "expected an http:// or https:// URL with a host, no user:password@ and no spaces"
    return None


class FieldReader:
    """Walks one YAML mapping, checking types and remembering which keys were used."""

    def __init__(self, source: str, data: Any, path: str = "") -> None:
        self.source = source
        self.path = path
        if not isinstance(data, dict):
            self.fail(f"expected a mapping, got {show(data)}")
        self.data: dict[str, Any] = data
        self.used: set[str] = set()

    def where(self, key: str | None = None) -> str:
        parts = [p for p in (self.path, key) if p]
        return ".".join(parts) or "(top level)"

    def fail(self, message: str, key: str | None = None) -> None:
        raise ConfigError(f"{self.source}: {self.where(key)}: {message}")

    def has(self, key: str) -> bool:
        return key in self.data

    def _get(self, key: str, default: Any) -> Any:
        self.used.add(key)
        if key not in self.data:
            if default is REQUIRED:
                self.fail("is required but missing", key)
            return default
        return self.data[key]

    def section(self, key: str, required: bool = True) -> FieldReader:
        value = self._get(key, REQUIRED if required else {})
        return FieldReader(self.source, value, self.where(key))

    def number(self, key: str, lo: float | None = None, hi: float | None = None, default: Any = None) -> float:
        value = self._get(key, REQUIRED if default is None else default)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(f"expected {_range_text(lo, hi)}, got {show(value)}", key)
        # NaN compares false with every bound, so it is refused by name (and infinity with it).
        if not math.isfinite(value) or (lo is not None and value < lo) or (hi is not None and value > hi):
            self.fail(f"expected {_range_text(lo, hi)}, got {value}", key)
        return float(value)

    def ratio(self, key: str, default: Any = None) -> float:
        return self.number(key, 0.0, 1.0, default)

    def integer(self, key: str, lo: int = 0, hi: int | None = None, default: Any = None) -> int:
        value = self._get(key, REQUIRED if default is None else default)
        if isinstance(value, bool) or not isinstance(value, int):
            bound = f" from {lo}" + (f" to {hi}" if hi is not None else "")
            self.fail(f"expected a whole number{bound}, got {show(value)}", key)
        if value < lo or (hi is not None and value > hi):
            self.fail(f"expected a whole number from {lo}" + (f" to {hi}" if hi else "") + f", got {value}", key)
        return int(value)

    def duration(self, key: str, default: str | None = None) -> Duration:
        value = self._get(key, REQUIRED if default is None else default)
        if not isinstance(value, str):
            self.fail(f"{DURATION_EXPECTED}, got {show(value)}", key)
        try:
            return parse_duration(value)
        except ValueError as exc:
            self.fail(str(exc), key)
            raise  # unreachable: fail() raises

    def string(self, key: str, default: str | None = None, choices: tuple[str, ...] = ()) -> str:
        """A name: non-empty text without control characters or line breaks (or one of `choices`)."""
        value = self._get(key, REQUIRED if default is None else default)
        if not isinstance(value, str) or not value:
            # YAML reads a plain 08, 1e3 or true as a number or a boolean; quotes make it text
            quote = " (quote it to mean text)" if isinstance(value, (int, float)) else ""
            self.fail(f"expected a non-empty string, got {show(value)}{quote}", key)
        if choices and value not in choices:
            self.fail(f"expected one of {', '.join(choices)}, got {value!r}", key)
        return self.checked(key, value, name_problem)

    def checked(self, key: str, value: str, *checks: Callable[[str], str | None]) -> str:
        """`value` if every check (a function returning a problem or None) passes; else fail naming `key`."""
        for check in checks:
            problem = check(value)
            if problem:
                self.fail(problem, key)
        return value

    def host_port(self, key: str, default: str | None = None) -> str:
        return self.checked(key, self.string(key, default), host_port_problem)

    def url(self, key: str, default: str | None = None) -> str:
        return self.checked(key, self.string(key, default), url_problem)

    def env_name(self, key: str) -> str:
        value = self.string(key)
        if not _ENV_NAME.fullmatch(value):
            self.fail(f"expected an environment variable name (letters, digits, _), got {value!r}", key)
        return value

    def grafana_uid(self, key: str, default: str | None = None) -> str:
        value = self.string(key, default)
        if not GRAFANA_UID.fullmatch(value):
            self.fail(f"expected a Grafana uid: 1 to 40 of letters, digits, '-' and '_', got {value!r}", key)
        return value

    def int_list(self, key: str, lo: int = 0, hi: int = 1 << 31) -> tuple[int, ...]:
        value = self._get(key, REQUIRED)
        if not isinstance(value, list) or not value:
            self.fail(f"expected a non-empty list of whole numbers, got {show(value)}", key)
        for item in value:
            if isinstance(item, bool) or not isinstance(item, int) or not lo <= item <= hi:
                self.fail(f"expected whole numbers from {lo} to {hi}, got {show(item)}", key)
        return tuple(sorted(set(value)))

    def items(self, key: str) -> Iterator[tuple[int, FieldReader]]:
        value = self._get(key, [])
        if not isinstance(value, list):
            self.fail(f"expected a list, got {show(value)}", key)
        for index, item in enumerate(value):
            yield index, FieldReader(self.source, item, f"{self.where(key)}[{index}]")

    def done(self) -> None:
        """Reject keys nobody asked for: a typo must not silently fall back to a default."""
        unknown = sorted(set(self.data) - self.used, key=str)
        if unknown:
            known = ", ".join(sorted(self.used))
            self.fail(f"unknown key {unknown[0]!r} (known keys: {known})", None)


REQUIRED = object()


def _range_text(lo: float | None, hi: float | None) -> str:
    if lo == 0.0 and hi == 1.0:
        return "a number between 0 and 1"
    if lo is not None and hi is not None:
        return f"a number from {lo:g} to {hi:g}"
    if lo is not None:
        return f"a number of at least {lo:g}"
    return "a number"


def show(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value)
