"""Which signals the exporter publishes: all of the catalog, or those named in a dcgm-exporter counters CSV.

The CSV format is dcgm-exporter's (``-f/--collectors``): one ``FIELD, type, help`` per line, ``#`` starts a
comment, and ``type`` is ``gauge``, ``counter`` or ``label`` (a static label put on every series). So an
existing counters file selects the same series here. Names, types and help text still come from the
catalog, so they cannot drift from what the dashboards and rules expect. Beyond DCGM's fields the CSV may
name the exporter's own signals (``gpudash_*``). A field the exporter cannot read is an error at start.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpudash.catalog import BY_DCGM_NAME, DRIVER_VERSION_LABEL, PER_LINK_KEYS, SIGNALS
from gpudash.errors import ExporterError
from gpudash.yamlfile import YamlError, read_config_text

# Published whatever the CSV says: without them nobody can tell a lost GPU from a missing one, or from one that
# fell off the bus before the exporter started.
ALWAYS = ("gpu_up", "gpus_expected")


@dataclass(frozen=True)
class Collectors:
    keys: tuple[str, ...]  # catalog keys, in catalog order
    driver_version_label: bool = True
    origin: str = "all catalog signals"


def all_signals(*, nvlink_per_link: bool = False) -> Collectors:
    """Every catalog signal; the per-link NVLink series only with ``nvlink_per_link``."""
    return Collectors(tuple(s.key for s in SIGNALS if nvlink_per_link or s.key not in PER_LINK_KEYS), True)


def with_nvlink_per_link(chosen: Collectors) -> Collectors:
    """``chosen`` and the per-link NVLink series (`--nvlink-per-link`)."""
    keys = set(chosen.keys) | PER_LINK_KEYS
    return Collectors(tuple(s.key for s in SIGNALS if s.key in keys), chosen.driver_version_label, chosen.origin)


def parse_collectors(text: str, origin: str) -> Collectors:
    """Parse counters-CSV text; ``origin`` names the file in error messages."""
    chosen: set[str] = set(ALWAYS)
    driver_label = False
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split(",", 2)]
        where = f"{origin}:{lineno}"
        if len(parts) < 2 or not parts[0]:
            raise ExporterError(f"{where}: expected 'FIELD, type, help', got {line!r}")
        name, kind = parts[0], parts[1]
        if kind == "label":
            if name != DRIVER_VERSION_LABEL:
                raise ExporterError(f"{where}: label field {name!r} is not supported (only {DRIVER_VERSION_LABEL})")
            driver_label = True
        elif kind not in ("gauge", "counter"):
            raise ExporterError(f"{where}: {name}: type must be gauge, counter or label, got {kind!r}")
        elif name not in BY_DCGM_NAME:
            raise ExporterError(
                f"{where}: unknown field {name!r}: the exporter cannot read it "
                "(`gpudash exporter --list-fields` shows the fields it can)"
            )
        else:
            chosen.add(BY_DCGM_NAME[name].key)
    if chosen == set(ALWAYS):
        raise ExporterError(f"{origin}: names no field to publish")
    return Collectors(tuple(s.key for s in SIGNALS if s.key in chosen), driver_label, origin)


def load_collectors(path: Path) -> Collectors:
    try:
        text = read_config_text(path)
    except OSError as exc:
        raise ExporterError(f"{path}: cannot read collectors file: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ExporterError(f"{path}: collectors file is not UTF-8 text") from None
    except YamlError as exc:
        raise ExporterError(f"{path}: collectors file: {exc}") from None
    return parse_collectors(text, str(path))
