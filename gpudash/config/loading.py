"""Loading the settings: thresholds.yaml and the optional site config (gpudash.yaml), read once.

Loading happens before anything is written, so a bad file never leaves half-written output.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpudash.config.site import Site, parse_site
from gpudash.config.thresholds import Thresholds, parse_thresholds
from gpudash.errors import ConfigError
from gpudash.yamlfile import YamlError, read_yaml

DEFAULT_THRESHOLDS = Path("thresholds.yaml")
DEFAULT_SITE = Path("gpudash.yaml")


@dataclass(frozen=True)
class Settings:
    thresholds: Thresholds
    site: Site
    thresholds_path: Path
    site_path: Path = DEFAULT_SITE  # the site config read; with none, where gpudash writes the site's id


def _read_yaml(path: Path) -> Any:
    try:
        return read_yaml(path)
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found (pass --thresholds PATH or run from the repository root)") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except YamlError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def load_thresholds(path: Path) -> Thresholds:
    data = _read_yaml(path)
    if data is None:
        raise ConfigError(f"{path}: the file is empty")
    return parse_thresholds(str(path), data)


def load_site(path: Path | None) -> Site:
    if path is None:
        return Site()
    return parse_site(str(path), _read_yaml(path))


def load_settings(thresholds: Path | None = None, site: Path | None = None) -> Settings:
    """Load thresholds.yaml and the site config (gpudash.yaml when present), or raise ConfigError.

    The environment may point elsewhere: GPUDASH_THRESHOLDS and GPUDASH_SITE.
    """
    thresholds_path = thresholds or Path(os.environ.get("GPUDASH_THRESHOLDS", DEFAULT_THRESHOLDS))
    site_path = site or (Path(os.environ["GPUDASH_SITE"]) if os.environ.get("GPUDASH_SITE") else None)
    if site_path is None and DEFAULT_SITE.exists():
        site_path = DEFAULT_SITE
    return Settings(load_thresholds(thresholds_path), load_site(site_path), thresholds_path,
                    site_path or DEFAULT_SITE)
